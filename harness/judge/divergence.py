"""Where two runs part: the first traced point whose bytes differ, and what the trace shows of the run.

A traced call hands every named intermediate of every step to a recorder (``trace_point`` in the scripts,
:mod:`harness.frontends.trace_recorder` in the workers): in computation order, as a dtype, a shape and a
SHA-256 of the bytes. :func:`find_divergence` walks both sides' points in that order and stops at the
first that differs (bytes or dtype; a point one side records where the other records another is a
difference too: the scripts are twins). The narrow second pass keeps that one point's tensors whole, and
:func:`point_difference` says how far apart they are. :class:`PairTrace` is what a result stores: the
first difference, the last point still identical, and the facts other checks need (:data:`TRIGGERS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.frontends.tensor_bytes import decode, ulp_distance
from harness.model.trace import PointDifference

__all__ = ["Split", "TRIGGERS", "find_divergence", "point_difference", "read_triggers"]

#: A traced point as a worker sends it: ``[step, name, dtype, shape, sha256, value]`` (value for one-element tensors).
Point = Sequence[Any]


def _clip_engaged(points: Sequence[Point]) -> tuple[int, ...]:
    """Steps whose clip coefficient was below 1: clipping scaled the gradients down."""
    return tuple(p[0] for p in points if p[1] == "clip.coef" and p[5] is not None and p[5] < 1.0)


def _step_skipped(points: Sequence[Point]) -> tuple[int, ...]:
    """Steps whose inf check found a non-finite gradient: the scaler skipped the optimizer step."""
    return tuple(p[0] for p in points if p[1] == "scaler.found_inf" and p[5] is not None and p[5] != 0.0)


#: Facts read off a trace (of the baseline side, the first frontend), by name: the steps where each holds.
#: Known differences name one as their trigger (``harness/judge/known_differences.toml``).
TRIGGERS: dict[str, Callable[[Sequence[Point]], tuple[int, ...]]] = {
    "clip_engaged": _clip_engaged,
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
    return PointDifference(
        split.step, split.point, split.kind, dtypes, shapes, elements=elements, differing=int(differs.sum()),
        max_distance=int(distance[worst]), worst_index=index, worst_values=(float(values[0][worst]), float(values[1][worst])),
    )


