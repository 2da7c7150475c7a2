"""A checkpoint in the contract's layout (docs/contract.md#checkpoint), written and read by each object's own
``state_dict()``: the ``resume`` loop feature's. The twin of ``r_scripts/checkpoint.R``."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from py_scripts.model import named_parameters
from py_scripts.tracing import trace_optimizer_state, trace_parameters, trace_point, trace_scheduler

__all__ = ["CHECKPOINT_LAYOUT", "checkpoint_prefix", "load_checkpoint", "save_checkpoint"]


#: The checkpoint layout both languages write and read (docs/contract.md#checkpoint): a reader refuses any other.
CHECKPOINT_LAYOUT = "amp-parity-checkpoint/1"


def checkpoint_prefix(spec: dict[str, Any]) -> str:
    """Where a ``resume`` loop feature writes its checkpoint (``<prefix>.safetensors`` and ``<prefix>.json``): beside the
    final weights, so the other language's run of the cell can load it (``resume_from``); a fresh temporary name in a
    call that writes no weights (a timed round), removed once read back."""
    weights_out = spec["weights_out"]
    if weights_out is not None:
        return str(weights_out).removesuffix(".safetensors") + ".checkpoint"
    return os.path.join(tempfile.gettempdir(), f"amp-parity-checkpoint-{os.getpid()}-{secrets.token_hex(6)}")


def _optimizer_order(opt: torch.optim.Optimizer, net: torch.nn.Module) -> list[str]:
    """The parameters' names in the order the optimizer numbers them in its ``state_dict()`` (group by group)."""
    names = {id(param): name for name, param in named_parameters(net)}
    return [names[id(param)] for group in opt.param_groups for param in group["params"]]


def save_checkpoint(spec: dict[str, Any], prefix: str, step: int, net: torch.nn.Module, opt: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler | None, scaler: torch.amp.GradScaler | None) -> None:
    """The training state after ``step`` iterations in the contract's layout (docs/contract.md#checkpoint), from each
    object's own ``state_dict()``: the parameters, the optimizer row's state entries (PyTorch numbers them 0-based in
    ``opt.state_dict()["state"]``; the layout names them), each group's lr, the scheduler's last epoch, step count and
    last lr, and the scaler's scale and growth tracker."""
    tensors = {f"model.{name}": param.detach().contiguous() for name, param in named_parameters(net)}
    counts: dict[str, int] = {}
    state = opt.state_dict()
    order = _optimizer_order(opt, net)
    for index, entries in state["state"].items():
        for entry in spec["optimizer"]["state"]:
            value = entries.get(entry["python"])
            key = f"{entry['name']}.{order[index]}"
            if value is not None and entry["count"]:
                counts[key] = int(value)
            elif value is not None:
                tensors[f"optim.{key}"] = value.detach().contiguous()
    scheduled = scheduler.state_dict() if scheduler is not None else {}
    # empty where the scaler is disabled; with_autocast's loop has none (None, as R's NULL: r_scripts/checkpoint.R)
    scaled = scaler.state_dict() if scaler is not None else {}
    meta = {
        "layout": CHECKPOINT_LAYOUT, "step": step, "lr": [group["lr"] for group in state["param_groups"]],
        "count_names": list(counts), "count_values": list(counts.values()),
        "last_epoch": scheduled.get("last_epoch"), "scheduler_step_count": scheduled.get("_step_count"),
        "last_lr": scheduled.get("_last_lr"), "scale": scaled.get("scale"), "growth_tracker": scaled.get("_growth_tracker"),
    }
    save_file({name: t.cpu() for name, t in tensors.items()}, prefix + ".safetensors")
    Path(prefix + ".json").write_text(json.dumps(meta))


def load_checkpoint(spec: dict[str, Any], prefix: str, net: torch.nn.Module, opt: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler | None, scaler: torch.amp.GradScaler | None, at: int) -> int:
    """Read a checkpoint in the contract's layout (either language's) into freshly built objects through their own
    ``load_state_dict()``, and return the iterations it was taken after. What was read back is traced at step ``at``
    (``resume.*`` points), so a first difference names the state that came back wrong.

    Raises:
        ValueError: not a checkpoint in this layout (it names the file and the layout).
    """
    meta = json.loads(Path(prefix + ".json").read_text())
    if meta.get("layout") != CHECKPOINT_LAYOUT:
        raise ValueError(f"{prefix}.json is not a checkpoint in layout {CHECKPOINT_LAYOUT!r}: write it with this harness's scripts")
    tensors = load_file(prefix + ".safetensors", device=spec["device"])
    with torch.no_grad():
        for name, param in named_parameters(net):
            param.copy_(tensors[f"model.{name}"])
    counts = dict(zip(meta["count_names"], meta["count_values"], strict=True))
    state = opt.state_dict()  # the fresh optimizer's own groups: the checkpoint sets their lr and the state
    for index, name in enumerate(_optimizer_order(opt, net)):
        entries: dict[str, torch.Tensor] = {}
        for entry in spec["optimizer"]["state"]:
            key = f"{entry['name']}.{name}"
            if entry["count"] and key in counts:  # PyTorch keeps a step count in a float32 tensor (optimizer.py _get_scalar_dtype)
                entries[entry["python"]] = torch.tensor(float(counts[key]), dtype=torch.float32)
            elif f"optim.{key}" in tensors:
                entries[entry["python"]] = tensors[f"optim.{key}"]
        if entries:
            state["state"][index] = entries
    for group, lr in zip(state["param_groups"], meta["lr"], strict=True):
        group["lr"] = lr
    opt.load_state_dict(state)
    if scheduler is not None:  # its own state_dict() with the checkpoint's values: the row's hyperparameters stay the run spec's
        scheduled = scheduler.state_dict()
        scheduled.update(last_epoch=meta["last_epoch"], _step_count=meta["scheduler_step_count"], _last_lr=meta["last_lr"])
        scheduler.load_state_dict(scheduled)
    if meta["scale"] is not None and scaler is not None:
        scaler.load_state_dict({"scale": meta["scale"], "growth_factor": spec["growth_factor"], "backoff_factor": spec["backoff_factor"],
                                "growth_interval": spec["growth_interval"], "_growth_tracker": meta["growth_tracker"]})
    if spec["weights_out"] is None:
        for suffix in (".safetensors", ".json"):
            os.remove(prefix + suffix)
    trace_point(at, "resume.step", torch.tensor(int(meta["step"]), dtype=torch.int64))
    trace_parameters(at, "resume.param", net, grads=False)
    trace_optimizer_state(at, opt, net, spec, stage="resume.optim")
    if scheduler is not None:
        trace_scheduler(at, spec, opt, scheduler, prefix="resume.")
    if scaler is not None and scaler.is_enabled():
        read_back = scaler.state_dict()  # before the next scale() the scaler holds them as its initial values
        trace_point(at, "resume.scaler.scale", torch.tensor(float(read_back["scale"]), dtype=torch.float32))
        trace_point(at, "resume.scaler.growth_tracker", torch.tensor(int(read_back["_growth_tracker"]), dtype=torch.int32))
    return int(meta["step"])
