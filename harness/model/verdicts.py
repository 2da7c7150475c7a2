"""The stored verdicts: what judging a pair, a cell and a performance target found, as the result keeps it.

A leaf module (it imports no judging and no process code), so the result model
(:mod:`harness.model.result`) and the modules that compute verdicts (:mod:`harness.judge.pairs`,
:mod:`harness.judge.cells`, :mod:`harness.judge.targets`) all import it, and none of them imports the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from harness.contract.models import DEFAULT_MODEL
from harness.contract.optimizers import DEFAULT_OPTIMIZER
from harness.model.codec import Stored, codec
from harness.workload.features import NO_FEATURE

__all__ = [
    "CELL_OUTCOMES",
    "MEASURED_STEPS",
    "CellVerdict",
    "Outcome",
    "TargetCheck",
    "Verdict",
    "Float64Bound",
    "Float64Check",
    "PairVerdict",
    "ReferenceDistance",
    "ScalerCheck",
    "bound_growth",
    "finite_or_none",
]

class Outcome(StrEnum):
    """How a cell stands on its own. ``pass``: every check that could run passed; ``fail``: one did not (the reason names
    it); ``not_judged``: nothing to judge (the cell did not run, or no reference and no scaler). ``excused``: the cell
    failed a check of its own, and its pair is a proven R torch bug on the cell's side (a known difference of kind ``bug``
    whose switch reconciles the pair): the bug, not a new difference, carries it from float64."""

    PASS = "pass"
    FAIL = "fail"
    EXCUSED = "excused"
    NOT_JUDGED = "not_judged"


#: Every outcome, in order.
CELL_OUTCOMES: tuple[str, ...] = tuple(Outcome)


def finite_or_none(value: Any) -> float | None:
    """A number as a result stores it: JSON has no NaN or infinity, so a non-finite (or missing) one is ``None``."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _nan(value: float | None) -> float:
    """A stored distance back as a number: :func:`finite_or_none` wrote a distance not measured (NaN) as null."""
    return math.nan if value is None else float(value)


class Verdict(StrEnum):
    """What judging a pair found (docs/judging.md). ``identical``: losses, weights and scales bitwise equal.
    ``within_tolerance``: not identical, every difference inside the tolerance policy, and identity not required.
    ``diverged``: a real difference (beyond tolerance, or not bitwise identical where ``strict`` expects identity).
    ``known_difference``: not identical, and known differences explain the whole of it. ``stale_known_difference``:
    identical, but the trace shows the trigger of an entry that covers this pair. ``unsupported`` / ``error`` /
    ``skipped``: a side gave no comparable run (``error`` also covers a numerical failure and unreadable weights).
    """

    IDENTICAL = "identical"
    WITHIN_TOLERANCE = "within_tolerance"
    KNOWN_DIFFERENCE = "known_difference"
    DIVERGED = "diverged"
    STALE_KNOWN_DIFFERENCE = "stale_known_difference"
    UNSUPPORTED = "unsupported"
    ERROR = "error"
    SKIPPED = "skipped"

    @property
    def ok(self) -> bool:
        """The two frontends agree: bitwise, within tolerance, or as a known difference says."""
        return self in (Verdict.IDENTICAL, Verdict.WITHIN_TOLERANCE, Verdict.KNOWN_DIFFERENCE)

    @property
    def failing(self) -> bool:
        """The verdict fails a run (exit status 1)."""
        return self in (Verdict.DIVERGED, Verdict.STALE_KNOWN_DIFFERENCE)


@dataclass(frozen=True)
class PairVerdict(Stored):
    """The judgement of one pair, with every line a person needs to act on it."""

    pair: str
    script: str
    mode: str
    #: The optimizer row both cells ran (results before schema 8: plain SGD).
    optimizer: str = field(default=DEFAULT_OPTIMIZER, kw_only=True)
    device: str
    frontends: tuple[str, str]
    verdict: Verdict
    explanation: list[str] = field(default_factory=list, hash=False)
    details: dict[str, Any] = field(default_factory=dict, hash=False)
    #: The loop feature both cells ran (harness/workload/features.py; ``none``, the plain loop, is not stored).
    feature: str = field(default=NO_FEATURE, metadata=codec(omit=lambda pair: pair.feature == NO_FEATURE))
    #: The model both cells trained (harness/contract/models.py; the default, the MLP, is not stored).
    model: str = field(default=DEFAULT_MODEL, metadata=codec(omit=lambda pair: pair.model == DEFAULT_MODEL))

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))  # a name no verdict has is refused here, not misread later

    @property
    def ok(self) -> bool:
        """True when the two frontends agree (bitwise, within tolerance, or as a known difference says)."""
        return Verdict(self.verdict).ok

    @property
    def summary(self) -> str:
        """The first explanation line: the verdict and its main cause."""
        return self.explanation[0] if self.explanation else f"{self.pair}: {self.verdict}"

    @property
    def cause(self) -> str:
        """The summary without the pair and verdict: the one-line why, for tables."""
        return self.summary.partition(" — ")[2] or self.verdict

    def explain(self) -> str:
        """The whole explanation, one finding per line (what a failing test prints)."""
        return "\n".join([self.summary, *(f"  {line}" for line in self.explanation[1:])])


