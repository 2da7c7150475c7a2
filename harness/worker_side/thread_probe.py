"""How many intra-op threads a backward pass really runs on, measured in a worker by the bits of a reduction.

PyTorch runs a CPU backward on the thread that calls it, so it follows ``torch.set_num_threads``. R torch runs every
backward on a thread of its own pool (five ``std::thread``s, ``schedule_backward_task()`` in src/autograd.cpp at
mlverse/torch e4de110), and libtorch gives a thread its OpenMP thread count once, at its first parallel op
(``at::internal::lazy_init_num_threads``, ATen/Parallel.h: a ``thread_local`` flag, then ``at::init_num_threads()``).
A pool thread first used before ``torch_set_num_threads(n)`` keeps the old count; which pool thread runs a backward is
up to the scheduler (docs/determinism.md has the measurements). The harness sets the count once, at worker start,
before the first backward, and stores what this probe measures with each cell (``installation.backward_threads``).

The probe: a full-tensor sum splits its elements among the threads (``at::parallel_reduce``), so its float32 bits
depend on the thread count. Two fixed vectors' sums at 1 to :func:`probed_counts` threads (the run's count or the
cores, whichever is more), computed on the calling thread, tell the counts apart (measured: 32 distinct pairs for 1 to
32); the gradient of ``(u * w1).sum() + (v * w2).sum()`` with respect to the scalars ``w1``, ``w2`` is the same two
sums, computed by the backward's thread. The counts whose sums it matches are the answer. Inputs are made without the
RNG. Twin: ``amp_parity_backward_threads()`` in r_scripts/_bridge.R.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["PROBE_CALLS", "PROBE_MAX_THREADS", "PROBE_N", "backward_threads", "probed_counts"]

#: Elements of each probe vector: 32 grains of ``at::internal::GRAIN_SIZE`` (32768), so a sum splits among up to 32 threads.
PROBE_N = 2**20
#: The most threads the probe ever tells apart (a sum of PROBE_N elements never splits among more; the sums of two fixed
#: vectors at 1 to 32 threads are 32 distinct pairs, measured).
PROBE_MAX_THREADS = 32
#: Backward passes the probe runs: R torch's pool hands each to whichever of its threads wakes, so several passes see
#: more than one of them (measured here: 48 of 60 passes on one thread, 12 on another).
PROBE_CALLS = 4


def probed_counts(threads: int | None) -> int:
    """The most threads the probe tells apart here: the run's count or the cores this process may use (libtorch's default
    is at most these), whichever is more, up to :data:`PROBE_MAX_THREADS`. A backward on more is reported as none."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(PROBE_MAX_THREADS, max(threads or 1, cores))


def backward_threads(max_threads: int = PROBE_MAX_THREADS, calls: int = PROBE_CALLS) -> dict[str, Any]:
    """``{"intra_op_threads", "interop_threads", "backward_threads"}``: the calling thread's counts, and the thread counts
    (1 to ``max_threads``) whose sums the backward passes matched (sorted; empty where none matched: more threads, or
    another kernel).

    The thread count is set for each reference sum and restored, as a worker goes on to run cells.
    """
    import torch

    previous = torch.get_num_threads()
    positions = torch.arange(PROBE_N, dtype=torch.float32)
    u, v = positions.sin(), (positions * 0.5).sin()
    counts_by_sums: dict[tuple[float, float], list[int]] = {}
    try:
        for k in range(1, max_threads + 1):
            torch.set_num_threads(k)
            counts_by_sums.setdefault((u.sum().item(), v.sum().item()), []).append(k)
    finally:
        torch.set_num_threads(previous)
    w1 = torch.ones((), requires_grad=True)
    w2 = torch.ones((), requires_grad=True)
    seen: set[int] = set()
    for _ in range(calls):
        w1.grad = w2.grad = None
        ((u * w1).sum() + (v * w2).sum()).backward()  # type: ignore[no-untyped-call]
        assert w1.grad is not None and w2.grad is not None
        seen.update(counts_by_sums.get((w1.grad.item(), w2.grad.item()), []))
    return {"intra_op_threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
            "backward_threads": sorted(seen)}
