"""The workload's pieces shared by the Python scripts: the twin of ``r_scripts/common.R``.

The same names in the same order as common.R (tests/unit/scripts/test_r_scripts.py checks it). The contract both
halves follow is ``docs/contract.md``. Only plain data leaves this module: the run record is a dict of
numbers, strings and lists, the final weights a safetensors file. A script run by hand goes through
:mod:`py_scripts.shell`; the harness's worker imports the scripts (harness/worker_side/python_handler.py).
"""

from __future__ import annotations

import functools
import gc
import json
import os
import platform
import secrets
import tempfile
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

__all__ = [
    "CLOCK_NAME",
    "CHECKPOINT_LAYOUT",
    "amp_parity_point",
    "checkpoint_prefix",
    "clock",
    "device_name",
    "dtype_name",
    "forward",
    "found_inf",
    "inject_overflow",
    "linear_layers",
    "load_checkpoint",
    "load_fixtures",
    "make_grad_scaler",
    "make_model",
    "make_optimizer",
    "make_record",
    "mode_properties",
    "named_parameters",
    "pause_gc",
    "peak_memory_bytes",
    "record_to_json",
    "reset_peak_memory",
    "resume_gc",
    "save_checkpoint",
    "save_final_weights",
    "set_trace_sink",
    "step_scheduler",
    "tracing",
    "sync_device",
    "torch_dtype",
    "trace_optimizer_state",
    "trace_parameters",
    "trace_point",
]

#: What ``clock()`` reads, as each record names it: ``time.perf_counter`` is CLOCK_MONOTONIC on Linux,
#: in nanoseconds.
CLOCK_NAME = "time.perf_counter"


def mode_properties(spec: dict[str, Any], mode: str) -> dict[str, Any]:
    """What ``mode`` does (autocast, the weights' dtype, the loss scaler, clipping), from the modes the run spec declares
    for this script (docs/contract.md); a mode the script does not run is refused, naming the ones it does."""
    modes = spec["modes"]
    if mode not in modes:
        raise ValueError(f"mode must be one of {', '.join(repr(m) for m in modes)}, but got {mode!r}.")
    properties: dict[str, Any] = modes[mode]
    return properties


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype for a contract dtype name (``bfloat16``, ``float16``, ...): torch's own of that name."""
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype must name a dtype of torch, but got {name!r}.")
    return dtype


def dtype_name(dtype: torch.dtype, spec: dict[str, Any]) -> str:
    """The contract's name for a torch dtype (``torch.bfloat16`` → ``bfloat16``), one of the run spec's ``dtypes``
    (harness/contract/dtypes.py; R maps libtorch's names back through the same table)."""
    name = str(dtype).removeprefix("torch.")
    if name not in spec["dtypes"]:
        raise ValueError(f"Unexpected dtype {name!r}: expected one of {', '.join(map(repr, spec['dtypes']))}.")
    return name


#: The last fixture file loaded, on its device, keyed by (path, mtime, size, device).
_fixture_cache: dict[tuple[str, int, int, str], dict[str, torch.Tensor]] = {}