@dataclass(frozen=True)
class TargetCheck(Stored):
    """One performance target checked on one subject (a cell or the whole matrix): ``name`` the target, ``target`` what it asks."""

    name: str
    subject: str
    target: str
    measured: str
    met: bool
    why: str | None = None
    #: A miss that the run's own noise floor shows the machine could cause alone (the round-to-round spread no larger than
    #: the run's noisiest floor: :mod:`harness.judge.spread`). Still a miss in every view; ``tox -e bench`` accepts only
    #: these. Always ``False`` for a met target. Written only where set, so a result from before it reads back byte for byte.
    machine_noise: bool = field(default=False, metadata=codec(omit=lambda check: not check.machine_noise))


@dataclass(frozen=True)
class Float64Check(Stored):
    """One cell's distance from the float64 reference against its bound (non-finite errors stored as null: NaN marks a
    distance that could not be measured, and a result keeps no NaN where a reader would compute with it)."""

    passed: bool
    max_rel_loss_error: float = field(metadata=codec(encode=finite_or_none, decode=_nan))
    final_weights_rel_error: float = field(metadata=codec(encode=finite_or_none, decode=_nan))
    first_step_beyond: int | None
    worst_tensor: str | None
    worst_tensor_rel_error: float | None = field(metadata=codec(encode=finite_or_none))
    replayed_skipped_steps: tuple[int, ...]
    bound: Float64Bound
    message: str

    def distance(self) -> dict[str, float | None]:
        """The cell's ``reference_distance``: max relative loss error over the judged steps, weights relative L2 error."""
        return {
            "max_rel_loss_error": finite_or_none(self.max_rel_loss_error),
            "final_weights_rel_error": finite_or_none(self.final_weights_rel_error),
        }


@dataclass(frozen=True)
class CellVerdict(Stored):
    """The judgement of one cell on its own: its ``outcome``, the checks, and why."""

    cell: str
    outcome: Outcome
    reason: str = field(kw_only=True)
    float64: Float64Check | None
    scaler: ScalerCheck | None

    @property
    def failed(self) -> bool:
        """True when a check failed and no proven R torch bug explains it: the run exits 1."""
        return self.outcome == Outcome.FAIL

    def lines(self) -> list[str]:
        """Every finding, one per line (the report's details)."""
        found = [f"{self.cell}: {self.outcome} — {self.reason}"]
        found += [f"  float64: {self.float64.message}"] if self.float64 else []
        found += [f"  float64 bound: {self.float64.bound.describe()} — {self.float64.bound.reason}"] if self.float64 else []
        found += [f"  scaler: {self.scaler.message}"] if self.scaler else []
        return found



@dataclass(frozen=True)
class ReferenceDistance(Stored):
    """A cell's distance from float64, as the run measured it: what its own verdict is judged from, on every load.

    ``max_rel_loss_error``: the largest relative loss error over the judged steps (recomputable from the stored
    losses, and checked against them on load). ``final_weights_rel_error``: the relative L2 error of all final
    weights together, and ``worst_tensor`` the tensor furthest from float64 (``worst_tensor_rel_error``): these
    need the reference's weights, which the result does not keep, so they are stored as measured. Non-finite
    values are ``None`` (JSON has no NaN).
    """

    max_rel_loss_error: float | None
    final_weights_rel_error: float | None
    worst_tensor: str | None = None
    worst_tensor_rel_error: float | None = None

    @classmethod
    def from_check(cls, check: Float64Check) -> ReferenceDistance:
        """The distance a float64 check measured (non-finite as ``None``)."""
        distance = check.distance()
        return cls(distance["max_rel_loss_error"], distance["final_weights_rel_error"], check.worst_tensor,
                   finite_or_none(check.worst_tensor_rel_error))



@dataclass(frozen=True)
class ScalerCheck(Stored):
    """The oracle's judgement of one cell's scale history: ``passed``, or the first step that breaks the rule."""

    passed: bool
    steps: int
    skipped_steps: tuple[int, ...]
    first_step: int | None
    expected: float | None
    recorded: float | None
    message: str

#: The step count the base numbers were measured at (the ``tiny`` preset: 2 epochs x 10 batches).
MEASURED_STEPS = 20


@dataclass(frozen=True)
class Float64Bound(Stored):
    """How far one cell may be from the float64 reference, and why.

    The loss at step ``k`` (0-based) passes when its relative error is ``<= loss_bound_at(k)``; the
    final weights pass when their relative L2 error (all tensors together) is ``<= weight_rtol``.
    """

    loss_rtol: float
    weight_rtol: float
    precision: str
    steps: int
    reason: str

    def loss_bound_at(self, step: int) -> float:
        """The loss bound after ``step + 1`` steps: the base bound, growing linearly past MEASURED_STEPS."""
        return self.loss_rtol / bound_growth(self.steps) * bound_growth(step + 1)

    def describe(self) -> str:
        """One line with the numbers, for explanations."""
        return f"loss rel error {self.loss_rtol:.2e} (at {self.steps} steps), weights rel L2 {self.weight_rtol:.2e}"


def bound_growth(steps: int) -> float:
    return max(1.0, steps / MEASURED_STEPS)
