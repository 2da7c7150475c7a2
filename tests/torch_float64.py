"""The workload in torch float64: what the hand-written float64 reference (harness/judge/reference.py) is checked against.

Autograd and ``torch.optim`` in float64 on CPU, the optimizer built from its row's ``run_spec`` as the Python scripts
build it: two implementations of one algorithm that differ only in the order of float64 roundings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from harness.workload.features import FEATURES, NO_FEATURE, micro_batches
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import WorkloadSpec

__all__ = ["torch_float64_run"]


def torch_float64_run(
    spec: WorkloadSpec, arrays: Mapping[str, np.ndarray], name: str, clip: bool = False, skipped: frozenset[int] = frozenset(),
    overrides: Mapping[str, Any] | None = None, grad_hook: Callable[[torch.nn.Module], None] | None = None,
    feature: str = NO_FEATURE,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The workload in torch float64 (``model.double()``, CPU), its optimizer built from the row's ``run_spec`` as the
    Python scripts build it, in the loop of ``feature`` (PyTorch's own scheduler, accumulation, ``clip_grad_value_``);
    ``grad_hook`` may change the gradients after backward (a planted mistake)."""
    layers: list[torch.nn.Module] = []
    for k, (out_f, in_f) in enumerate(spec.layer_shapes):
        linear = torch.nn.Linear(in_f, out_f)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(arrays[f"layer{k}.weight"]))
            linear.bias.copy_(torch.from_numpy(arrays[f"layer{k}.bias"]))
        layers += [linear, torch.nn.ReLU()]
    net = torch.nn.Sequential(*layers[:-1]).double()
    built = OPTIMIZERS[name].run_spec(spec.lr, overrides)["python"]
    args = {k: tuple(v) if isinstance(v, list) else v for k, v in built["args"].items()}
    row = FEATURES.get(feature)
    if row is not None and row.kind == "frozen":
        for param in [m for m in net if isinstance(m, torch.nn.Linear)][row.args["layer"]].parameters():
            param.requires_grad_(False)
    params: Any = net.parameters()
    if row is not None and row.kind == "param_groups":
        named = list(net.named_parameters())
        biases = {"params": [p for n, p in named if n.endswith("bias")], "lr": args["lr"] * row.args["bias_lr_factor"]}
        if "weight_decay" in args:
            biases["weight_decay"] = row.args["bias_weight_decay"]
        params = [{"params": [p for n, p in named if n.endswith("weight")]}, biases]
    opt = getattr(torch.optim, built["class"])(params, **args)
    every = micro_batches(feature)
    scheduler = None
    if row is not None and row.scheduler:
        scheduler = getattr(torch.optim.lr_scheduler, row.python)(opt, **row.run_spec()["python"]["args"])
    data, targets = torch.from_numpy(arrays["data"]).double(), torch.from_numpy(arrays["targets"]).double()
    losses = []
    for _ in range(spec.epochs):
        for i in range(spec.num_batches):
            loss = torch.nn.functional.mse_loss(net(data[i]), targets[i])
            (loss / every if every > 1 else loss).backward()
            losses.append(loss.item())
            if len(losses) % every:
                continue
            if grad_hook is not None:
                grad_hook(net)
            if clip:
                torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=spec.clip_max_norm)
            if row is not None and row.kind == "clip_value":
                torch.nn.utils.clip_grad_value_(net.parameters(), clip_value=row.args["clip_value"])
            if len(losses) - 1 not in skipped:  # GradScaler.step does not call opt.step() on a skipped step
                opt.step()
            opt.zero_grad()
            if scheduler is not None:
                scheduler.step()
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    weights = {f"layer{k}.{kind}": getattr(m, kind).detach().numpy().copy() for k, m in enumerate(linears) for kind in ("weight", "bias")}
    return np.array(losses), weights
