"""Which precision the GEMMs of one training step really ran in, measured with ``torch.profiler`` in the worker.

A cell's run record says what the script *asked* for (autocast on, a dtype); it cannot show that the
matrix multiplies, nearly all of a step's time, actually ran in half precision. A model built or
called outside the autocast region trains correctly in float32 and reports a plausible loss, and only
its speed betrays it. Profiling one steady-state step and splitting GEMM time by input dtype turns
that into a number (``half_share``), and the parent's :func:`harness.judge.gemm_precision.amp_gemm_problem`
into a one-line verdict.

Runs in the Python worker only (``torch`` is imported inside :func:`profile_gemms`); the parent never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from harness.contract.dtypes import DTYPES, FULL_DTYPES, HALF_DTYPES

__all__ = ["FULL_DTYPES", "GEMM_KERNEL_PATTERNS", "GEMM_OPS", "HALF_DTYPES", "profile_gemms"]

#: ATen's leaf matrix-multiply ops → index of their first matrix operand (``addmm(bias, a, b)``), whose
#: dtype is the GEMM's. Composites (``aten::linear``, ``aten::matmul``) dispatch to these and are not counted.
GEMM_OPS: dict[str, int] = {
    "aten::mm": 0, "aten::bmm": 0, "aten::mv": 0,
    "aten::addmm": 1, "aten::baddbmm": 1, "aten::_addmm_activation": 1, "aten::addmv": 1,
}
#: Substrings (case-insensitive) of CUDA GEMM kernel names: cuBLAS "gemm"/"nvjet" (Hopper), CUTLASS
#: "xmma"/"cutlass", and the tensor-core instruction shapes "s16816"/"hmma" in Ampere-era kernel names.
GEMM_KERNEL_PATTERNS: tuple[str, ...] = ("gemm", "nvjet", "xmma", "cutlass", "s16816", "hmma")
#: libtorch's dtype spellings in profiler records (``c10::`` prefix stripped) → the contract's names.
_DTYPE_NAMES = {d.profiler: d.name for d in DTYPES.values() if d.profiler is not None}


def profile_gemms(
    run_workload: Callable[[dict[str, Any], str], dict[str, Any]], run_spec: dict[str, Any], mode: str, step: int = 3
) -> dict[str, Any]:
    """GEMM time of the ``step``-th optimizer step (1-based) of ``run_workload(run_spec, mode)``, by dtype.

    The scripts are not changed for this: a global optimizer step hook advances the profiler, so
    exactly one step is recorded, after one un-recorded warm-up step (the profiler's own start-up
    would otherwise land in the data). Steps skipped by a GradScaler do not call ``optimizer.step``
    and so do not count. No weights are written (``weights_out`` null). Times are the kernel time of
    each op on CUDA and its CPU time on CPU.

    Raises:
        ValueError: ``step`` < 2 (the warm-up step needs a step before it) or beyond the run's steps.
        RuntimeError: fewer than ``step`` optimizer steps ran, so the window was never recorded.
    """
    steps = int(run_spec["epochs"]) * int(run_spec["num_batches"])
    if not 2 <= step <= steps:
        raise ValueError(f"step must be between 2 and the run's {steps} optimizer steps, but got {step!r}.")
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.profiler import ProfilerActivity, profile, schedule

    device = str(run_spec["device"])
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    fired = 0
    plan = schedule(wait=step - 2, warmup=1, active=1, repeat=1)
    with profile(activities=activities, schedule=plan, record_shapes=True) as prof:

        def advance(*_: Any) -> None:
            nonlocal fired
            fired += 1
            prof.step()

        handle = register_optimizer_step_post_hook(advance)
        try:
            run_workload({**run_spec, "weights_out": None}, mode)
        finally:
            handle.remove()
    if fired < step:
        raise RuntimeError(f"only {fired} optimizer steps ran ({steps} planned), so step {step} was never profiled.")
    events = list(prof.events())
    dtypes = _kineto_dtypes(prof)
    cuda = device == "cuda"
    ops: dict[tuple[str, str], list[float]] = {}
    for evt in events:
        if evt.name not in GEMM_OPS or _under_gemm(evt):
            continue
        entry = ops.setdefault((evt.name, _op_dtype(evt, dtypes)), [0, 0.0])
        entry[0] += 1
        entry[1] += (_device_us(evt) if cuda else float(evt.cpu_time_total)) / 1e6
    kernels: dict[str, list[float]] = {}
    for evt in events:
        if cuda and _is_device_event(torch, evt) and any(p in evt.name.lower() for p in GEMM_KERNEL_PATTERNS):
            entry = kernels.setdefault(evt.name, [0, 0.0])
            entry[0] += 1
            entry[1] += _device_us(evt) / 1e6
    by_dtype: dict[str, float] = {}
    for (_, dtype), (_, seconds) in ops.items():
        by_dtype[dtype] = by_dtype.get(dtype, 0.0) + seconds
    gemm_seconds = sum(by_dtype.values())
    half = sum(by_dtype.get(d, 0.0) for d in HALF_DTYPES)
    return {
        "step": step,
        "device": device,
        "mode": mode,
        "gemm_seconds": gemm_seconds,
        "seconds_by_dtype": by_dtype,
        "half_share": half / gemm_seconds if gemm_seconds > 0 else None,
        "ops": [
            {"name": n, "dtype": d, "count": int(c), "seconds": s}
            for (n, d), (c, s) in sorted(ops.items(), key=lambda item: -item[1][1])
        ],
        "kernels": [  # the top few say which kernel family ran; the full list is noise in a report
            {"name": n, "count": int(c), "seconds": s}
            for n, (c, s) in sorted(kernels.items(), key=lambda item: -item[1][1])[:5]
        ],
    }


def _kineto_dtypes(prof: Any) -> dict[int, tuple[str, list[str]]]:
    """Op id → (name, input dtypes) from the raw kineto events.

    A ``FunctionEvent``'s ``id`` is its kineto event's ``correlation_id()``. Only CPU op events (linked
    correlation id 0) are kept: CUDA kernels and runtime calls carry CUPTI's own correlation ids, which
    may collide with op ids. Empty when this torch exposes no kineto results.
    """
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    found: dict[int, tuple[str, list[str]]] = {}
    for kevt in results.events() if results is not None else []:
        linked = getattr(kevt, "linked_correlation_id", lambda: 0)()
        if linked == 0 and str(kevt.device_type()).endswith("CPU") and kevt.name() in GEMM_OPS:
            found[int(kevt.correlation_id())] = (kevt.name(), list(kevt.dtypes()))
    return found


def _op_dtype(evt: Any, kineto: Mapping[int, tuple[str, list[str]]]) -> str:
    """The GEMM's dtype from its matrix operand; ``unknown`` when no record of it can be found."""
    name, found = kineto.get(int(evt.id), ("", []))
    if name != evt.name:  # no kineto record (or a mismatched one): newer torch copies dtypes onto the event
        found = list(getattr(evt, "input_dtypes", None) or [])
    names = [_DTYPE_NAMES.get(str(d).removeprefix("c10::")) for d in found]
    index = GEMM_OPS[evt.name]
    if index < len(names) and names[index] is not None:
        return str(names[index])
    return next((n for n in names if n is not None), "unknown")


def _under_gemm(evt: Any) -> bool:
    """Whether a GEMM op encloses ``evt`` (its time is already in the outer op's)."""
    parent = evt.cpu_parent
    while parent is not None:
        if parent.name in GEMM_OPS:
            return True
        parent = parent.cpu_parent
    return False


def _is_device_event(torch: Any, evt: Any) -> bool:
    return bool(evt.device_type != torch.autograd.DeviceType.CPU)


def _device_us(evt: Any) -> float:
    """Kernel microseconds: ``device_time_total`` (torch ≥ 2.4), ``cuda_time_total`` before it."""
    if hasattr(type(evt), "device_time_total"):
        return float(evt.device_time_total)
    return float(evt.cuda_time_total)
