"""The transformer text classifier (harness/contract/models.py, ``transformer``): token and position embeddings (padding
index 0), one ``TransformerEncoderLayer`` with a key-padding mask, masked mean pooling, a Linear head, and
``CrossEntropyLoss`` on class indices plus on class probabilities (with ``label_smoothing`` in the ``transformer_smoothing``
row, which runs these files). The twin of ``r_scripts/models/transformer.R``; its
float64 reference is ``harness/judge/models/transformer.py``.
"""

from __future__ import annotations

from typing import Any

import torch

from py_scripts.tracing import trace_point

__all__ = ["build", "forward", "loss"]


def build(spec: dict[str, Any]) -> torch.nn.ModuleDict:
    """The four modules, named as the contract names their parameters (``embed.weight``, ``encoder.linear1.bias``, ...),
    on the spec's device. Dropout 0: a dropout mask is each binding's own RNG, which parity cannot share."""
    dims, device = spec["model"]["dims"], spec["device"]
    width = dims["WIDTH"]
    return torch.nn.ModuleDict({
        "embed": torch.nn.Embedding(dims["VOCAB"], width, padding_idx=0, device=device),
        "position": torch.nn.Embedding(dims["SEQ"], width, device=device),
        "encoder": torch.nn.TransformerEncoderLayer(width, dims["HEADS"], dims["FEEDFORWARD"], dropout=0.0, batch_first=True,
                                                    device=device),
        "head": torch.nn.Linear(width, dims["CLASSES"], device=device),
    })


def forward(net: torch.nn.ModuleDict, x: torch.Tensor, step: int, unused: int, custom: Any) -> torch.Tensor:
    """Each module's output a trace point (``forward.embed``, ``forward.position``, ``forward.encoder``, ``forward.pool``,
    ``forward.head``); ``unused``: 1 leaves the encoder layer out this step (the only layer a sequence can go without);
    ``custom``: ``(2, function)``, the head computed by ``function(pooled, head)``.

    Raises:
        ValueError: ``unused`` or ``custom`` names a layer this model cannot leave out or replace.
    """
    if unused not in (-1, 1) or (custom is not None and custom[0] != 2):
        raise ValueError("the transformer can leave out layer 1 (its encoder layer) and replace layer 2 (its head) only")
    tokens = x.long()  # the fixture's ids are whole float32 numbers
    padding = tokens == 0
    h = net["embed"](tokens)
    trace_point(step, "forward.embed", h)
    positions = net["position"](torch.arange(tokens.shape[1], device=tokens.device))
    trace_point(step, "forward.position", positions)
    h = h + positions
    if unused != 1:
        h = net["encoder"](h, src_key_padding_mask=padding)
        trace_point(step, "forward.encoder", h)
    keep = (~padding).unsqueeze(-1).to(h.dtype)
    pooled = (h * keep).sum(dim=1) / keep.sum(dim=1)
    trace_point(step, "forward.pool", pooled)
    out = custom[1](pooled, net["head"]) if custom is not None else net["head"](pooled)
    trace_point(step, "forward.head", out)
    return out


def loss(output: torch.Tensor, target: torch.Tensor, dims: dict[str, int]) -> torch.Tensor:
    """Cross-entropy on the class indices (the target's column 0) plus cross-entropy on the class probabilities (the
    other columns), each with ``CrossEntropyLoss`` as its users call it: with ``label_smoothing`` where the model's row
    gives one (``LABEL_SMOOTHING_PERCENT``, the ``transformer_smoothing`` row), else without."""
    classes = target[:, 0].long()
    probs = target[:, 1:]
    smoothing = dims.get("LABEL_SMOOTHING_PERCENT", 0) / 100
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=smoothing) if smoothing else torch.nn.CrossEntropyLoss()
    return criterion(output, classes) + criterion(output, probs)
