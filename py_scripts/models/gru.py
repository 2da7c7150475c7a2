"""The recurrent model (harness/contract/models.py, ``gru``): a GRU over a sequence, its last hidden state into a Linear
head. The twin of ``r_scripts/models/gru.R``; its float64 reference is ``harness/judge/models/gru.py``."""

from __future__ import annotations

from typing import Any

import torch

from py_scripts.tracing import trace_point

__all__ = ["build", "forward"]


def build(spec: dict[str, Any]) -> torch.nn.ModuleDict:
    """The GRU (batch first) and the head, on the spec's device."""
    dims, device = spec["model"]["dims"], spec["device"]
    return torch.nn.ModuleDict({
        "gru": torch.nn.GRU(dims["FEATURES"], dims["HIDDEN"], batch_first=True, device=device),
        "head": torch.nn.Linear(dims["HIDDEN"], dims["OUTPUTS"], device=device),
    })


def forward(net: torch.nn.ModuleDict, x: torch.Tensor, step: int, unused: int, custom: Any) -> torch.Tensor:
    """The GRU's outputs at every step (``forward.gru``), its last hidden state (``forward.hidden``), the head's output
    (``forward.head``); ``custom``: ``(1, function)``, the head computed by ``function(hidden, head)``.

    Raises:
        ValueError: ``unused`` names a layer (this model has none to leave out) or ``custom`` another layer than the head.
    """
    if unused != -1 or (custom is not None and custom[0] != 1):
        raise ValueError("the GRU model has no layer to leave out and can replace layer 1 (its head) only")
    outputs, hidden = net["gru"](x)
    trace_point(step, "forward.gru", outputs)
    last = hidden[0]
    trace_point(step, "forward.hidden", last)
    out = custom[1](last, net["head"]) if custom is not None else net["head"](last)
    trace_point(step, "forward.head", out)
    return out
