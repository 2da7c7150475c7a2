"""What comparing two runs of one pair finds: one small typed record per kind of comparison.

Findings are measurements only (NumPy on the two sides' records and weights): how far apart the losses
are at each step, each final-weights tensor, the loss-scale history and skipped steps, the dtypes inside
autocast, each side's distance from float64, the libtorch versions. Whether that is a verdict is
:mod:`harness.judge.pairs`'s business, and how it reads is :mod:`harness.judge.explain`'s; neither parses text.
Each finding knows, as typed fields, whether it is bitwise equal (``identical``) and whether it is
inside the tolerance (``beyond`` is the opposite), so the judge reads booleans and numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.judge.tolerances import Tolerance
from harness.judge.weight_findings import KeptWeights, WeightFindings, find_weights
from harness.model.record import RunRecord
from harness.model.verdicts import ReferenceDistance, finite_or_none

__all__ = [
    "DTYPE_FIELDS",
    "DtypeFindings",
    "Float64Findings",
    "HistoryFindings",
    "LossFindings",
    "PairFindings",
    "StatusFindings",
    "find_dtypes",
    "find_float64",
    "find_history",
    "find_pair",
    "find_losses",
]

#: The dtypes each side records from inside the autocast region; they must be equal.
DTYPE_FIELDS = ("output_dtype", "loss_dtype")

#: Two values, one per side, in the pair's frontend order.
Both = tuple[Any, Any]


@dataclass(frozen=True)
class StatusFindings:
    """A side that gave no comparable run: each side's status, and the reasons of those that failed."""

    statuses: tuple[str, str]
    reasons: tuple[str | None, str | None]
    failed: tuple[bool, bool]


@dataclass(frozen=True)
class LossFindings:
    """The two loss trajectories, step by step, against the tolerance."""

    counts: tuple[int, int]
    steps: int
    max_abs: float
    max_rel: float
    worst_step: int
    first_difference_step: int | None
    first_beyond_tolerance_step: int | None
    steps_beyond_tolerance: int
    final: tuple[float | None, float | None]
    #: At the first step beyond tolerance: each side's loss, their gap and the gap allowed there.
    first_beyond: tuple[float, float, float, float] | None
    #: The largest share of the allowed gap any step used (0 when bitwise equal), and its step.
    tolerance_used: float
    tolerance_used_step: int

    @property
    def count_differs(self) -> bool:
        """The sides recorded different numbers of steps."""
        return self.counts[0] != self.counts[1]

    @property
    def identical(self) -> bool:
        """Bitwise equal at every step, and as many steps on each side."""
        return not self.count_differs and self.first_difference_step is None

    @property
    def beyond(self) -> bool:
        """A step past the tolerance, or a different step count."""
        return self.count_differs or self.first_beyond_tolerance_step is not None


@dataclass(frozen=True)
class HistoryFindings:
    """A per-step history both sides must share exactly: the loss scale, or which steps were skipped."""

    field: str
    present: tuple[bool, bool]
    differing_steps: tuple[int, ...]
    length: int
    #: Each side's value at the first differing step (None where that side has no such step).
    first_values: tuple[Any, Any] | None
    #: The steps each side skipped (for ``skipped``).
    skipped_at: tuple[tuple[int, ...], tuple[int, ...]]
    #: The first side's first and last value, when it recorded any.
    span: tuple[Any, Any] | None

    @property
    def recorded(self) -> bool:
        """Both sides recorded this history."""
        return all(self.present)

    @property
    def identical(self) -> bool:
        """Recorded by both and equal at every step, or recorded by neither."""
        return self.present[0] == self.present[1] and not self.differing_steps

    @property
    def first_difference_step(self) -> int | None:
        """The first step where the sides differ."""
        return self.differing_steps[0] if self.differing_steps else None


@dataclass(frozen=True)
class DtypeFindings:
    """Each side's recorded dtypes: inside autocast (output, loss), and the AMP dtype it ran with."""

    output_dtype: Both
    loss_dtype: Both
    amp_dtype: Both

    def differing(self) -> list[str]:
        """The names of the fields that differ, in record order."""
        return [name for name in (*DTYPE_FIELDS, "amp_dtype") if getattr(self, name)[0] != getattr(self, name)[1]]

    @property
    def autocast_equal(self) -> bool:
        """The dtypes inside autocast are equal."""
        return all(getattr(self, name)[0] == getattr(self, name)[1] for name in DTYPE_FIELDS)


@dataclass(frozen=True)
class Float64Findings:
    """Each side's recorded distance from the float64 reference (``reference_distance``), when both have one."""

    distances: tuple[ReferenceDistance | None, ReferenceDistance | None]
    #: The relative L2 gap between the two sides' final weights (all tensors), to weigh against the distances.
    weight_gap: float | None

    @property
    def recorded(self) -> bool:
        """Both sides have a distance."""
        return all(self.distances)

    @property
    def weight_errors(self) -> tuple[float, float]:
        """Each side's final-weights relative L2 error from float64 (a non-finite one, stored as None, is infinite)."""
        da, db = self.distances
        assert da and db, "only when recorded"
        return tuple(math.inf if d.final_weights_rel_error is None else d.final_weights_rel_error for d in (da, db))  # type: ignore[return-value]

    @property
    def further(self) -> int | None:
        """The side further from float64 (0 or 1), or None when equally far or not recorded."""
        if not self.recorded:
            return None
        wa, wb = self.weight_errors
        return None if wa == wb else (0 if wa > wb else 1)

    @property
    def further_ratio(self) -> float:
        """How many times the nearer side's weight error the further side's is."""
        wa, wb = self.weight_errors
        far, near = (wa, wb) if wa > wb else (wb, wa)
        return far / near if near else math.inf