def load_fixtures(spec: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The fixture tensors on the spec's device (the same file R loads with ``safe_load_file``).

    The last file loaded stays in memory for the next call in this process: the harness times
    repeated calls, and a timed round must measure training, not reading a gigabyte from disk (at
    ``recipe``). A rewritten file (new mtime or size) is read again. The tensors are never written to.
    """
    stat = os.stat(spec["fixture_path"])
    key = (spec["fixture_path"], stat.st_mtime_ns, stat.st_size, spec["device"])
    if key not in _fixture_cache:
        _fixture_cache.clear()  # one file at a time: a recipe fixture is a gigabyte
        _fixture_cache[key] = load_file(spec["fixture_path"], device=spec["device"])
    return _fixture_cache[key]


def make_model(spec: dict[str, Any], fixtures: dict[str, torch.Tensor]) -> torch.nn.Sequential:
    """The recipe's MLP (Linear+ReLU … Linear) with weights copied from the fixtures."""
    layers: list[torch.nn.Module] = []
    for k in range(spec["num_layers"]):
        out_features = spec["out_size"] if k == spec["num_layers"] - 1 else spec["in_size"]
        linear = torch.nn.Linear(spec["in_size"], out_features, device=spec["device"])
        with torch.no_grad():
            linear.weight.copy_(fixtures[f"layer{k}.weight"])
            linear.bias.copy_(fixtures[f"layer{k}.bias"])
        layers.append(linear)
        if k < spec["num_layers"] - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def linear_layers(net: torch.nn.Sequential) -> list[torch.nn.Linear]:
    """The Linear layers in order (every other module is a ReLU)."""
    return [m for m in net if isinstance(m, torch.nn.Linear)]


def named_parameters(net: torch.nn.Sequential) -> list[tuple[str, torch.nn.Parameter]]:
    """Every parameter with the name the fixtures, the final weights and the trace give it (``layer0.weight``, ...), in
    the order the optimizer steps them (``net.parameters()``'s)."""
    return [(f"layer{k}.{kind}", getattr(linear, kind)) for k, linear in enumerate(linear_layers(net)) for kind in ("weight", "bias")]


def make_optimizer(spec: dict[str, Any], net: torch.nn.Sequential, layers: range | None = None) -> torch.optim.Optimizer:
    """The run spec's optimizer (``optimizer``: its row of harness/workload/optimizers.py, under PyTorch's names).

    One code path for every optimizer: ``torch.optim.<class>(params, **args)``. JSON has no tuples; PyTorch's pairs
    (betas, etas, step_sizes) are tuples in its signatures, so lists become tuples. R's twin calls the R torch
    function the row names with the same values. ``layers``: only those Linear layers' parameters (0-based; None: all).
    """
    python = spec["optimizer"]["python"]
    args = {name: tuple(value) if isinstance(value, list) else value for name, value in python["args"].items()}
    params: Any = net.parameters() if layers is None else [p for k in layers for p in linear_layers(net)[k].parameters()]
    groups = spec["feature"]["param_groups"] if spec.get("feature") else None
    if groups is not None:  # weights in the first group, biases in a second with their own lr (and weight decay)
        named = named_parameters(net)
        biases = {"params": [p for n, p in named if n.endswith(".bias")], "lr": args["lr"] * groups["bias_lr_factor"]}
        if "weight_decay" in args:
            biases["weight_decay"] = groups["bias_weight_decay"]
        params = [{"params": [p for n, p in named if n.endswith(".weight")]}, biases]
    optimizer: torch.optim.Optimizer = getattr(torch.optim, python["class"])(params, **args)
    _trace_state["params"] = {id(param): name for name, param in named_parameters(net)}  # what {param} points are named by
    return optimizer


def make_optimizers(spec: dict[str, Any], net: torch.nn.Sequential) -> list[torch.optim.Optimizer]:
    """The loop's optimizers: the run spec's one over every parameter, or under a ``multi_optimizer`` feature two of the
    row's optimizer, the first over the layers before the last ``head_layers``, the second over those."""
    multi = loop_feature(spec, "multi_optimizer")
    if multi is None:
        return [make_optimizer(spec, net)]
    split = spec["num_layers"] - multi["head_layers"]
    return [make_optimizer(spec, net, range(split)), make_optimizer(spec, net, range(split, spec["num_layers"]))]


def loop_feature(spec: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The arguments of the run spec's loop feature (``feature``: its row of harness/workload/features.py) when it is of
    ``kind`` (``scheduler``, ``accumulate``, ``clip_value``), else ``None`` (the plain loop, or another feature)."""
    feature = spec.get("feature")
    return dict(feature["args"]) if feature and feature["kind"] == kind else None


def clip_norm_type(clip_norm: dict[str, Any]) -> float:
    """A ``clip_norm`` row's ``norm_type`` for ``clip_grad_norm_``: infinity where ``inf_norm`` is 1 (the run spec's JSON
    has no infinity, so the row carries a flag), else 2."""
    return float("inf") if clip_norm["inf_norm"] else 2.0


def freeze_layer(spec: dict[str, Any], net: torch.nn.Sequential) -> None:
    """A ``frozen`` loop feature: the row's layer gets ``requires_grad`` false (its parameters are still handed to the
    optimizer, which then sees them without a gradient at every step)."""
    frozen = loop_feature(spec, "frozen")
    if frozen is not None:
        for param in linear_layers(net)[frozen["layer"]].parameters():
            param.requires_grad_(False)


def unused_layer(spec: dict[str, Any], step: int) -> int:
    """The layer a ``sometimes_used`` loop feature leaves out of the forward pass at ``step`` (0-based), or -1 (every
    layer used): the row's layer, on the steps that are not a multiple of its ``every``."""
    used = loop_feature(spec, "sometimes_used")
    return int(used["layer"]) if used is not None and step % used["every"] != 0 else -1


