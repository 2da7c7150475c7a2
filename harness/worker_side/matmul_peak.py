"""The machine's achievable matmul throughput per dtype: the yardstick for a training cell's TFLOP/s.

A cell's achieved TFLOP/s means little on its own: 40 TFLOP/s is excellent on one GPU and poor on
another, and on a CPU without bf16 instructions half precision is *slower* than float32. Dividing by
what a large square ``torch.mm`` reaches on the same machine, in the same dtype, with the same
threads, gives a share that can be compared across machines.

The peak is the best of the three operand layouts a Linear layer's training step multiplies in
(:data:`LAYOUTS`), not of one. Where a dtype has no vendor kernel (float16 on a CPU without
AVX512-FP16 or AMX, where oneDNN does not take it), PyTorch's fallback GEMM is several times faster for
the forward's ``x @ W.T`` than for the plain ``a @ b`` a peak used to measure alone (measured: 0.0036
against 0.0006 TFLOP/s at 256³, one thread): the cells, which run all three layouts, then reached
153-215 % of that "peak". No ``out=`` either: autograd allocates its results, and ``out=`` can take
another kernel path.

Runs in a worker: ``torch`` is imported inside the function, so the parent can import this module
without paying for (or being able to) ``import torch``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from harness.contract.dtypes import GEMM_DTYPES

__all__ = ["CPU_PLAN", "CUDA_PLAN", "DEVICES", "DTYPES", "LAYOUTS", "MatmulPlan", "measure_matmul_peak"]

DTYPES: tuple[str, ...] = GEMM_DTYPES
DEVICES: tuple[str, ...] = ("cpu", "cuda")
#: The operand layouts of a Linear layer's training step (``N`` as stored, ``T`` transposed): the forward
#: ``x @ W.T`` (NT), the input gradient ``g @ W`` (NN) and the weight gradient ``g.T @ x`` (TN).
LAYOUTS: tuple[str, ...] = ("NT", "NN", "TN")


@dataclass(frozen=True)
class MatmulPlan:
    """How much to multiply: ``warmup`` untimed matmuls, then ``repeats`` timed groups of ``matmuls_per_repeat``."""

    n: int
    matmuls_per_repeat: int
    repeats: int
    warmup: int


#: n=8192: large enough that an H100 saturates its tensor cores (smaller GEMMs leave SMs idle in the
#: last wave); ~1.1 TFLOP per matmul, so 10 per repeat is ~2 ms of fp16 and ~25 ms of fp32, long
#: against launch overhead and clock jitter. 5 repeats give a best and a median. 3 warm-up matmuls pay
#: cuBLAS handle creation, heuristic lookup and clock ramp-up outside the timed region. Each layout of
#: LAYOUTS runs this plan: three times the time.
CUDA_PLAN = MatmulPlan(n=8192, matmuls_per_repeat=10, repeats=5, warmup=3)
#: n=256: float16 matmul on a CPU without AMX/AVX512-FP16 has no fast kernel. Measured on the 2-core
#: AMD EPYC CI machine (AVX512-BF16, no AMX) at 1 thread: a 256³ matmul takes ~13 ms in float16
#: (0.0025 TFLOP/s) against ~0.3 ms in float32 (0.10) and ~0.09 ms in bfloat16 (0.39); at 512 it
#: would be ~120 ms per float16 matmul. 1 warm-up + 5 repeats of 4 keep float16 near 0.3 s per layout
#: (NN is the slowest; under 1 s for the three).
CPU_PLAN = MatmulPlan(n=256, matmuls_per_repeat=4, repeats=5, warmup=1)
_PLANS: dict[str, MatmulPlan] = {"cpu": CPU_PLAN, "cuda": CUDA_PLAN}


def measure_matmul_peak(device: str, dtype: str, threads: int) -> dict[str, Any]:
    """Best and median TFLOP/s of square ``torch.mm`` in ``dtype`` on ``device`` with ``threads`` CPU threads.

    Each layout of :data:`LAYOUTS` is timed; the best repeat of the fastest is "the peak" (what the
    hardware and library can reach), its median says how steady that was, and ``layouts_tflops``
    keeps each layout's best. The thread count is set for the measurement and restored afterwards, because a
    worker goes on to run workloads with their own thread count. Inputs come from a private generator
    so the global RNG that a workload's seed controls is untouched. TF32 for float32 on CUDA follows the
    process's ``torch.backends.cuda.matmul.allow_tf32``, i.e. what a workload in it would get.

    Raises:
        ValueError: an unknown device or dtype, or threads < 1.
        RuntimeError: ``device`` is ``cuda`` but CUDA is not available.
    """
    if device not in _PLANS:
        raise ValueError(f"device must be one of {', '.join(map(repr, DEVICES))}, but got {device!r}.")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(map(repr, DTYPES))}, but got {dtype!r}.")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, but got {threads!r}.")
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for, but torch.cuda.is_available() is False.")
    plan = _PLANS[device]
    flops = 2 * plan.n**3  # n² outputs, each n multiplies and n adds
    previous_threads = torch.get_num_threads()
    started = time.perf_counter()
    torch.set_num_threads(threads)
    try:
        samples = {layout: _timed_repeats(torch, device, getattr(torch, dtype), plan, layout) for layout in LAYOUTS}
    finally:
        torch.set_num_threads(previous_threads)
    by_layout = {layout: [flops * plan.matmuls_per_repeat / seconds / 1e12 for seconds in times] for layout, times in samples.items()}
    best = max(LAYOUTS, key=lambda layout: max(by_layout[layout]))
    return {
        "device": device,
        "dtype": dtype,
        "n": plan.n,
        "threads": threads,
        "flops_per_matmul": flops,
        "tflops": max(by_layout[best]),
        "tflops_median": statistics.median(by_layout[best]),
        "samples_tflops": by_layout[best],
        "layout": best,
        "layouts_tflops": {layout: max(rates) for layout, rates in by_layout.items()},
        "seconds": time.perf_counter() - started,
    }


def _timed_repeats(torch: Any, device: str, dtype: Any, plan: MatmulPlan, layout: str) -> list[float]:
    """Seconds of each timed repeat of ``layout``; on CUDA the clock is read only after the queue has drained."""

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    generator = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(plan.n, plan.n, device=device, dtype=dtype, generator=generator) for _ in range(2))
    left = a.t() if layout[0] == "T" else a  # a view: the kernel sees the transposed strides, as autograd's do
    right = b.t() if layout[1] == "T" else b
    for _ in range(plan.warmup):
        torch.mm(left, right)
    sync()
    samples: list[float] = []
    for _ in range(plan.repeats):
        start = time.perf_counter()
        for _ in range(plan.matmuls_per_repeat):
            torch.mm(left, right)
        sync()
        # A clock tick can be coarse; a zero would be an infinite rate, so floor it at 1 ns.
        samples.append(max(time.perf_counter() - start, 1e-9))
    return samples
