"""Traces a pair through its workers: both sides' points, then the first point that differs, kept whole.

Two passes, both sides at once (each in its own worker, so the two run side by side on two cores):
the first records every point's digest (a few hundred kilobytes, whatever the workload's size), the
second, only for a pair whose bytes part, keeps the first differing point's tensors and stops each run
there. Nothing is written to disk. The cells' workers are the ones that ran them, already warm.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.errors import WorkerError
from harness.judge.divergence import find_divergence, point_difference, read_triggers
from harness.model.result import CellResult
from harness.model.trace import PairTrace
from harness.run.pool import WorkerPool

__all__ = ["trace_pair"]


def trace_pair(pool: WorkerPool, a: CellResult, b: CellResult) -> PairTrace:
    """Trace cells ``a`` and ``b`` (two frontends of one pair, both run) and say where they part.

    A worker that fails (a script error, a crash, a timeout) gives a trace with ``error`` set: the pair keeps
    its verdict and says why it has no trace.
    """
    started = time.perf_counter()
    names = (a.frontend, b.frontend)
    try:
        first = _both(pool, (a, b), keep=())
        points_a, points_b = first[0]["points"], first[1]["points"]
        split = find_divergence(points_a, points_b)
        kept: tuple[Any, Any] = (None, None)
        if split is not None and split.kind == "bytes":
            second = _both(pool, (a, b), keep=((split.step, split.point),))
            key = f"{split.step}:{split.point}"
            kept = (second[0]["kept"].get(key), second[1]["kept"].get(key))
    except WorkerError as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        return PairTrace(a.pair, names, seconds=time.perf_counter() - started, error=reason)
    identical = split.index if split is not None else len(points_a)
    last = (int(points_a[identical - 1][0]), str(points_a[identical - 1][1])) if identical > 0 else None
    return PairTrace(
        a.pair, names, (len(points_a), len(points_b)), identical,
        None if split is None else point_difference(split, points_a, points_b, kept), last,
        read_triggers(points_a), _reproduced(a, first[0]) and _reproduced(b, first[1]), time.perf_counter() - started,
    )


def _both(pool: WorkerPool, cells: tuple[CellResult, CellResult], keep: Sequence[tuple[int, str]]) -> list[dict[str, Any]]:
    """One traced call of each cell, at the same time (each worker is a process of its own)."""
    def call(cell: CellResult) -> dict[str, Any]:
        request = pool.cell_request(cell.cell, save_weights=False, kind="trace", trace={"keep": [list(k) for k in keep]})
        reply: dict[str, Any] = pool.call(cell.frontend, request)
        return reply

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="amp-parity-trace") as threads:
        return list(threads.map(call, cells))


def _reproduced(cell: CellResult, reply: dict[str, Any]) -> bool:
    """Whether the traced run's losses are the record call's, bit for bit (NaN equal to NaN)."""
    record = reply.get("record")
    if cell.record is None or not isinstance(record, dict):
        return False
    def same(x: Any, y: Any) -> bool:
        return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
    ours, theirs = list(cell.record.losses), list(record.get("losses") or [])
    return len(ours) == len(theirs) and all(same(x, y) for x, y in zip(ours, theirs, strict=True))
