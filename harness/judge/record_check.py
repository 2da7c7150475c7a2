"""The one check of a run record as it comes back from a script, before anything else reads it."""

from __future__ import annotations

import math
from typing import Any

from harness.model.record import RECORD_SCHEMA_VERSION
from harness.model.result import Status
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec

__all__ = ["describe_loss", "expected_injections", "first_nonfinite", "judge_record", "nonfinite_reason"]


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


def expected_injections(spec: WorkloadSpec, cell: Cell) -> list[int]:
    """The steps at which ``cell``'s script must put an overflow: the spec's ``overflow_steps`` in a mode with a dynamic
    scaler (which skips them), none elsewhere."""
    return list(spec.overflow_steps) if cell.properties.skips_steps else []


def judge_record(record: Any, spec: WorkloadSpec, cell: Cell) -> tuple[Status, str | None]:
    """How a call that returned ``record`` ended: ``ok``, ``error`` (not a usable record) or ``numerical_failure``.

    One check for the record call and every timed round, so the two cannot drift apart. The record must
    be a version-``RECORD_SCHEMA_VERSION`` run record of the cell's script, mode and optimizer with one loss per step of
    ``spec``, which put an overflow exactly where it was asked to (a script that ignores an injection would pass the
    skip-and-backoff checks it is there to exercise) and applied no switch (a script that turned one on would hide the
    known difference it removes); a non-finite loss fails every mode but those with a dynamic
    scaler, which skips that step by design. The reason names the first non-finite loss (``loss is NaN at step 3 (r)``)
    or what is wrong with the record.
    """
    if not isinstance(record, dict) or record.get("schema_version") != RECORD_SCHEMA_VERSION:
        return Status.ERROR, f"the {cell.frontend} script returned something that is not a version-{RECORD_SCHEMA_VERSION} run record"
    for field, wanted in (("script", cell.script), ("mode", cell.mode), ("optimizer", cell.optimizer)):
        if record.get(field) != wanted:
            return Status.ERROR, f"the {cell.frontend} script's record says {field} {record.get(field)!r}, but it was asked for {wanted!r}"
    losses = record.get("losses")
    if not isinstance(losses, list) or len(losses) != spec.steps:
        got = len(losses) if isinstance(losses, list) else type(losses).__name__
        return Status.ERROR, f"the {cell.frontend} script returned {got} losses, expected {spec.steps} (one per step)"
    injected, wanted_steps = record.get("injected_steps"), expected_injections(spec, cell)
    if injected != wanted_steps:
        return Status.ERROR, (f"the {cell.frontend} script put an overflow at steps {injected!r}, but was asked for {wanted_steps} "
                              "(overflow_steps): a script must inject what the spec asks, or the scaler's skip goes untested")
    if record.get("switches"):  # a plain run with a known difference's switch on would hide that difference
        return Status.ERROR, (f"the {cell.frontend} script applied the switches {record.get('switches')!r} in a run that asked for "
                              "none: only a reconciled run may patch the binding")
    failure = None if cell.properties.skips_steps else nonfinite_reason(losses, cell.frontend)
    return (Status.OK, None) if failure is None else (Status.NUMERICAL_FAILURE, failure)
