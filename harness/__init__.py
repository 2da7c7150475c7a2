"""amp-parity: a parity and timing harness for automatic mixed precision in PyTorch and R torch.

The public surface; importing it never imports torch (the frontends run in worker processes).
"""

from __future__ import annotations

from harness.compare import compare_cells, compare_result
from harness.errors import (
    AmpParityError,
    FixtureError,
    ResultError,
    ScriptError,
    SpecError,
    WorkerCrashed,
    WorkerError,
    WorkerTimeout,
)
from harness.fixtures import FixtureFile, ensure_fixtures
from harness.matrix import Cell, cells_for
from harness.model import CellResult, MatrixResult, PairVerdict, Status
from harness.outputs import ResultClaim
from harness.reference import Reference, run_reference
from harness.report import write_report
from harness.results import load_result, save_result
from harness.runner import MatrixRunner
from harness.spec import MODES, PRESETS, SCRIPTS, WorkloadSpec
from harness.tolerances import DEFAULT_JUDGING, JUDGING_POLICIES, Tolerance, tolerance_for

__all__ = [
    "AmpParityError",
    "Cell",
    "CellResult",
    "DEFAULT_JUDGING",
    "FixtureError",
    "FixtureFile",
    "JUDGING_POLICIES",
    "MODES",
    "MatrixResult",
    "MatrixRunner",
    "PRESETS",
    "PairVerdict",
    "Reference",
    "ResultClaim",
    "ResultError",
    "SCRIPTS",
    "ScriptError",
    "SpecError",
    "Status",
    "Tolerance",
    "WorkerCrashed",
    "WorkerError",
    "WorkerTimeout",
    "WorkloadSpec",
    "cells_for",
    "compare_cells",
    "compare_result",
    "ensure_fixtures",
    "load_result",
    "run_reference",
    "save_result",
    "tolerance_for",
    "write_report",
]
