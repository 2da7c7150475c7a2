"""Where two runs part: the first traced point whose bytes differ, and what the trace shows of the run.

A traced call hands every named intermediate of every step to a recorder (``trace_point`` in the scripts,
:mod:`harness.worker_side.trace_recorder` in the workers): in computation order, as a dtype, a shape and a
SHA-256 of the bytes. :func:`find_divergence` walks both sides' points in that order and stops at the
first that differs (bytes or dtype; a point one side records where the other records another is a
difference too: the scripts are twins). The narrow second pass keeps that one point's tensors whole, and
:func:`point_difference` says how far apart they are. :class:`PairTrace` is what a result stores: the
first difference, the last point still identical, and the facts other checks need (:data:`TRIGGERS`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.model.cell_trace import CellTrace, TraceFile
from harness.model.pair_trace import PairTrace, PointDifference
from harness.model.record_points import RECORD_PREFIX, record_mismatch, records_only
from harness.model.result import CellResult
from harness.worker_side.tensor_bytes import DTYPES, decode, encode, ulp_distance

__all__ = [
    "Split", "TRIGGERS", "TRIGGER_POINTS", "cut_refusal", "find_divergence", "plain_traces_identical", "point_difference",
    "read_cell_trace", "read_triggers", "trace_cells",
]

#: A traced point as a worker sends it: ``[step, name, dtype, shape, sha256, value]`` (value for one-element tensors).
Point = Sequence[Any]


#: The points the triggers read (:data:`TRIGGERS`): a trace cut where its run parted from the one it was compared with
#: keeps these at every later step (:class:`harness.worker_side.trace_recorder.TraceRecorder`), so a pair's facts are the
#: same from a cut trace as from a whole one. ``always`` reads every step's record points, which no cut touches.
_CLIP_COEF, _CLIP_TOTAL_NORM, _FOUND_INF = "clip.coef", "clip.total_norm", "scaler.found_inf"
TRIGGER_POINTS = (_CLIP_COEF, _CLIP_TOTAL_NORM, _FOUND_INF)


def _clip_engaged(points: Sequence[Point]) -> tuple[int, ...]:
    """Steps whose clip coefficient was between 0 and 1: clipping scaled the gradients down by a rounded factor. A
    coefficient of exactly 0 (an overflow's infinite norm, a step the scaler skips) is 0 however it is computed, so it
    cannot show a difference in how the coefficient rounds."""
    return tuple(p[0] for p in points if p[1] == _CLIP_COEF and p[5] is not None and 0.0 < p[5] < 1.0)


def _step_skipped(points: Sequence[Point]) -> tuple[int, ...]:
    """Steps whose inf check found a non-finite gradient: the scaler skipped the optimizer step."""
    return tuple(p[0] for p in points if p[1] == _FOUND_INF and p[5] is not None and p[5] != 0.0)


def _clip_norm_nan(points: Sequence[Point]) -> tuple[int, ...]:
    """Steps whose gradient norm was NaN (a NaN in a gradient before clipping). An inf norm is not one: its clip
    coefficient is 0, a number both bindings compare and multiply by alike."""
    return tuple(p[0] for p in points if p[1] == _CLIP_TOTAL_NORM and p[5] is not None and math.isnan(p[5]))


def _always(points: Sequence[Point]) -> tuple[int, ...]:
    """Every step the run recorded: a mechanism that acts at every step (a formula the step always evaluates)."""
    return tuple(dict.fromkeys(int(p[0]) for p in points))


#: Facts read off a trace, by name: the steps where each holds (on either side of a pair: the order of its frontends
#: never matters).
#: Known differences name one as their trigger (``harness/judge/known_differences.toml``).
TRIGGERS: dict[str, Callable[[Sequence[Point]], tuple[int, ...]]] = {
    "always": _always,
    "clip_engaged": _clip_engaged,
    "clip_norm_nan": _clip_norm_nan,
    "step_skipped": _step_skipped,
}


def read_triggers(points: Sequence[Point]) -> dict[str, tuple[int, ...]]:
    """Every trigger's steps in one side's points."""
    return {name: find(points) for name, find in TRIGGERS.items()}


@dataclass(frozen=True)
class Split:
    """Where two point sequences part: the index of the first point that differs, and how."""

    index: int
    #: ``bytes`` (same point, other bytes), ``dtype``, ``order`` (the sides record different points here) or
    #: ``missing`` (one side recorded no more points).
    kind: str
    step: int
    point: str


def find_divergence(a: Sequence[Point], b: Sequence[Point]) -> Split | None:
    """The first point, in computation order, at which ``b`` differs from ``a``; ``None`` when every point is equal."""
    for index, (pa, pb) in enumerate(zip(a, b, strict=False)):
        if (pa[0], pa[1]) != (pb[0], pb[1]):
            return Split(index, "order", int(pa[0]), str(pa[1]))
        if pa[2] != pb[2]:
            return Split(index, "dtype", int(pa[0]), str(pa[1]))
        if pa[4] != pb[4]:
            return Split(index, "bytes", int(pa[0]), str(pa[1]))
    if len(a) != len(b):
        longer = a if len(a) > len(b) else b
        extra = longer[min(len(a), len(b))]
        return Split(min(len(a), len(b)), "missing", int(extra[0]), str(extra[1]))
    return None


Kept = Mapping[str, Any] | None


def point_difference(split: Split, a: Sequence[Point], b: Sequence[Point], kept: tuple[Kept, Kept]) -> PointDifference:
    """The difference at ``split``, measured on both sides' kept tensors where the bytes differ (``kept`` may lack one)."""
    pa = a[split.index] if split.index < len(a) else None
    pb = b[split.index] if split.index < len(b) else None
    dtypes = (pa[2] if pa else None, pb[2] if pb else None)
    shapes = (tuple(pa[3]) if pa else None, tuple(pb[3]) if pb else None)
    if split.kind in ("order", "missing"):
        other = (int(pb[0]), str(pb[1])) if split.kind == "order" and pb is not None else None
        return PointDifference(split.step, split.point, split.kind, dtypes, shapes, other=other)
    if (kept[0] is None or kept[1] is None) and pa is not None and pb is not None and pa[5] is not None and pb[5] is not None \
            and pa[2] == pb[2] and pa[2] in DTYPES:
        # A one-element point carries its value: the distance is measured from what the cells store, wherever they meet.
        kept = ({"dtype": pa[2], "shape": list(pa[3]), "data": encode(pa[2], [pa[5]])},
                {"dtype": pb[2], "shape": list(pb[3]), "data": encode(pb[2], [pb[5]])})
    if split.kind == "dtype" or kept[0] is None or kept[1] is None:
        return PointDifference(split.step, split.point, split.kind, dtypes, shapes)
    dtype = str(kept[0]["dtype"])
    data_a, data_b = kept[0]["data"], kept[1]["data"]
    elements = int(np.prod(kept[0]["shape"], dtype=np.int64))
    if len(data_a) != len(data_b):  # same dtype, other element count: the bytes cannot be lined up
        return PointDifference(split.step, split.point, split.kind, dtypes, shapes, elements=elements)
    width = len(data_a) // max(elements, 1)
    raw_a = np.frombuffer(data_a, dtype=np.uint8).reshape(elements, width)
    raw_b = np.frombuffer(data_b, dtype=np.uint8).reshape(elements, width)
    differs = np.any(raw_a != raw_b, axis=1)
    distance = ulp_distance(dtype, data_a, data_b)
    worst = int(np.argmax(np.where(differs, distance, -1)))
    shape_a = tuple(int(s) for s in kept[0]["shape"])
    index = tuple(int(i) for i in np.unravel_index(worst, shape_a)) if shape_a else ()
    values = decode(dtype, data_a), decode(dtype, data_b)
    with np.errstate(invalid="ignore", over="ignore"):
        both = np.concatenate([values[0], values[1]])
        finite = both[np.isfinite(both)]
        magnitude = float(np.max(np.abs(finite))) if finite.size else None
        gap = np.abs(values[0] - values[1])
        largest_gap = float(np.max(np.where(np.isfinite(gap), gap, -1.0)))
    return PointDifference(
        split.step, split.point, split.kind, dtypes, shapes, elements=elements, differing=int(differs.sum()),
        max_distance=int(distance[worst]), worst_index=index, worst_values=(float(values[0][worst]), float(values[1][worst])),
        max_abs_difference=largest_gap if largest_gap >= 0 else None, magnitude=magnitude,
    )




@functools.lru_cache(maxsize=4096)
def read_cell_trace(trace: TraceFile) -> CellTrace:
    """A cell's stored trace, read (and checked against the SHA-256 its result recorded) once per process."""
    return CellTrace.read(trace)


def plain_traces_identical(a: CellResult, b: CellResult) -> bool:
    """Whether the record calls of ``a`` and ``b`` left bitwise identical traces: every point (the run's records among
    them) in the same order, dtype and bytes, digested by one hash. Such a pair is ``identical`` (or its entry stale)
    from these traces alone, whatever the switches: a verdict reads reconciled runs only to prove a difference."""
    if a.trace is None or b.trace is None:
        return False
    ta, tb = read_cell_trace(a.trace), read_cell_trace(b.trace)
    # A cut trace parted from the run it was compared with: never the whole of an identical pair (cut_refusal).
    return (ta.cut is None and tb.cut is None and CellTrace.comparable(ta, tb) is None
            and find_divergence(ta.points, tb.points) is None)


def cut_refusal(split: Split | None, traces: Sequence[CellTrace], frontends: Sequence[str]) -> str | None:
    """Why two traces cannot be compared where they are, one of them cut (its run parted, at its cut step, from the run
    it was compared with as it went, and it kept only the triggers' points after it): where they part after that step,
    or never, the cut hides what they did there. ``None``: they part at or before every cut, so the comparison is the
    whole one's."""
    for trace, frontend in zip(traces, frontends, strict=True):
        if trace.cut is not None and (split is None or split.step > trace.cut):
            return (f"{frontend}'s trace was cut after step {trace.cut}, where its run parted from the run it was compared "
                    "with as it ran, and this pair's runs agree up to there: run the pair's cells in one run to trace it")
    return None


def trace_cells(a: CellResult, b: CellResult) -> PairTrace:
    """Where the cells ``a`` and ``b`` (two frontends of one pair) part, from the traces they store: the same answer in the
    run that made them and in any ``merge`` that brings them together, without their workers.

    The plain comparison is the two record calls' traces; the reconciled one, each side's run with its switches (its
    reconciled trace where it has one, else its plain one). A distance is measured where the cells store what it needs:
    a one-element point's two values, or a tensor both kept; the run's second pass adds the rest (:mod:`harness.run.tracer`).

    Raises:
        ResultError: a stored trace is missing, replaced or malformed.
    """
    names = (a.frontend, b.frontend)
    reproduced = all(c.timing is None or c.timing.differing_rounds == 0 for c in (a, b))
    for cell in (a, b):  # a stored trace is checked against its cell's record, never believed (issue 37)
        plain = read_cell_trace(cell.trace) if cell.trace is not None else None
        wrong = None if plain is None else record_mismatch(plain, cell.record, cell.weights.tensors if cell.weights else None)
        if wrong is not None:
            return PairTrace(a.pair, names, error=f"{cell.frontend}'s stored trace is not the run its record holds ({wrong}): it was "
                                                  "replaced; re-run the cell", reproduced=reproduced)
    switches: tuple[str, ...] = ()
    reconciled_identical: bool | None = None
    reconciled: PointDifference | None = None
    sides = [c.reconciled or c.trace for c in (a, b)]
    if (a.reconciled is not None or b.reconciled is not None) and sides[0] is not None and sides[1] is not None:
        ra, rb = read_cell_trace(sides[0]), read_cell_trace(sides[1])
        if (unlike := CellTrace.comparable(ra, rb)) is not None:
            return PairTrace(a.pair, names, error=unlike, reproduced=reproduced)
        if records_only(ra) or records_only(rb):  # an untraced reconciled run: what both runs recorded is compared
            ra, rb = (dataclasses.replace(t, points=tuple(p for p in t.points if p[1].startswith(RECORD_PREFIX))) for t in (ra, rb))
        again = find_divergence(ra.points, rb.points)
        switches = tuple(sorted({*ra.switches, *rb.switches}))
        if cut_refusal(again, (ra, rb), names) is None:  # a cut plain trace standing in for a failed reconciled run proves nothing
            reconciled_identical = again is None
            reconciled = None if again is None else point_difference(again, ra.points, rb.points, _kept(again, ra, rb))
    if a.trace is None or b.trace is None:
        missing = [c.frontend for c in (a, b) if c.trace is None]
        return PairTrace(a.pair, names, error=f"{' and '.join(missing)} stored no trace of its record call", reproduced=reproduced,
                         switches=switches, reconciled_identical=reconciled_identical, reconciled=reconciled)
    ta, tb = read_cell_trace(a.trace), read_cell_trace(b.trace)
    if (unlike := CellTrace.comparable(ta, tb)) is not None:
        return PairTrace(a.pair, names, error=unlike, reproduced=reproduced)
    points_a, points_b = ta.points, tb.points
    split = find_divergence(points_a, points_b)
    if (refused := cut_refusal(split, (ta, tb), names)) is not None:
        return PairTrace(a.pair, names, error=refused, reproduced=reproduced)
    identical = split.index if split is not None else len(points_a)
    last = (int(points_a[identical - 1][0]), str(points_a[identical - 1][1])) if identical > 0 else None
    first = None if split is None else point_difference(split, points_a, points_b, _kept(split, ta, tb))
    triggers = {name: tuple(sorted({*steps, *read_triggers(points_b)[name]})) for name, steps in read_triggers(points_a).items()}
    return PairTrace(a.pair, names, (len(points_a), len(points_b)), identical, first, last, triggers, reproduced,
                     switches=switches, reconciled_identical=reconciled_identical, reconciled=reconciled)


def _kept(split: Split, a: CellTrace, b: CellTrace) -> tuple[Kept, Kept]:
    """Both sides' whole tensors at ``split``'s point, where the cells kept them (a one-element point: its value)."""
    key = f"{split.step}:{split.point}"
    return a.kept.get(key), b.kept.get(key)