def zero_grad(spec: dict[str, Any], opt: torch.optim.Optimizer) -> None:
    """``opt.zero_grad()`` as the loop feature says: a ``sometimes_used`` row's ``set_to_none`` (1 true, 0 false, -1 no
    argument: the binding's default, PyTorch's True); otherwise with no argument, as the plain loop always did."""
    used = loop_feature(spec, "sometimes_used")
    if used is None or used["set_to_none"] < 0:
        opt.zero_grad()
    else:
        opt.zero_grad(set_to_none=bool(used["set_to_none"]))


@functools.cache
def amp_linear(device: str) -> type[torch.autograd.Function]:
    """A Linear layer's forward and backward as a custom autograd function (``addmm``; the gradients by hand), made AMP
    aware as PyTorch's AMP examples' last section says: ``custom_fwd`` records the autocast state of the forward and
    ``custom_bwd`` runs the backward in it. One class per device type (the decorators take it)."""

    class AmpLinear(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type=device)
        def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x, weight)
            return torch.addmm(bias, x, weight.t())

        @staticmethod
        @torch.amp.custom_bwd(device_type=device)
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            x, weight = ctx.saved_tensors
            return grad.mm(weight), grad.t().mm(x), grad.sum(0)

    return AmpLinear


def custom_layer(spec: dict[str, Any]) -> tuple[int, Callable[[torch.Tensor, torch.nn.Linear], torch.Tensor]] | None:
    """A ``custom_function`` loop feature's layer and the function that computes it (:func:`amp_linear`), for
    :func:`forward`; ``None`` otherwise."""
    custom = loop_feature(spec, "custom_function")
    if custom is None:
        return None
    function = amp_linear(spec["device"])
    return int(custom["layer"]), lambda x, linear: function.apply(x, linear.weight, linear.bias)


def make_scheduler(spec: dict[str, Any], opt: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The run spec's learning-rate scheduler (a ``scheduler`` feature, or a ``resume`` one that checkpoints a scheduler:
    the row names its class; ``torch.optim.lr_scheduler.<class>(opt, **args)``), or ``None``. R's twin calls the R torch
    function the row names with the same values."""
    feature = spec.get("feature")
    if not feature or not feature["python"]["class"]:
        return None
    python = spec["feature"]["python"]
    args = dict(python["args"])
    if spec["feature"]["lr_lambda"] is not None:  # the row's declared factor, not code
        args["lr_lambda"] = epoch_factor(spec["feature"]["lr_lambda"])
    scheduler: torch.optim.lr_scheduler.LRScheduler = getattr(torch.optim.lr_scheduler, python["class"])(opt, **args)
    return scheduler


def epoch_factor(declared: dict[str, Any]) -> Callable[[int], float]:
    """A row's declared ``lr_lambda`` (harness/workload/features.py, ``LR_LAMBDA_ARGS``): a linear warmup then an
    inverse-time decay, in the order of operations R's twin uses."""
    warmup, decay = declared["warmup"], declared["decay"]
    return lambda epoch: min(1.0, (epoch + 1) / warmup) / (1 + decay * epoch)


def step_scheduler(step: int, spec: dict[str, Any], opt: torch.optim.Optimizer,
                   scheduler: torch.optim.lr_scheduler.LRScheduler, loss: torch.Tensor) -> None:
    """The scheduler's step after the iteration's ``update()`` (skipped iterations included), fed the iteration's loss
    where the row says (ReduceLROnPlateau's ``step(metrics)``, as its docs' loop does), then its trace."""
    if spec["feature"]["on_loss"]:
        scheduler.step(loss.detach())  # type: ignore[arg-type]  # ReduceLROnPlateau.step(metrics), the loss tensor as it is
    else:
        scheduler.step()
    trace_scheduler(step, spec, opt, scheduler)


