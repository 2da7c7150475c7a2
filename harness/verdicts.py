"""The stored verdicts: what judging a pair, a cell and a figure found, as the result keeps it.

A leaf module (it imports no judging and no process code), so the result model
(:mod:`harness.model`) and the modules that compute verdicts (:mod:`harness.compare`,
:mod:`harness.cell_verdict`, :mod:`harness.figures`) all import it, and none of them imports the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.scaler_oracle import ScalerCheck
from harness.tolerances import Float64Bound

__all__ = ["CELL_OUTCOMES", "CellVerdict", "FigureCheck", "Float64Check", "PairVerdict", "finite_or_none"]

#: ``pass``: every check that could run passed; ``fail``: one did not (the reason names it);
#: ``not_judged``: nothing to judge (the cell did not run, or no reference and no scaler).
CELL_OUTCOMES = ("pass", "fail", "not_judged")


@dataclass(frozen=True)
class PairVerdict:
    """The judgement of one pair, with every line a person needs to act on it."""

    pair: str
    script: str
    mode: str
    device: str
    frontends: tuple[str, str]
    verdict: str
    explanation: list[str] = field(default_factory=list, hash=False)
    details: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def ok(self) -> bool:
        """True when the two frontends agree (bitwise, within tolerance, or as a known difference says)."""
        return self.verdict in ("identical", "within_tolerance", "known_difference")

    @property
    def summary(self) -> str:
        """The first explanation line: the verdict and its main cause."""
        return self.explanation[0] if self.explanation else f"{self.pair}: {self.verdict}"

    @property
    def cause(self) -> str:
        """The summary without the pair and verdict: the one-line why, for tables."""
        return self.summary.partition(" — ")[2] or self.verdict

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairVerdict:
        """The verdict stored in a result's ``pairs`` (the inverse of :meth:`to_dict`)."""
        return cls(
            pair=data["pair"], script=data["script"], mode=data["mode"], device=data["device"],
            frontends=(data["frontends"][0], data["frontends"][1]), verdict=data["verdict"],
            explanation=list(data["explanation"]), details=dict(data["details"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "pair": self.pair, "script": self.script, "mode": self.mode, "device": self.device,
            "frontends": list(self.frontends), "verdict": self.verdict,
            "explanation": list(self.explanation), "details": self.details,
        }

    def explain(self) -> str:
        """The whole explanation, one finding per line (what a failing test prints)."""
        return "\n".join([self.summary, *(f"  {line}" for line in self.explanation[1:])])


@dataclass(frozen=True)
class FigureCheck:
    """One figure checked on one subject (a cell or the whole matrix)."""

    figure: str
    subject: str
    target: str
    measured: str
    met: bool
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the result and the report."""
        return asdict(self)


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

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the result (non-finite errors as None, JSON has no NaN)."""
        return {
            "passed": self.passed, "max_rel_loss_error": finite_or_none(self.max_rel_loss_error),
            "final_weights_rel_error": finite_or_none(self.final_weights_rel_error), "first_step_beyond": self.first_step_beyond,
            "worst_tensor": self.worst_tensor, "worst_tensor_rel_error": finite_or_none(self.worst_tensor_rel_error),
            "replayed_skipped_steps": list(self.replayed_skipped_steps), "bound": self.bound.to_dict(), "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Float64Check:
        """The inverse of :meth:`to_dict`."""
        return cls(
            passed=bool(data["passed"]), max_rel_loss_error=_nan(data["max_rel_loss_error"]),
            final_weights_rel_error=_nan(data["final_weights_rel_error"]), first_step_beyond=data["first_step_beyond"],
            worst_tensor=data["worst_tensor"], worst_tensor_rel_error=data["worst_tensor_rel_error"],
            replayed_skipped_steps=tuple(data["replayed_skipped_steps"]), bound=Float64Bound(**data["bound"]),
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
        """True when a check failed: the run exits 1."""
        return self.outcome == "fail"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the result's cell (``verdict``)."""
        return {
            "cell": self.cell, "outcome": self.outcome, "reason": self.reason,
            "float64": self.float64.to_dict() if self.float64 else None, "scaler": self.scaler.to_dict() if self.scaler else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CellVerdict:
        """The verdict stored in a result's cell (the inverse of :meth:`to_dict`)."""
        return cls(
            cell=str(data["cell"]), outcome=str(data["outcome"]), reason=str(data["reason"]),
            float64=Float64Check.from_dict(data["float64"]) if data.get("float64") else None,
            scaler=ScalerCheck.from_dict(data["scaler"]) if data.get("scaler") else None,
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
