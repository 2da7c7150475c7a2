"""The second pass of a pair's trace, through its live workers: the first differing tensor kept whole, its distance measured.

Every cell's record call is traced (:mod:`harness.model.cell_trace`): a pair's first differing point is known from what
its cells store, in a run and in a merge alike (:func:`harness.judge.divergence.trace_cells`). How far apart two tensors
are needs the tensors themselves, which a trace does not keep (a digest per point). Where the workers that ran a pair
are still alive, this pass runs both cells again, each in its own worker, side by side on two cores, keeps that one
point whole and stops there; the distance it measures goes into the explanation. Verdicts never depend on it (a merge
has no workers): it says how far, not whether.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.errors import WorkerError
from harness.judge.divergence import find_divergence, point_difference
from harness.model.pair_trace import PairTrace
from harness.model.result import CellResult
from harness.run.pool import WorkerPool

__all__ = ["measure_first_difference"]


def measure_first_difference(pool: WorkerPool, a: CellResult, b: CellResult, trace: PairTrace) -> PairTrace:
    """``trace`` with its first difference measured on the two tensors, kept whole by running both cells again; ``trace``
    as it was when a worker fails (the explanation then has no distance, the verdict is the same)."""
    first = trace.first_difference
    if first is None or first.kind != "bytes":
        return trace
    started = time.perf_counter()
    keep = [[first.step, first.point]]

    def call(cell: CellResult) -> dict[str, Any]:
        request = pool.cell_request(cell.cell, save_weights=False, kind="trace", trace={"keep": keep})
        reply: dict[str, Any] = pool.call(cell.frontend, request)
        return reply

    try:
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="amp-parity-trace") as threads:
            replies = list(threads.map(call, (a, b)))
    except WorkerError:
        return trace
    key = f"{first.step}:{first.point}"
    kept = (replies[0]["kept"].get(key), replies[1]["kept"].get(key))
    split = find_divergence(replies[0]["points"], replies[1]["points"])
    if split is None or (split.step, split.point) != (first.step, first.point) or kept[0] is None or kept[1] is None:
        return trace  # the runs did not repeat themselves: no measurement is better than one of another point
    measured = point_difference(split, replies[0]["points"], replies[1]["points"], kept)
    return dataclasses.replace(trace, detail=measured, seconds=time.perf_counter() - started)
