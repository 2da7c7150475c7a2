"""The workload in torch float64: what the hand-written float64 reference (harness/judge/reference.py) is checked against.

Autograd and ``torch.optim`` in float64 on CPU, the optimizer built from its row's ``run_spec`` as the Python scripts
build it: two implementations of one algorithm that differ only in the order of float64 roundings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from harness.workload.features import FEATURES, NO_FEATURE, epoch_factor, micro_batches, second_group_weight_decay
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import WorkloadSpec

__all__ = ["torch_float64_run"]


def torch_float64_run(
    spec: WorkloadSpec, arrays: Mapping[str, np.ndarray], name: str, clip: bool = False, skipped: frozenset[int] = frozenset(),
    overrides: Mapping[str, Any] | None = None, grad_hook: Callable[[torch.nn.Module], None] | None = None,
    feature: str = NO_FEATURE,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The workload in torch float64 (``model.double()``, CPU), its optimizer built from the row's ``run_spec`` as the
    Python scripts build it, in the loop of ``feature`` (PyTorch's own scheduler, accumulation, ``clip_grad_value_``, ``clip_grad_norm_``);
    ``grad_hook`` may change the gradients after backward (a planted mistake)."""
    layers: list[torch.nn.Module] = []
    for k, (out_f, in_f) in enumerate(p.shape for p in spec.parameters if p.name.endswith(".weight")):  # the MLP's Linear layers
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
    if row is not None and row.two_groups:
        named = list(net.named_parameters())
        group_args = FEATURES["param_groups"].args
        biases = {"params": [p for n, p in named if n.endswith("bias")], "lr": args["lr"] * group_args["bias_lr_factor"]}
        weight_decay = second_group_weight_decay(args)
        if weight_decay is not None:
            biases["weight_decay"] = weight_decay
        params = [{"params": [p for n, p in named if n.endswith("weight")]}, biases]
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    multi = row is not None and row.kind == "multi_optimizer"
    if multi:  # two optimizers: the layers before the head, and the head
        assert row is not None
        split = len(linears) - int(row.args["head_layers"])
        params = [p for m in linears[:split] for p in m.parameters()]
        head = getattr(torch.optim, built["class"])([p for m in linears[split:] for p in m.parameters()], **args)
    opt = getattr(torch.optim, built["class"])(params, **args)
    every = micro_batches(feature)
    scheduler = None
    if row is not None and row.scheduler:
        scheduler_args: dict[str, Any] = row.run_spec(float(args["lr"]))["python"]["args"]
        if row.lr_lambda:
            scheduler_args["lr_lambda"] = lambda epoch: epoch_factor(row.args, epoch)
        scheduler = getattr(torch.optim.lr_scheduler, row.python)(opt, **scheduler_args)
    data, targets = torch.from_numpy(arrays["data"]).double(), torch.from_numpy(arrays["targets"]).double()
    losses = []
    for _ in range(spec.epochs):
        for i in range(spec.num_batches):
            unused = -1
            if row is not None and row.kind == "sometimes_used" and len(losses) % int(row.args["every"]):
                unused = int(row.args["layer"])
            modules = [m for k, m in enumerate(net) if k // 2 != unused]  # a Linear and its ReLU are modules 2k and 2k+1
            output = torch.nn.Sequential(*modules)(data[i])
            loss = torch.nn.functional.mse_loss(output, targets[i])
            total = loss / every if every > 1 else loss
            if multi:
                assert row is not None
                total = total + row.args["second_loss_weight"] * torch.nn.functional.mse_loss(output, torch.zeros_like(output))
            if row is not None and row.kind == "penalty":  # the norm of the gradients, differentiated again
                grads = torch.autograd.grad(loss, list(net.parameters()), create_graph=True)
                total = total + row.args["weight"] * torch.stack([g.pow(2).sum() for g in grads]).sum().sqrt()
            total.backward()
            losses.append(loss.item())
            if len(losses) % every:
                continue
            if grad_hook is not None:
                grad_hook(net)
            if clip:
                torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=spec.clip_max_norm)
            if row is not None and row.kind == "clip_norm":
                torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=row.args["max_norm"],
                                               norm_type=float("inf") if row.args["inf_norm"] else 2.0)
            if row is not None and row.kind == "clip_value":
                torch.nn.utils.clip_grad_value_(net.parameters(), clip_value=row.args["clip_value"])
            if len(losses) - 1 not in skipped:  # GradScaler.step does not call opt.step() on a skipped step
                opt.step()
            if multi:  # the second optimizer found no inf (the overflow is in layer 0): it steps
                head.step()
                head.zero_grad()
            if row is not None and row.kind == "sometimes_used" and row.args["set_to_none"] >= 0:
                opt.zero_grad(set_to_none=bool(row.args["set_to_none"]))
            else:
                opt.zero_grad()
            if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                scheduler.step(losses[-1])
            elif scheduler is not None:
                scheduler.step()
    weights = {f"layer{k}.{kind}": getattr(m, kind).detach().numpy().copy() for k, m in enumerate(linears) for kind in ("weight", "bias")}
    return np.array(losses), weights
