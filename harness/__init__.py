"""amp-parity: a parity and timing harness for automatic mixed precision in PyTorch and R torch.

The public surface; importing it never imports torch (the frontends run in worker processes).
"""

from __future__ import annotations

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
from harness.judge.pairs import compare_cells, compare_result
from harness.judge.reference import Reference, run_reference
from harness.judge.tolerances import DEFAULT_JUDGING, JUDGING_POLICIES, Tolerance, tolerance_for
from harness.model.result import CellResult, MatrixResult, Status
from harness.model.verdicts import PairVerdict
from harness.run.runner import MatrixRunner
from harness.store.claims import ResultClaim
from harness.store.result_file import load_result, save_result
from harness.views.report import write_report
from harness.workload.fixtures import FixtureFile, ensure_fixtures
from harness.workload.matrix import Cell, cells_for
from harness.workload.spec import MODES, PRESETS, SCRIPTS, WorkloadSpec

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
