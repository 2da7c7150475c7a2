"""The clock, the garbage collector and the device's memory around the timed loop. The twin of ``r_scripts/timing.R``."""

from __future__ import annotations

import gc
import time
from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["CLOCK_NAME", "clock", "pause_gc", "peak_memory_bytes", "reset_peak_memory", "resume_gc", "sync_device"]

#: What ``clock()`` reads, as each record names it: ``time.perf_counter`` is CLOCK_MONOTONIC on Linux,
#: in nanoseconds.
CLOCK_NAME = "time.perf_counter"


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
    loop could reuse, since tensors are freed by reference counting at once: a call leaves no reference cycles
    (tests/integration/test_py_reference_cycles.py). R cannot switch its collector off, and frees tensors only when it
    collects (see timing.R).
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