def trace_scheduler(step: int, spec: dict[str, Any], opt: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler, prefix: str = "") -> None:
    """After the scheduler's step: its ``last_epoch``, the state the row names (``scheduler.<name>``, a float64 scalar)
    and each param group's lr, the one the next optimizer step uses (``optim.lr.group<i>``, 0-based), and the momentum or
    beta1 a row's scheduler cycles (``optim.momentum.group<i>``): float64 scalars, as both bindings keep them as
    doubles. ``prefix`` ``resume.``: as a checkpoint's load read them back."""
    if not traced(f"{prefix}scheduler.", step) and not traced(f"{prefix}optim."):
        return
    trace_point(step, f"{prefix}scheduler.last_epoch", torch.tensor(int(scheduler.last_epoch), dtype=torch.int64))
    for name in spec["feature"]["traced"]:
        trace_point(step, f"{prefix}scheduler.{name}", torch.tensor(float(getattr(scheduler, name)), dtype=torch.float64))
    for i, group in enumerate(opt.param_groups):
        trace_point(step, f"{prefix}optim.lr.group{i}", torch.tensor(float(group["lr"]), dtype=torch.float64))
        if spec["feature"]["cycles_momentum"]:  # beta1 where the group has betas, as OneCycleLR decides
            momentum = group["betas"][0] if "betas" in group else group["momentum"]
            trace_point(step, f"{prefix}optim.momentum.group{i}", torch.tensor(float(momentum), dtype=torch.float64))


def make_grad_scaler(spec: dict[str, Any], enabled: bool) -> tuple[torch.amp.GradScaler, str | None]:
    """The spec's gradient scaler (``enabled=False``: one whose calls pass through), and which check of the binding was
    lifted to get it (never one here).

    ``torch.amp.GradScaler(device)`` takes CPU tensors itself; R's twin may have to lift R torch's CUDA-only check on
    CPU, and the record says so (``lifted_check``).
    """
    scaler = torch.amp.GradScaler(
        spec["device"], init_scale=spec["init_scale"], growth_factor=spec["growth_factor"],
        backoff_factor=spec["backoff_factor"], growth_interval=spec["growth_interval"], enabled=enabled,
    )
    return scaler, None


def inject_overflow(net: torch.nn.Sequential) -> None:
    """Put an inf into one gradient element (the first weight of the first layer that has a gradient: a frozen layer's
    has none), as an fp16 overflow would."""
    with torch.no_grad():
        next(layer for layer in linear_layers(net) if layer.weight.grad is not None).weight.grad[0, 0] = float("inf")


def found_inf(scaler: torch.amp.GradScaler, opt: torch.optim.Optimizer) -> torch.Tensor:
    """What the scaler's inf check found for ``opt`` this step, summed over devices (0: the step ran).

    GradScaler keeps it per optimizer until ``update()``; ``_found_inf_per_device`` is its own accessor
    (torch/amp/grad_scaler.py), filled by ``unscale_`` and read by ``step`` to decide the skip.
    """
    return sum(scaler._found_inf_per_device(opt).values(), torch.zeros((), device=scaler._scale.device))  # type: ignore[union-attr]


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


def _optimizer_order(opt: torch.optim.Optimizer) -> list[str]:
    """The parameters' names in the order the optimizer numbers them in its ``state_dict()`` (group by group)."""
    return [_trace_state["params"][id(param)] for group in opt.param_groups for param in group["params"]]


