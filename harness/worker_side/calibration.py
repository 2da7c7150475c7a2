"""The machine's own noise, measured in a worker: a fixed loop of matrix products, timed as a cell's loop is.

A cell's round-to-round spread mixes the cell's own irregularity with the machine's (other processes, frequency
changes, a neighbour on a shared VM). The harness times this loop after each timed round of a cell, in the same worker,
so a drift of the machine lands on both; the spread of these rounds is the *floor* the cell's spread is judged against
(:mod:`harness.judge.spread`). The loop is libtorch work only: no autograd, no optimizer, no allocation inside it (the
product is written in place), inputs made without the RNG (the seeded global generator a workload uses stays untouched).

Twin of ``amp_parity_calibrate()`` in ``r_scripts/_bridge.R``: same names, same order. The R worker's handler
(:mod:`harness.worker_side.r_handler`) checks the request here and hands R :data:`CALIBRATION_N`, so the size lives in one
place. Runs in a worker: ``torch`` is imported inside the function, so the parent can import this module without it.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from harness.worker_side.matmul_peak import DEVICES, DTYPES

__all__ = ["CALIBRATION_N", "calibrate", "check_calibration"]

#: The square matrices' size: at one thread a 256³ product takes 0.16 ms in float32 and 0.04 ms in bfloat16 on the 2-core
#: Xeon (AMX), 0.3 and 0.09 ms on the 2-core EPYC (harness/worker_side/matmul_peak.py's CPU_PLAN): long against the clock,
#: and in float32 against R torch's per-call dispatch (tens of microseconds); short enough that a loop as long as a
#: ``bench`` cell's (~1 s) averages over thousands of products.
CALIBRATION_N = 256


def check_calibration(device: str, dtype: str, threads: int, iterations: int) -> None:
    """Refuse a calibration request that the loop would misread.

    Raises:
        ValueError: an unknown device or dtype, threads < 1 or iterations < 1.
    """
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(map(repr, DEVICES))}, but got {device!r}.")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(map(repr, DTYPES))}, but got {dtype!r}.")
    for name, value in (("threads", threads), ("iterations", iterations)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number of at least 1, but got {value!r}.")


def calibrate(device: str, dtype: str, threads: int, iterations: int) -> dict[str, Any]:
    """Seconds of ``iterations`` products of two fixed :data:`CALIBRATION_N`-square matrices in ``dtype`` on ``device``.

    Every matrix is filled with ``1/n``, so every product is again ``1/n`` everywhere: finite in every dtype, and the
    same work every round. One product before the clock makes the output (and pays a first call's kernel selection);
    the timed loop then writes each product into it: ``addmm_`` with ``beta=0``, the GEMM ``torch.mm(out=)`` runs (as
    fast, to the measured microsecond) and the in-place product R torch exports (its ``torch_mm()`` has no ``out``).
    The thread count is set for the loop and restored, as a worker goes on to run cells; the collector is off inside it
    (the loop allocates nothing it would collect, as a cell's loop runs with it off). Returns ``{"seconds", "iterations"}``.

    Raises:
        ValueError: see :func:`check_calibration`.
        RuntimeError: ``device`` is ``cuda`` but CUDA is not available.
    """
    check_calibration(device, dtype, threads, iterations)
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for, but torch.cuda.is_available() is False.")

    def sync_device() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    n = CALIBRATION_N
    previous_threads = torch.get_num_threads()
    was_enabled = gc.isenabled()
    torch.set_num_threads(threads)
    try:
        left = torch.full((n, n), 1.0 / n, dtype=getattr(torch, dtype), device=device)
        right = torch.full((n, n), 1.0 / n, dtype=getattr(torch, dtype), device=device)
        product = torch.mm(left, right)
        gc.disable()
        sync_device()
        start = time.perf_counter()
        for _ in range(iterations):
            product.addmm_(left, right, beta=0)
        sync_device()
        seconds = time.perf_counter() - start
    finally:
        if was_enabled:
            gc.enable()
        torch.set_num_threads(previous_threads)
    return {"seconds": seconds, "iterations": iterations}
