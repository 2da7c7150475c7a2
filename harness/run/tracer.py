"""The second pass of a pair's trace, through its live workers: the first differing tensor kept whole, its distance measured.

Every cell's record call is traced (:mod:`harness.model.cell_trace`): a pair's first differing point is known from what
its cells store, in a run and in a merge alike (:func:`harness.judge.divergence.trace_cells`). How far apart two tensors
are needs the tensors themselves, which a trace does not keep (a digest per point). Where the workers that ran a pair
are still alive, this pass runs both cells again, each in its own worker, keeps that one point whole and stops there
(a side whose record call kept that tensor already, having been compared as it ran, is not run again: issue 38);
the distance it measures goes into the explanation. Verdicts never depend on it (a merge has no workers): it says how
far, not whether. Every pair's two calls are *sides* (:class:`SecondPass`), run in the lanes as the record calls are
(:func:`harness.run.lanes.run_in_lanes`): each frontend's one after another, an idle lane helping R's. One pair at a
time, both sides at once, left a core idle while R's side ran on (R's calls cost about four times Python's: issue 38).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.errors import WorkerError
from harness.judge.divergence import find_divergence, point_difference, read_cell_trace
from harness.model.cell_trace import DIGEST_HEX
from harness.model.pair_trace import PairTrace
from harness.model.result import CellResult
from harness.run.lanes import run_in_lanes
from harness.run.pool import WorkerPool

__all__ = ["SecondPass", "measure_first_differences"]


@dataclasses.dataclass(frozen=True)
class SecondPass:
    """One side of a pair's second pass: ``cell`` run again, its point ``(step, name)`` kept whole; ``reply`` its worker's
    answer (``None`` before the call, or where its worker failed) and ``seconds`` the call's."""

    cell: CellResult
    point: tuple[int, str]
    reply: dict[str, Any] | None = None
    seconds: float = 0.0

    @property
    def frontend(self) -> str:
        """The frontend whose worker runs it (what a lane is chosen by)."""
        return self.cell.frontend

    def run(self, pool: WorkerPool) -> SecondPass:
        """This side, called: its reply, or none where its worker failed (the pair then keeps its trace unmeasured)."""
        request = pool.cell_request(self.cell.cell, save_weights=False, kind="trace", trace={"keep": [list(self.point)]})
        started = time.perf_counter()
        try:
            reply: dict[str, Any] = pool.call(self.frontend, request)
        except WorkerError:
            return self
        return dataclasses.replace(self, reply=reply, seconds=time.perf_counter() - started)


def measure_first_differences(pool: WorkerPool, pairs: Sequence[tuple[CellResult, CellResult, PairTrace]],
                              progress: Callable[[SecondPass], None], facts: Mapping[str, Mapping[str, Any]]) -> list[PairTrace]:
    """Each pair's ``trace`` with its first difference measured on the two tensors, kept whole by running both cells again
    (in the lanes: ``progress`` hears of each side as it ends; ``facts`` as :func:`run_in_lanes` takes them); a trace as it
    was where its first difference is not two tensors, or where a side's worker fails (the explanation then has no
    distance, the verdict is the same)."""
    measured = [i for i, (_, _, trace) in enumerate(pairs) if _first_tensors(trace) is not None]
    sides = [_side(cell, _first_tensors(pairs[i][2]) or (0, "")) for i in measured for cell in pairs[i][:2]]
    to_run = [k for k, side in enumerate(sides) if side.reply is None]
    for side in sides:
        if side.reply is not None:
            progress(side)
    done = list(sides)
    for k, side in zip(to_run, run_in_lanes(pool, [sides[k] for k in to_run], lambda side: side.run(pool), progress, facts),
                       strict=True):
        done[k] = side
    traces = [trace for _, _, trace in pairs]
    for k, i in enumerate(measured):
        traces[i] = _measured(traces[i], done[2 * k], done[2 * k + 1])
    return traces


def _side(cell: CellResult, point: tuple[int, str]) -> SecondPass:
    """One side of a pair's second pass; answered already from the cell's stored trace where its record call kept the
    tensor (a record call compared as it ran keeps the one it parted at: issue 38), so only the other side runs again."""
    if cell.trace is not None:
        stored = read_cell_trace(cell.trace)
        if f"{point[0]}:{point[1]}" in stored.kept:
            return SecondPass(cell, point, {"points": [list(p) for p in stored.points], "kept": dict(stored.kept)})
    return SecondPass(cell, point)


def _first_tensors(trace: PairTrace) -> tuple[int, str] | None:
    """The point where ``trace``'s two runs first part at two tensors' bytes (what the second pass keeps), else ``None``."""
    first = trace.first_difference
    return None if first is None or first.kind != "bytes" else (first.step, first.point)


def _measured(trace: PairTrace, a: SecondPass, b: SecondPass) -> PairTrace:
    """``trace`` with the distance its two sides measured (its ``seconds``: the slower side's call, the two sides running
    at once in their lanes), or as it was where a side has no reply or the runs did not repeat themselves."""
    if a.reply is None or b.reply is None:
        return trace
    key = f"{a.point[0]}:{a.point[1]}"
    kept = (a.reply["kept"].get(key), b.reply["kept"].get(key))
    # A stored trace keeps 128 bits of each digest, a reply all of them: both compared at the stored width.
    points_a, points_b = ([[*p[:4], str(p[4])[:DIGEST_HEX], *p[5:]] for p in reply["points"]] for reply in (a.reply, b.reply))
    split = find_divergence(points_a, points_b)
    if split is None or (split.step, split.point) != a.point or kept[0] is None or kept[1] is None:
        return trace  # the runs did not repeat themselves: no measurement is better than one of another point
    detail = point_difference(split, points_a, points_b, kept)
    return dataclasses.replace(trace, detail=detail, seconds=max(a.seconds, b.seconds))
