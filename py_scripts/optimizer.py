"""The run spec's optimizer, built by one code path for every row. The twin of ``r_scripts/optimizer.R``."""

from __future__ import annotations

from typing import Any

import torch

from py_scripts.model import layer_parameters, named_parameters
from py_scripts.tracing import name_trace_parameters

__all__ = ["make_optimizer"]


def make_optimizer(spec: dict[str, Any], net: torch.nn.Module, layers: range | None = None,
                   groups: dict[str, Any] | None = None) -> torch.optim.Optimizer:
    """The run spec's optimizer (``optimizer``: its row of harness/workload/optimizers.py, under PyTorch's names).

    One code path for every optimizer: ``torch.optim.<class>(params, **args)``. JSON has no tuples; PyTorch's pairs
    (betas, etas, step_sizes) are tuples in its signatures, so lists become tuples. R's twin calls the R torch
    function the row names with the same values. ``layers``: only those layers' parameters (0-based, the model's layers;
    None: all). ``groups``: the ``param_groups`` row's factors (the loop feature's hooks pass them; None: one group).
    """
    python = spec["optimizer"]["python"]
    args = {name: tuple(value) if isinstance(value, list) else value for name, value in python["args"].items()}
    params: Any = net.parameters() if layers is None else layer_parameters(net, layers)
    if groups is not None:  # weights in the first group, biases in a second with their own lr (and weight decay)
        named = named_parameters(net)
        # the second group is every other parameter, as R's twin makes it: a parameter named neither `.weight` nor `.bias`
        # (the transformer's in_proj_weight, the GRU's weight_ih_l0) is trained there, never left out of both groups
        biases = {"params": [p for n, p in named if not n.endswith(".weight")], "lr": args["lr"] * groups["bias_lr_factor"]}
        if "weight_decay" in args:
            biases["weight_decay"] = groups["bias_weight_decay"]
        params = [{"params": [p for n, p in named if n.endswith(".weight")]}, biases]
    optimizer: torch.optim.Optimizer = getattr(torch.optim, python["class"])(params, **args)
    name_trace_parameters(net)  # what {param} points are named by
    return optimizer
