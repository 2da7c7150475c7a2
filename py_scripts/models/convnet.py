"""The conv net (harness/contract/models.py, ``convnet``): a convolution with reflect padding, batch norm, ReLU, a 2x2 max
pool; a convolution with circular padding, group norm, ReLU; bilinear interpolation, a 2x2 average pool and a Linear
head. The twin of ``r_scripts/models/convnet.R``; its float64 reference is ``harness/judge/models/convnet.py``.
"""

from __future__ import annotations

from typing import Any

import torch

from py_scripts.tracing import trace_point

__all__ = ["build", "forward"]


def build(spec: dict[str, Any]) -> torch.nn.ModuleDict:
    """The modules, named as the contract names their parameters, on the spec's device. The batch norm keeps PyTorch's
    default momentum 0.1: its cumulative-average form (``momentum=None``) stops R torch at the first forward
    (docs/bugs/batchnorm-momentum-null)."""
    dims, device = spec["model"]["dims"], spec["device"]
    width, resized = dims["WIDTH"], dims["RESIZED"]
    net = torch.nn.ModuleDict({
        "conv1": torch.nn.Conv2d(dims["CHANNELS"], width, 3, padding=1, padding_mode="reflect", device=device),
        "bn": torch.nn.BatchNorm2d(width, device=device),
        "pool": torch.nn.MaxPool2d(2),
        "conv2": torch.nn.Conv2d(width, width, 3, padding=1, padding_mode="circular", device=device),
        "norm": torch.nn.GroupNorm(dims["GROUPS"], width, device=device),
        "avgpool": torch.nn.AvgPool2d(2),
        "head": torch.nn.Linear(width * (resized // 2) ** 2, dims["OUTPUTS"], device=device),
    })
    net.resized = resized  # the interpolation's output size, for forward
    return net


def forward(net: torch.nn.ModuleDict, x: torch.Tensor, step: int, unused: int, custom: Any) -> torch.Tensor:
    """Each module's output a trace point, and the batch norm's running statistics after it updates them
    (``forward.bn.running_mean``, ``forward.bn.running_var``); ``unused``: 1 leaves the second convolution and its norm
    out this step; ``custom``: ``(2, function)``, the head computed by ``function(features, head)``.

    Raises:
        ValueError: ``unused`` or ``custom`` names a layer this model cannot leave out or replace.
    """
    if unused not in (-1, 1) or (custom is not None and custom[0] != 2):
        raise ValueError("the conv net can leave out layer 1 (its second convolution) and replace layer 2 (its head) only")
    x = net["conv1"](x)
    trace_point(step, "forward.conv1", x)
    x = net["bn"](x)
    trace_point(step, "forward.bn", x)
    trace_point(step, "forward.bn.running_mean", net["bn"].running_mean)
    trace_point(step, "forward.bn.running_var", net["bn"].running_var)
    x = net["pool"](torch.relu(x))
    trace_point(step, "forward.pool", x)
    if unused != 1:
        x = net["conv2"](x)
        trace_point(step, "forward.conv2", x)
        x = torch.relu(net["norm"](x))
        trace_point(step, "forward.norm", x)
    x = torch.nn.functional.interpolate(x, size=(net.resized, net.resized), mode="bilinear", align_corners=False)
    trace_point(step, "forward.interpolate", x)
    x = net["avgpool"](x).flatten(1)
    trace_point(step, "forward.avgpool", x)
    out = custom[1](x, net["head"]) if custom is not None else net["head"](x)
    trace_point(step, "forward.head", out)
    return out