def save_checkpoint(spec: dict[str, Any], prefix: str, step: int, net: torch.nn.Sequential, opt: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler | None, scaler: torch.amp.GradScaler) -> None:
    """The training state after ``step`` iterations in the contract's layout (docs/contract.md#checkpoint), from each
    object's own ``state_dict()``: the parameters, the optimizer row's state entries (PyTorch numbers them 0-based in
    ``opt.state_dict()["state"]``; the layout names them), each group's lr, the scheduler's last epoch, step count and
    last lr, and the scaler's scale and growth tracker."""
    tensors = {f"model.{name}": param.detach().contiguous() for name, param in named_parameters(net)}
    counts: dict[str, int] = {}
    state = opt.state_dict()
    order = _optimizer_order(opt)
    for index, entries in state["state"].items():
        for entry in spec["optimizer"]["state"]:
            value = entries.get(entry["python"])
            key = f"{entry['name']}.{order[index]}"
            if value is not None and entry["count"]:
                counts[key] = int(value)
            elif value is not None:
                tensors[f"optim.{key}"] = value.detach().contiguous()
    scheduled = scheduler.state_dict() if scheduler is not None else {}
    scaled = scaler.state_dict()  # empty where the scaler is disabled
    meta = {
        "layout": CHECKPOINT_LAYOUT, "step": step, "lr": [group["lr"] for group in state["param_groups"]],
        "count_names": list(counts), "count_values": list(counts.values()),
        "last_epoch": scheduled.get("last_epoch"), "scheduler_step_count": scheduled.get("_step_count"),
        "last_lr": scheduled.get("_last_lr"), "scale": scaled.get("scale"), "growth_tracker": scaled.get("_growth_tracker"),
    }
    save_file({name: t.cpu() for name, t in tensors.items()}, prefix + ".safetensors")
    Path(prefix + ".json").write_text(json.dumps(meta))


def load_checkpoint(spec: dict[str, Any], prefix: str, net: torch.nn.Sequential, opt: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler | None, scaler: torch.amp.GradScaler, at: int) -> int:
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
    for index, name in enumerate(_optimizer_order(opt)):
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
    if meta["scale"] is not None:
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
    if scaler.is_enabled():
        read_back = scaler.state_dict()  # before the next scale() the scaler holds them as its initial values
        trace_point(at, "resume.scaler.scale", torch.tensor(float(read_back["scale"]), dtype=torch.float32))
        trace_point(at, "resume.scaler.growth_tracker", torch.tensor(int(read_back["_growth_tracker"]), dtype=torch.int32))
    return int(meta["step"])


def forward(net: torch.nn.Sequential, x: torch.Tensor, step: int, unused: int = -1,
            custom: tuple[int, Callable[[torch.Tensor, torch.nn.Linear], torch.Tensor]] | None = None) -> torch.Tensor:
    """The model's forward, layer by layer, each module's output a trace point (``forward.layer0``, ``forward.relu0``, ...);
    ``unused``: a layer left out this step, its Linear and its ReLU (loop feature ``sometimes_used``; -1: none);
    ``custom``: a layer computed by a function of the input and that layer (loop feature ``custom_function``) in place of
    the Linear's own forward.

    What ``nn.Sequential.forward`` does (each module on the previous output), written out because R torch has
    tensor hooks but no module forward hooks: both languages name their points here, in the same order.
    """
    linears = linear_layers(net)
    for k, linear in enumerate(linears):
        if k == unused:
            continue
        x = custom[1](x, linear) if custom is not None and custom[0] == k else linear(x)
        trace_point(step, f"forward.layer{k}", x)
        if k < len(linears) - 1:  # every Linear but the last is followed by its ReLU
            x = net[2 * k + 1](x)
            trace_point(step, f"forward.relu{k}", x)
    return x


#: Where trace points go: ``sink`` is None in every call but a traced one, for which the harness's worker
#: installs its recorder (harness/worker_side/trace_recorder.py) with :func:`set_trace_sink`; ``step``: the step of the
#: last point, which a point inside a binding's function is recorded at; ``params``: each parameter's name by the
#: tensor's identity (``{param}`` points).
_trace_state: dict[str, Any] = {"sink": None, "step": 0, "params": {}, "keep_only": None}


def set_trace_sink(sink: Callable[[int, str, torch.Tensor], None] | None) -> None:
    """Send every :func:`trace_point` to ``sink(step, name, tensor)`` from now on (``None``: back to no-ops)."""
    _trace_state["sink"] = sink
    _trace_state["step"] = 0
    _trace_state["keep_only"] = None


def cut_trace(names: Collection[str]) -> None:
    """From now on, trace only the points named in ``names``: the harness cut the trace, because this run parted from the
    run it is compared with at the step just ended (the worker's sink; docs/tracing.md). The rest would only cost: the
    points before the cut say where the two part, and the cell's reconciled run is compared everywhere."""
    _trace_state["keep_only"] = frozenset(names)


