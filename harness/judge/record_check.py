"""The one check of a run record as it comes back from a script, before anything else reads it."""

from __future__ import annotations

import math
from typing import Any

from harness.model.record import RECORD_SCHEMA_VERSION
from harness.model.result import Status
from harness.workload.matrix import Cell
from harness.workload.spec import SCRIPTS, WorkloadSpec

__all__ = ["SCALER_MODES", "describe_loss", "first_nonfinite", "judge_record", "nonfinite_reason"]

#: Modes where a non-finite loss is expected (the scaler skips that step); elsewhere it is a failure.
SCALER_MODES = frozenset(SCRIPTS["cuda_amp_grad_scaler"])


def first_nonfinite(losses: list[Any]) -> int | None:
    """The first step whose loss is missing, NaN or infinite, or ``None``."""
    for step, value in enumerate(losses):
        if value is None or not math.isfinite(float(value)):
            return step
    return None


def describe_loss(value: Any) -> str:
    """A loss as a person reads it: ``NaN``, ``inf``, ``-inf``, ``missing`` (null in the record), or the number."""
    if value is None:
        return "missing"
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return f"{number:.7g}"


def nonfinite_reason(losses: list[Any], frontend: str) -> str | None:
    """``loss is NaN at step 3 (r)`` for the first non-finite loss, or ``None`` when every loss is finite.

    Both scripts write NaN and ±infinity as such (JSON ``NaN``/``Infinity``, which Python's json reads),
    and null only for a loss that was not recorded, so the reason can name which it was.
    """
    step = first_nonfinite(losses)
    return None if step is None else f"loss is {describe_loss(losses[step])} at step {step} ({frontend})"


def judge_record(record: Any, spec: WorkloadSpec, cell: Cell) -> tuple[Status, str | None]:
    """How a call that returned ``record`` ended: ``ok``, ``error`` (not a usable record) or ``numerical_failure``.

    One check for the record call and every timed round, so the two cannot drift apart. The record must
    be a version-``RECORD_SCHEMA_VERSION`` run record with one loss per step of ``spec``; a non-finite
    loss fails every mode but the scaler modes, where the scaler skips that step by design. The reason
    names the first non-finite loss (``loss is NaN at step 3 (r)``) or what is wrong with the record.
    """
    if not isinstance(record, dict) or record.get("schema_version") != RECORD_SCHEMA_VERSION:
        return Status.ERROR, f"the {cell.frontend} script returned something that is not a version-{RECORD_SCHEMA_VERSION} run record"
    losses = record.get("losses")
    if not isinstance(losses, list) or len(losses) != spec.steps:
        got = len(losses) if isinstance(losses, list) else type(losses).__name__
        return Status.ERROR, f"the {cell.frontend} script returned {got} losses, expected {spec.steps} (one per step)"
    failure = None if cell.mode in SCALER_MODES else nonfinite_reason(losses, cell.frontend)
    return (Status.OK, None) if failure is None else (Status.NUMERICAL_FAILURE, failure)
