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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.tensor_bytes import FLOAT_DTYPES, decode, ulp_distance

__all__ = ["TRIGGERS", "PairTrace", "PointDifference", "Split", "find_divergence", "point_difference", "read_triggers"]

#: A traced point as a worker sends it: ``[step, name, dtype, shape, sha256, value]`` (value for one-element tensors).
Point = Sequence[Any]


def _clip_engaged(points: Sequence[Point]) -> tuple[int, ...]:
    """Steps whose clip coefficient was below 1: clipping scaled the gradients down."""
    return tuple(p[0] for p in points if p[1] == "clip.coef" and p[5] is not None and p[5] < 1.0)


def _step_skipped(points: Sequence[Point]) -> tuple[int, ...]:
    """Steps whose inf check found a non-finite gradient: the scaler skipped the optimizer step."""
    return tuple(p[0] for p in points if p[1] == "scaler.found_inf" and p[5] is not None and p[5] != 0.0)


#: Facts read off a trace (of the baseline side, the first frontend), by name: the steps where each holds.
#: Known differences name one as their trigger (``harness/known_differences.toml``).
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


@dataclass(frozen=True)
class PointDifference:
    """The first point that differs, on both sides: how many elements, how far, and the worst one."""

    step: int
    point: str
    kind: str
    dtypes: tuple[str | None, str | None]
    shapes: tuple[tuple[int, ...] | None, tuple[int, ...] | None]
    elements: int | None = None
    differing: int | None = None
    #: ULPs of the point's dtype for floats, the difference of values for integers; None when not comparable.
    max_distance: int | None = None
    #: The worst element's index in the first side's shape, and both sides' values there.
    worst_index: tuple[int, ...] | None = None
    worst_values: tuple[float, float] | None = None
    #: What the order/missing kinds found instead: ``[step, name]`` of the other side's point, or None.
    other: tuple[int, str] | None = None

    def describe(self, frontends: tuple[str, str]) -> str:
        """One line: the point, its dtype, how many elements differ, the largest distance and both values at the worst."""
        a, b = frontends
        where = f"step {self.step}, {self.point}"
        if self.kind == "order":
            other = f"step {self.other[0]}, {self.other[1]}" if self.other else "another point"
            return f"{where}: {a} records this point where {b} records {other} (the scripts' points differ in order)"
        if self.kind == "missing":
            return f"{where}: recorded by one side only ({a} {self.dtypes[0] or 'no such point'}, {b} {self.dtypes[1] or 'no such point'})"
        if self.kind == "dtype":
            return f"{where}: dtype {self.dtypes[0]} ({a}) vs {self.dtypes[1]} ({b})"
        shape = "×".join(map(str, self.shapes[0] or ())) or "scalar"
        unit = "ULP" if self.dtypes[0] in FLOAT_DTYPES else "in value"
        head = f"{where} ({self.dtypes[0]} {shape}): {self.differing} of {self.elements} elements differ"
        if self.max_distance is None or self.worst_values is None:
            return head
        index = f"[{', '.join(map(str, self.worst_index))}]" if self.worst_index else ""
        distance = "NaN on one side" if self.max_distance == np.iinfo(np.int64).max else f"{self.max_distance} {unit}"
        return f"{head}, largest {distance}: {a} {self.worst_values[0]:.9g} vs {b} {self.worst_values[1]:.9g} at {index or 'the element'}"

    def to_json(self) -> dict[str, Any]:
        """Plain data (tuples as lists)."""
        return {
            "step": self.step, "point": self.point, "kind": self.kind, "dtypes": list(self.dtypes),
            "shapes": [None if s is None else list(s) for s in self.shapes], "elements": self.elements,
            "differing": self.differing, "max_distance": self.max_distance,
            "worst_index": None if self.worst_index is None else list(self.worst_index),
            "worst_values": None if self.worst_values is None else list(self.worst_values),
            "other": None if self.other is None else list(self.other),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PointDifference:
        """The inverse of :meth:`to_json`."""
        def shape(s: Any) -> tuple[int, ...] | None:
            return None if s is None else tuple(int(v) for v in s)
        return cls(
            step=int(data["step"]), point=str(data["point"]), kind=str(data["kind"]),
            dtypes=(data["dtypes"][0], data["dtypes"][1]), shapes=(shape(data["shapes"][0]), shape(data["shapes"][1])),
            elements=data.get("elements"), differing=data.get("differing"), max_distance=data.get("max_distance"),
            worst_index=shape(data.get("worst_index")),
            worst_values=None if data.get("worst_values") is None else (float(data["worst_values"][0]), float(data["worst_values"][1])),
            other=None if data.get("other") is None else (int(data["other"][0]), str(data["other"][1])),
        )


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


@dataclass(frozen=True)
class PairTrace:
    """A pair traced point by point: where its two runs part (or that they never do), as a result stores it.

    ``identical_points``: points equal on both sides before the first difference (all of them when none
    differs); ``last_identical``: the last of those, ``(step, name)``. ``triggers``: the facts read off the
    baseline side (:data:`TRIGGERS`: the steps where each holds). ``reproduced``: whether the traced runs gave
    the losses of the record calls (a trace of a build that does not repeat itself would name noise).
    ``error``: why there is no trace (a worker failed), else None.
    """

    pair: str
    frontends: tuple[str, str]
    points: tuple[int, int] = (0, 0)
    identical_points: int = 0
    first_difference: PointDifference | None = None
    last_identical: tuple[int, str] | None = None
    triggers: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    reproduced: bool = True
    seconds: float = 0.0
    error: str | None = None

    @property
    def identical(self) -> bool:
        """Every traced point bitwise equal on both sides (and the trace ran)."""
        return self.error is None and self.first_difference is None

    def lines(self) -> list[str]:
        """What the pair's explanation and the report say of the trace, one finding per line."""
        if self.error is not None:
            return [f"trace: not traced: {self.error}"]
        total = max(self.points)
        if self.first_difference is None:
            lines = [f"trace: all {total} traced points bitwise identical ({self.points[0]} per side)"]
        else:
            last = f"step {self.last_identical[0]}, {self.last_identical[1]}" if self.last_identical else "none (the first point differs)"
            lines = [
                f"trace: first difference at {self.first_difference.describe(self.frontends)}",
                f"trace: last identical point: {last} ({self.identical_points} of {total} points identical before it)",
            ]
        if not self.reproduced:
            lines.append(
                "trace: the traced runs did not repeat the record calls' losses: this build is not deterministic, "
                "so the trace may name noise"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        """Plain data for the result's ``traces``."""
        return {
            "pair": self.pair, "frontends": list(self.frontends), "points": list(self.points),
            "identical_points": self.identical_points,
            "first_difference": None if self.first_difference is None else self.first_difference.to_json(),
            "last_identical": None if self.last_identical is None else list(self.last_identical),
            "triggers": {k: list(v) for k, v in self.triggers.items()}, "reproduced": self.reproduced,
            "seconds": self.seconds, "error": self.error,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PairTrace:
        """The inverse of :meth:`to_json`."""
        first = data.get("first_difference")
        last = data.get("last_identical")
        return cls(
            pair=str(data["pair"]), frontends=(data["frontends"][0], data["frontends"][1]),
            points=(int(data["points"][0]), int(data["points"][1])), identical_points=int(data["identical_points"]),
            first_difference=None if first is None else PointDifference.from_json(first),
            last_identical=None if last is None else (int(last[0]), str(last[1])),
            triggers={str(k): tuple(int(s) for s in v) for k, v in (data.get("triggers") or {}).items()},
            reproduced=bool(data.get("reproduced", True)), seconds=float(data.get("seconds", 0.0)), error=data.get("error"),
        )