def traced(prefix: str, step: int | None = None) -> bool:
    """Whether a point whose name begins with ``prefix`` may be traced now: a sink is installed, and the trace is not cut,
    or a name it keeps begins so. The functions that gather several points ask it first, with the prefix their names
    share, so a cut trace skips the gathering too; :func:`trace_point` keeps exactly the names the cut keeps. ``step``,
    where given, is the current step from now on, traced or not, as :func:`trace_point` sets it (a point inside the
    binding's functions is recorded at it)."""
    if _trace_state["sink"] is None:
        return False
    if step is not None:
        _trace_state["step"] = step
    keep = _trace_state["keep_only"]
    return keep is None or any(name.startswith(prefix) for name in keep)


def tracing() -> bool:
    """Whether this call is traced (a sink is installed): the points inside the binding's functions are patched in then."""
    return _trace_state["sink"] is not None


def trace_point(step: int, name: str, value: torch.Tensor | Callable[[], torch.Tensor]) -> None:
    """One named intermediate of ``step`` for the trace (docs/tracing.md); returns at once when not tracing.

    The scripts call it once per point, in computation order, with the same names in both languages, so
    the harness can name the first tensor where two runs part. A point the training step does not compute
    itself (the clip coefficient, the scaler's inf check) is passed as a function, called only when
    tracing, so a timed call pays nothing for it (R's arguments are lazy: its twin passes the expression).
    """
    sink = _trace_state["sink"]
    if sink is None:
        return
    _trace_state["step"] = step  # kept or not: the points inside the binding's functions are at this step
    keep = _trace_state["keep_only"]
    if keep is not None and name not in keep:
        return  # cut (cut_trace): ``value`` is never called
    sink(step, name, value() if callable(value) else value)


def amp_parity_point(name: str, value: torch.Tensor | float, param: torch.Tensor | None = None) -> None:
    """A trace point inside one of the binding's functions (a *point* patch, harness/workload/patches.toml): the value the
    function computed and then uses, at the current step; ``{param}`` in ``name`` is the parameter ``param`` (the tensor
    the optimizer's loop is at: PyTorch's loops do not all count; R's twin takes the index R's loops do). A number (a
    bias correction, a step size) is recorded as a float64 scalar, as R's twin records an R double."""
    if not traced(name if param is None else name.partition("{param}")[0]):  # a {param} name: the part before it
        return
    if param is not None:
        name = name.replace("{param}", _trace_state["params"][id(param)])
    tensor = value if isinstance(value, torch.Tensor) else torch.tensor(float(value), dtype=torch.float64)
    trace_point(_trace_state["step"], name, tensor)


def trace_parameters(step: int, stage: str, net: torch.nn.Sequential, grads: bool) -> None:
    """Every parameter (``grads=False``) or its gradient (``grads=True``) as a point ``<stage>.layer0.weight``, ...

    Named like the fixtures and the final weights; skipped at once when not tracing, or when the trace is cut. A
    parameter without a gradient (a frozen layer: loop feature ``frozen``) has no gradient point.
    """
    if not traced(f"{stage}.", step):
        return
    for name, param in named_parameters(net):
        if grads and param.grad is None:
            continue
        trace_point(step, f"{stage}.{name}", param.grad if grads else param)


def trace_optimizer_state(step: int, opt: torch.optim.Optimizer, net: torch.nn.Sequential, spec: dict[str, Any],
                          stage: str = "optim") -> None:
    """The optimizer's state after its step, as points ``<stage>.<entry>.<parameter>`` (``optim.exp_avg.layer0.weight``,
    ...; ``resume.optim``: as a checkpoint's load read it back).

    The entries are the run spec's optimizer row's (``state``), each read under PyTorch's key from ``opt.state[param]``:
    the tensors the step updated and used, parameter by parameter in the order the step visits them. A step counter
    (``count``) is recorded as the whole number it holds (PyTorch keeps it in a float32 tensor, R torch in an R double or
    a C++ integer); an entry with a ``dtype`` in that dtype (the one every kernel that uses it rounds it to). Skipped at
    once when not tracing, or when the trace is cut.
    """
    if not traced(f"{stage}.", step):
        return
    entries = spec["optimizer"]["state"]
    for name, param in named_parameters(net):
        state = opt.state.get(param, {})
        for entry in entries:
            value = state.get(entry["python"])
            if value is None:
                continue
            if entry["count"]:
                value = torch.tensor(int(value), dtype=torch.int64)
            elif not isinstance(value, torch.Tensor):
                value = torch.tensor(float(value), dtype=torch.float64)
            if entry["dtype"]:
                value = value.to(torch_dtype(entry["dtype"]))
            trace_point(step, f"{stage}.{entry['name']}.{name}", value)


