"""Checks of a run record as it comes back from a script, before anything else reads it."""

from __future__ import annotations

import math
from typing import Any

from harness.matrix import Cell
from harness.results import RECORD_SCHEMA_VERSION
from harness.spec import SCRIPTS, WorkloadSpec

__all__ = ["SCALER_MODES", "first_nonfinite", "record_problem"]

#: Modes where a non-finite loss is expected (the scaler skips that step); elsewhere it is a failure.
SCALER_MODES = frozenset(SCRIPTS["cuda_amp_grad_scaler"])


def record_problem(record: Any, spec: WorkloadSpec, cell: Cell) -> str | None:
    """Why ``record`` is not a usable run record for ``spec``, or ``None``."""
    if not isinstance(record, dict) or record.get("schema_version") != RECORD_SCHEMA_VERSION:
        return f"the {cell.frontend} script returned something that is not a version-{RECORD_SCHEMA_VERSION} run record"
    losses = record.get("losses")
    if not isinstance(losses, list) or len(losses) != spec.steps:
        got = len(losses) if isinstance(losses, list) else type(losses).__name__
        return f"the {cell.frontend} script returned {got} losses, expected {spec.steps} (one per step)"
    return None


def first_nonfinite(losses: list[Any]) -> int | None:
    """The first step whose loss is missing, NaN or infinite, or ``None``."""
    for step, value in enumerate(losses):
        if value is None or not math.isfinite(float(value)):
            return step
    return None

