"""The stored verdicts: what judging a pair, a cell and a performance target found, as the result keeps it.

A leaf module (it imports no judging and no process code), so the result model
(:mod:`harness.model.result`) and the modules that compute verdicts (:mod:`harness.judge.pairs`,
:mod:`harness.judge.cells`, :mod:`harness.judge.targets`) all import it, and none of them imports the other.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from harness.contract.optimizers import DEFAULT_OPTIMIZER

__all__ = [
    "CELL_OUTCOMES",
    "MEASURED_STEPS",
    "CellVerdict",
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

#: ``pass``: every check that could run passed; ``fail``: one did not (the reason names it);
#: ``not_judged``: nothing to judge (the cell did not run, or no reference and no scaler).
#: ``excused``: the cell failed a check of its own, and its pair is a proven R torch bug on the cell's side (a known
#: difference of kind ``bug`` whose switch reconciles the pair): the bug, not a new difference, carries it from float64.
CELL_OUTCOMES = ("pass", "fail", "excused", "not_judged")


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
class PairVerdict:
    """The judgement of one pair, with every line a person needs to act on it."""

    pair: str
    script: str
    mode: str
    device: str
    frontends: tuple[str, str]
    verdict: Verdict
    explanation: list[str] = field(default_factory=list, hash=False)
    details: dict[str, Any] = field(default_factory=dict, hash=False)
    #: The optimizer row both cells ran (results before schema 8: plain SGD).
    optimizer: str = DEFAULT_OPTIMIZER
    #: The loop feature both cells ran (harness/workload/features.py; ``none``, the plain loop, is not stored).
    feature: str = "none"

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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PairVerdict:
        """The verdict stored in a result's ``pairs`` (the inverse of :meth:`to_json`)."""
        return cls(
            pair=data["pair"], script=data["script"], mode=data["mode"], device=data["device"],
            frontends=(data["frontends"][0], data["frontends"][1]), verdict=Verdict(data["verdict"]),
            explanation=list(data["explanation"]), details=dict(data["details"]), optimizer=data.get("optimizer", DEFAULT_OPTIMIZER),
            feature=data.get("feature", "none"),
        )

    def to_json(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "pair": self.pair, "script": self.script, "mode": self.mode, "optimizer": self.optimizer, "device": self.device,
            "frontends": list(self.frontends), "verdict": self.verdict,
            "explanation": list(self.explanation), "details": self.details,
            **({} if self.feature == "none" else {"feature": self.feature}),
        }

    def explain(self) -> str:
        """The whole explanation, one finding per line (what a failing test prints)."""
        return "\n".join([self.summary, *(f"  {line}" for line in self.explanation[1:])])


@dataclass(frozen=True)
class TargetCheck:
    """One performance target checked on one subject (a cell or the whole matrix): ``name`` the target, ``target`` what it asks."""

    name: str
    subject: str
    target: str
    measured: str
    met: bool
    why: str | None = None
    #: A miss that the run's own noise floor shows the machine could cause alone (the round-to-round spread no larger than
    #: the run's noisiest floor: :mod:`harness.judge.spread`). Still a miss in every view; ``tox -e bench`` accepts only
    #: these. Always ``False`` for a met target.
    machine_noise: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TargetCheck:
        """The inverse of :meth:`to_json` (a result from before ``machine_noise`` has none)."""
        return cls(str(data["name"]), str(data["subject"]), str(data["target"]), str(data["measured"]), bool(data["met"]), data.get("why"),
                   bool(data.get("machine_noise", False)))

    def to_json(self) -> dict[str, Any]:
        """Plain data for the result and the report; ``machine_noise`` only where set (so a result from before it reads back
        byte for byte)."""
        data = asdict(self)
        if not self.machine_noise:
            del data["machine_noise"]
        return data