def sync_device(device: str) -> None:
    """Wait for queued device work, so a clock read measures finished work (no-op on CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def clock() -> float:
    """A monotonic clock in seconds, with nanosecond resolution (``CLOCK_NAME``)."""
    return time.perf_counter()


def pause_gc(spec: Mapping[str, Any]) -> bool:
    """Switch the garbage collector off for the timed loop; returns whether it was on.

    No collection first, whatever ``spec["collect_before_loop"]`` says (R's twin reads it): with torch
    imported a full collection takes ~0.1 s, which every call would pay, and it would free nothing the
    loop could reuse, since tensors are freed by reference counting at once. R cannot switch its
    collector off, and frees tensors only when it collects (see common.R).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    return was_enabled


def resume_gc(was_enabled: bool) -> float:
    """Switch the collector back on (if it was) and return the seconds spent collecting in the loop: 0, it was off."""
    if was_enabled:
        gc.enable()
    return 0.0


def reset_peak_memory(device: str) -> None:
    """Start the device's peak-memory counter afresh (CUDA only; on CPU the harness reads the worker's RSS)."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_memory_bytes(device: str) -> int | None:
    """Peak bytes allocated by tensors on CUDA since :func:`reset_peak_memory`; ``None`` on CPU."""
    return int(torch.cuda.max_memory_allocated()) if device == "cuda" else None


def save_final_weights(net: torch.nn.Sequential, path: str | None) -> None:
    """The trained weights, named like the fixtures, as a CPU float32 safetensors file; nothing when ``path`` is None.

    The harness passes no path in timed rounds after the first call: their weights equal the first's.
    """
    if path is None:
        return
    # float32 whatever the weights' dtype: a bfloat16 or float16 weight (the lowp_weights modes) is exactly a float32, and
    # NumPy, which judges the weights, has no bfloat16.
    tensors = {name: param.detach().to("cpu", torch.float32).contiguous() for name, param in named_parameters(net)}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, path)
    # safetensors writes a mkstemp file (0600) and renames it: give it the mode a plain write gives, as R's has.
    mask = os.umask(0o022)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def make_record(spec: dict[str, Any], workload_start: float, **fields: Any) -> dict[str, Any]:
    """The run record with exactly the run spec's ``record_fields`` (harness/contract/record.py, the one list both
    languages read); a missing or extra field is a script bug.

    ``seconds_workload`` is stamped last, from ``workload_start`` (the first line of ``run_workload``), so
    building the record is the script's own cost: what the harness calls its bridge starts after it.
    The version strings are the same for every call of a process, so they are looked up once.
    """
    for name, value in static_fields().items():
        fields.setdefault(name, value)
    fields.setdefault("schema_version", spec["record_schema_version"])
    fields["seconds_workload"] = clock() - workload_start
    expected = list(spec["record_fields"])  # each field's kind by name: JSON knows a list here (R's writer reads the kinds)
    if set(fields) != set(expected):
        missing, extra = set(expected) - set(fields), set(fields) - set(expected)
        raise RuntimeError(f"run record fields differ from the contract: missing {sorted(missing)}, extra {sorted(extra)}")
    return {name: fields[name] for name in expected}


@functools.cache
def static_fields() -> dict[str, Any]:
    """The record fields that are the same for every call of a process, looked up once.

    ``str()``: ``torch.__version__`` is a ``TorchVersion``, and unpickling one in the harness's process would import torch there.
    """
    return {
        "frontend": "python", "torch_version": str(torch.__version__),
        "libtorch_version": torch.__version__.split("+")[0], "language_version": f"Python {platform.python_version()}",
        "clock": CLOCK_NAME,
    }


def device_name(device: str) -> str:
    """``cpu`` or the CUDA device's name."""
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


def record_to_json(record: dict[str, Any]) -> str:
    """The record as one JSON line (the shell summary and what the worker returns)."""
    return json.dumps(record, allow_nan=True)
