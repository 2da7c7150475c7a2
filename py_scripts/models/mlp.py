"""The MLP (harness/contract/models.py, ``mlp``): the AMP recipe's Linear+ReLU ... Linear. The twin of
``r_scripts/models/mlp.R``; its float64 reference is ``harness/judge/models/mlp.py``."""

from __future__ import annotations

from typing import Any

import torch

from py_scripts.tracing import trace_point

__all__ = ["build", "forward"]


def build(spec: dict[str, Any]) -> torch.nn.Sequential:
    """``num_layers`` Linear layers, a ReLU after each but the last, on the spec's device (their values are the
    fixtures', copied in by ``make_model``)."""
    layers: list[torch.nn.Module] = []
    for k in range(spec["num_layers"]):
        out_features = spec["out_size"] if k == spec["num_layers"] - 1 else spec["in_size"]
        layers.append(torch.nn.Linear(spec["in_size"], out_features, device=spec["device"]))
        if k < spec["num_layers"] - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def forward(net: torch.nn.Sequential, x: torch.Tensor, step: int, unused: int, custom: Any) -> torch.Tensor:
    """Layer by layer, each module's output a trace point (``forward.layer0``, ``forward.relu0``, ...); ``unused``: a
    layer left out this step, its Linear and its ReLU (-1: none); ``custom``: ``(layer, function)``, that layer computed
    by ``function(x, linear)`` in place of the Linear's own forward.

    What ``nn.Sequential.forward`` does (each module on the previous output), written out because R torch has
    tensor hooks but no module forward hooks: both languages name their points here, in the same order.
    """
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    for k, linear in enumerate(linears):
        if k == unused:
            continue
        x = custom[1](x, linear) if custom is not None and custom[0] == k else linear(x)
        trace_point(step, f"forward.layer{k}", x)
        if k < len(linears) - 1:  # every Linear but the last is followed by its ReLU
            x = net[2 * k + 1](x)
            trace_point(step, f"forward.relu{k}", x)
    return x
