"""A traced pair as a result stores it: where its two runs part (the first differing point), or that they never do.

The trace itself (two workers digesting every named point) is :mod:`harness.run.tracer`'s; finding the
first differing point in two digest lists is :mod:`harness.judge.divergence`'s. This module is the stored
shape of what they found, so the result model holds it without importing either.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.model.codec import Stored
from harness.worker_side.tensor_bytes import FLOAT_DTYPES

__all__ = ["PairTrace", "PointDifference"]

@dataclass(frozen=True)
class PointDifference(Stored):
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
    #: The largest finite |a - b| over the elements, and the largest finite |value| of both tensors: a difference near
    #: zero is billions of ULPs and nothing at the tensor's scale (cancellation), so it is shown against the magnitude too.
    max_abs_difference: float | None = None
    magnitude: float | None = None

    def swapped(self) -> PointDifference:
        """The same difference seen from the other side (the pair's frontends in the other order)."""
        def flip(pair: tuple[Any, Any] | None) -> Any:
            return None if pair is None else (pair[1], pair[0])
        return dataclasses.replace(self, dtypes=flip(self.dtypes), shapes=flip(self.shapes), worst_values=flip(self.worst_values))

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
        if self.differing is None or self.elements is None:  # neither cell kept the tensors: only the digests differ
            return f"{where} ({self.dtypes[0]} {shape}): the bytes differ (the tensors were not kept, so how far is not measured)"
        head = f"{where} ({self.dtypes[0]} {shape}): {self.differing} of {self.elements} elements differ"
        if self.max_distance is None or self.worst_values is None:
            return head
        index = f"[{', '.join(map(str, self.worst_index))}]" if self.worst_index else ""
        at = f"at {index or 'the element'}"
        va, vb = self.worst_values
        if not (math.isfinite(va) and math.isfinite(vb)):  # inf or NaN: a distance in ULPs would be a meaningless count
            return f"{head}, a non-finite value: {a} {va:.9g} vs {b} {vb:.9g} {at}"
        if self.elements == 1 and va.is_integer() and vb.is_integer():  # a flag or a count (found inf, a step): its values
            return f"{head}: {a} {va:.9g} vs {b} {vb:.9g}"
        if self.dtypes[0] not in FLOAT_DTYPES:
            return f"{head}, largest {self.max_distance} in value: {a} {va:.9g} vs {b} {vb:.9g} {at}"
        text = f"{head}, largest {self.max_distance} ULP: {a} {va:.9g} vs {b} {vb:.9g} {at}"
        if self.max_abs_difference is not None and self.magnitude:
            share = self.max_abs_difference / self.magnitude
            text += f"; largest |Δ| {self.max_abs_difference:.2e}, {share:.1e} of the tensor's largest |value|"
        return text


@dataclass(frozen=True)
class PairTrace(Stored):
    """A pair traced point by point: where its two runs part (or that they never do), as a result stores it.

    ``identical_points``: points equal on both sides before the first difference (all of them when none
    differs); ``last_identical``: the last of those, ``(step, name)``. ``triggers``: the facts read off the
    baseline side (:data:`TRIGGERS`: the steps where each holds). ``reproduced``: whether the traced runs gave
    the losses of the record calls (a trace of a build that does not repeat itself would name noise).
    ``error``: why there is no trace (a cell stored none), else None.

    The reconciled comparison (docs/known-differences.md): each side's run again with the switches of the known
    differences that cover it (``switches``, both sides'), against the other side's (reconciled or plain) run.
    ``reconciled_identical``: whether those two runs are bitwise identical at every point (``None``: no side has a
    reconciled run); ``reconciled``: where they still part.
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
    switches: tuple[str, ...] = ()
    reconciled_identical: bool | None = None
    reconciled: PointDifference | None = None
    #: The first difference measured on both tensors by a run's second pass (its workers alive): shown, never judged
    #: (a merge has no workers, and a verdict must not depend on where the cells meet).
    detail: PointDifference | None = None

    def swapped(self) -> PairTrace:
        """The same trace seen from the other side (the pair's frontends in the other order; its triggers are both sides')."""
        def flip(difference: PointDifference | None) -> PointDifference | None:
            return None if difference is None else difference.swapped()
        return dataclasses.replace(self, frontends=(self.frontends[1], self.frontends[0]), points=(self.points[1], self.points[0]),
                                   first_difference=flip(self.first_difference), reconciled=flip(self.reconciled),
                                   detail=flip(self.detail))

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
                f"trace: first difference at {(self.detail or self.first_difference).describe(self.frontends)}",
                f"trace: last identical point: {last} ({self.identical_points} of {total} points identical before it)",
            ]
        if self.reconciled_identical is not None:
            with_switches = f"with the switches {', '.join(self.switches)} on" if self.switches else "reconciled"
            lines.append(f"trace: {with_switches}: bitwise identical at every point" if self.reconciled_identical
                         else f"trace: {with_switches}: still differs at {self.reconciled.describe(self.frontends)}"
                         if self.reconciled is not None else f"trace: {with_switches}: still differs")
        if not self.reproduced:
            lines.append(
                "trace: the traced runs did not repeat the record calls' losses: this build is not deterministic, "
                "so the trace may name noise"
            )
        return lines