@dataclass(frozen=True)
class Float64Check:
    """One cell's distance from the float64 reference against its bound."""

    passed: bool
    max_rel_loss_error: float
    final_weights_rel_error: float
    first_step_beyond: int | None
    worst_tensor: str | None
    worst_tensor_rel_error: float | None
    replayed_skipped_steps: tuple[int, ...]
    bound: Float64Bound
    message: str

    def to_json(self) -> dict[str, Any]:
        """Plain data for the result (non-finite errors as None, JSON has no NaN)."""
        return {
            "passed": self.passed, "max_rel_loss_error": finite_or_none(self.max_rel_loss_error),
            "final_weights_rel_error": finite_or_none(self.final_weights_rel_error), "first_step_beyond": self.first_step_beyond,
            "worst_tensor": self.worst_tensor, "worst_tensor_rel_error": finite_or_none(self.worst_tensor_rel_error),
            "replayed_skipped_steps": list(self.replayed_skipped_steps), "bound": self.bound.to_json(), "message": self.message,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Float64Check:
        """The inverse of :meth:`to_json`."""
        return cls(
            passed=bool(data["passed"]), max_rel_loss_error=_nan(data["max_rel_loss_error"]),
            final_weights_rel_error=_nan(data["final_weights_rel_error"]), first_step_beyond=data["first_step_beyond"],
            worst_tensor=data["worst_tensor"], worst_tensor_rel_error=data["worst_tensor_rel_error"],
            replayed_skipped_steps=tuple(data["replayed_skipped_steps"]), bound=Float64Bound.from_json(data["bound"]),
            message=str(data["message"]),
        )

    def distance(self) -> dict[str, float | None]:
        """The cell's ``reference_distance``: max relative loss error over the judged steps, weights relative L2 error."""
        return {
            "max_rel_loss_error": finite_or_none(self.max_rel_loss_error),
            "final_weights_rel_error": finite_or_none(self.final_weights_rel_error),
        }


@dataclass(frozen=True)
class CellVerdict:
    """The judgement of one cell on its own: ``outcome`` (one of CELL_OUTCOMES), the checks, and why."""

    cell: str
    outcome: str
    float64: Float64Check | None
    scaler: ScalerCheck | None
    reason: str

    @property
    def failed(self) -> bool:
        """True when a check failed and no proven R torch bug explains it: the run exits 1."""
        return self.outcome == "fail"

    def to_json(self) -> dict[str, Any]:
        """Plain data for the result's cell (``verdict``)."""
        return {
            "cell": self.cell, "outcome": self.outcome, "reason": self.reason,
            "float64": self.float64.to_json() if self.float64 else None, "scaler": self.scaler.to_json() if self.scaler else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellVerdict:
        """The verdict stored in a result's cell (the inverse of :meth:`to_json`)."""
        return cls(
            cell=str(data["cell"]), outcome=str(data["outcome"]), reason=str(data["reason"]),
            float64=Float64Check.from_json(data["float64"]) if data.get("float64") else None,
            scaler=ScalerCheck.from_json(data["scaler"]) if data.get("scaler") else None,
        )

    def lines(self) -> list[str]:
        """Every finding, one per line (the report's details)."""
        found = [f"{self.cell}: {self.outcome} — {self.reason}"]
        found += [f"  float64: {self.float64.message}"] if self.float64 else []
        found += [f"  float64 bound: {self.float64.bound.describe()} — {self.float64.bound.reason}"] if self.float64 else []
        found += [f"  scaler: {self.scaler.message}"] if self.scaler else []
        return found



def finite_or_none(value: Any) -> float | None:
    """A number as a result stores it: JSON has no NaN or infinity, so a non-finite (or missing) one is ``None``."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


@dataclass(frozen=True)
class ReferenceDistance:
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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReferenceDistance:
        """The inverse of :meth:`to_json`."""
        return cls(data["max_rel_loss_error"], data["final_weights_rel_error"], data.get("worst_tensor"),
                   data.get("worst_tensor_rel_error"))

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ScalerCheck:
    """The oracle's judgement of one cell's scale history: ``passed``, or the first step that breaks the rule."""

    passed: bool
    steps: int
    skipped_steps: tuple[int, ...]
    first_step: int | None
    expected: float | None
    recorded: float | None
    message: str

    def to_json(self) -> dict[str, Any]:
        """Plain data for the cell verdict."""
        return {
            "passed": self.passed, "steps": self.steps, "skipped_steps": list(self.skipped_steps),
            "first_step": self.first_step, "expected": self.expected, "recorded": self.recorded, "message": self.message,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScalerCheck:
        """The inverse of :meth:`to_json`."""
        return cls(
            passed=bool(data["passed"]), steps=int(data["steps"]), skipped_steps=tuple(data["skipped_steps"]),
            first_step=data["first_step"], expected=data["expected"], recorded=data["recorded"], message=str(data["message"]),
        )


#: The step count the base numbers were measured at (the ``tiny`` preset: 2 epochs x 10 batches).
MEASURED_STEPS = 20


@dataclass(frozen=True)
class Float64Bound:
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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Float64Bound:
        """The inverse of :meth:`to_json`."""
        return cls(float(data["loss_rtol"]), float(data["weight_rtol"]), str(data["precision"]), int(data["steps"]), str(data["reason"]))

    def to_json(self) -> dict[str, Any]:
        """Plain data for a cell verdict's details."""
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """One line with the numbers, for explanations."""
        return f"loss rel error {self.loss_rtol:.2e} (at {self.steps} steps), weights rel L2 {self.weight_rtol:.2e}"


def bound_growth(steps: int) -> float:
    return max(1.0, steps / MEASURED_STEPS)
