"""The trace: named intermediates of a traced call, sent to the harness's recorder. The twin of ``r_scripts/tracing.R``.

Every point costs nothing unless the harness traces the call (docs/tracing.md): it installs a sink with
:func:`set_trace_sink`, and may cut the trace to the names it still needs (:func:`cut_trace`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import torch

from py_scripts.model import named_parameters
from py_scripts.run_spec import torch_dtype

__all__ = ["amp_parity_point", "cut_trace", "set_trace_sink", "trace_optimizer_state", "trace_parameters", "trace_point",
           "trace_scheduler", "traced", "tracing", "name_trace_parameters"]


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


def name_trace_parameters(net: torch.nn.Module) -> None:
    """Name the ``{param}`` points inside the optimizer's step by ``net``'s parameters from now on (by the tensor's
    identity: PyTorch's loops do not all count): ``make_optimizer`` calls it."""
    _trace_state["params"] = {id(param): name for name, param in named_parameters(net)}


def trace_parameters(step: int, stage: str, net: torch.nn.Module, grads: bool) -> None:
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


def trace_optimizer_state(step: int, opt: torch.optim.Optimizer, net: torch.nn.Module, spec: dict[str, Any],
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