def find_losses(losses_a: Sequence[float | None], losses_b: Sequence[float | None], tol: Tolerance) -> LossFindings:
    """The two trajectories over the steps both recorded (NaN on both sides is equal, on one side infinitely far)."""
    la, lb = _losses(losses_a), _losses(losses_b)
    counts = (int(la.size), int(lb.size))
    n = min(counts)
    la, lb = la[:n], lb[:n]
    both_nan, one_nan = np.isnan(la) & np.isnan(lb), np.isnan(la) ^ np.isnan(lb)
    diff = np.where(both_nan, 0.0, np.where(one_nan, np.inf, np.abs(la - lb)))
    scale = np.fmax(np.abs(la), np.abs(lb))
    rel = np.where(diff == 0, 0.0, diff / np.where(scale > 0, scale, np.inf))
    allowed = tol.loss_atol + tol.loss_rtol * np.nan_to_num(scale)
    beyond = diff > allowed
    differ = diff > 0
    used = diff / allowed
    first = int(np.argmax(beyond)) if beyond.any() else None
    return LossFindings(
        counts=counts, steps=n, max_abs=float(diff.max()) if n else 0.0, max_rel=float(rel.max()) if n else 0.0,
        worst_step=int(np.argmax(diff)) if n else 0,
        first_difference_step=int(np.argmax(differ)) if differ.any() else None,
        first_beyond_tolerance_step=first, steps_beyond_tolerance=int(beyond.sum()),
        final=(finite_or_none(la[-1]), finite_or_none(lb[-1])) if n else (None, None),
        first_beyond=(float(la[first]), float(lb[first]), float(diff[first]), float(tol.loss_atol + tol.loss_rtol * scale[first]))
        if first is not None else None,
        tolerance_used=float(used.max()) if n else 0.0, tolerance_used_step=int(np.argmax(used)) if n else 0,
    )


def find_history(field: str, sa: Sequence[Any] | None, sb: Sequence[Any] | None) -> HistoryFindings:
    """Where two per-step histories differ (a step one side lacks differs)."""
    present = (sa is not None, sb is not None)
    if sa is None or sb is None:
        return HistoryFindings(field, present, (), len(sa or sb or ()), None, ((), ()), (sa[0], sa[-1]) if sa else None)
    length = max(len(sa), len(sb))
    steps = tuple(i for i in range(length) if i >= len(sa) or i >= len(sb) or sa[i] != sb[i])
    first = (sa[steps[0]] if steps[0] < len(sa) else None, sb[steps[0]] if steps[0] < len(sb) else None) if steps else None
    skipped = (tuple(i for i, v in enumerate(sa) if v), tuple(i for i, v in enumerate(sb) if v)) if field == "skipped" else ((), ())
    return HistoryFindings(field, present, steps, length, first, skipped, (sa[0], sa[-1]) if sa else None)


def find_dtypes(ra: RunRecord, rb: RunRecord) -> DtypeFindings:
    """Each side's recorded dtypes."""
    return DtypeFindings((ra.output_dtype, rb.output_dtype), (ra.loss_dtype, rb.loss_dtype), (ra.amp_dtype, rb.amp_dtype))


def find_float64(da: ReferenceDistance | None, db: ReferenceDistance | None, weights: WeightFindings | None) -> Float64Findings:
    """Each side's distance from float64, beside the weight gap between the sides."""
    return Float64Findings((da, db), weights.rel_l2_all if weights and weights.readable else None)


def _losses(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values or []], dtype=np.float64)


@dataclass(frozen=True)
class PairFindings:
    """Everything comparing two ok runs of one pair found, under the tolerance they are held to."""

    names: tuple[str, str]
    mode: str
    device: str
    tolerance: Tolerance
    losses: LossFindings
    weights: WeightFindings
    loss_scale: HistoryFindings
    skipped: HistoryFindings
    dtypes: DtypeFindings
    float64: Float64Findings
    libtorch: tuple[str | None, str | None]

    @property
    def identical(self) -> bool:
        """Losses, weights, loss-scale history, skipped steps and dtypes all bitwise equal."""
        histories = self.loss_scale.identical and self.skipped.identical
        return self.losses.identical and self.weights.identical and histories and not self.dtypes.differing()

    @property
    def beyond(self) -> bool:
        """Some check failed outright: beyond tolerance, or something that must be equal is not."""
        histories = not (self.loss_scale.identical and self.skipped.identical)
        return self.losses.beyond or self.weights.beyond or histories or bool(self.dtypes.differing())

    @property
    def same_libtorch(self) -> bool:
        """Both sides report the same libtorch version."""
        return self.libtorch[0] is not None and self.libtorch[0] == self.libtorch[1]


def find_pair(
    names: tuple[str, str], mode: str, device: str, ra: RunRecord, rb: RunRecord, tol: Tolerance,
    distances: tuple[ReferenceDistance | None, ReferenceDistance | None], kept: KeptWeights | None = None,
) -> PairFindings:
    """Compare two run records (and the weights files they point to, or what the result ``kept`` of them) under ``tol``."""
    weights = find_weights((ra.weights_path, rb.weights_path), tol, kept)
    return PairFindings(
        names=names, mode=mode, device=device, tolerance=tol,
        losses=find_losses(ra.losses, rb.losses, tol), weights=weights,
        loss_scale=find_history("loss_scale", ra.loss_scale, rb.loss_scale),
        skipped=find_history("skipped", ra.skipped, rb.skipped),
        dtypes=find_dtypes(ra, rb), float64=find_float64(distances[0], distances[1], weights),
        libtorch=(ra.libtorch_version, rb.libtorch_version),
    )
