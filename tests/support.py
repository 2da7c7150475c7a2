"""Helpers the tests import: the CPU matrix, the R-torch skip rule and the golden result.

Kept apart from ``conftest.py``, which holds only pytest fixtures and hooks: a test module imports
plain functions and constants from here, never from a conftest (pytest loads conftests itself, and
importing one a second time as a module gives two copies of its state).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from harness.availability import Availability, r_required
from harness.matrix import Cell, cells_for
from harness.model import MatrixResult
from harness.spec import MODES

__all__ = ["CELLS", "FRONTENDS", "GOLDEN_RESULT", "PAIRS", "golden_result", "require_frontend", "require_r_torch"]

FRONTENDS = ("python", "r")
CELLS = cells_for(FRONTENDS, MODES, "cpu")
PAIRS = sorted({cell.pair for cell in CELLS}, key=[c.pair for c in CELLS].index)

#: A small real result of both frontends, all four modes, with its weights beside it (``golden.weights/``),
#: written by ``python -m harness run``: ``tests/data/README.md`` says how to regenerate it.
GOLDEN_RESULT = Path(__file__).resolve().parent / "data" / "golden.json"


def golden_result() -> MatrixResult:
    """The golden result as ``load_result`` reads it (weights paths absolute); immutable, so one copy serves every test."""
    return _golden_loaded()


@functools.cache
def _golden_loaded() -> MatrixResult:
    """Read once per process."""
    from harness.results import load_result

    return load_result(GOLDEN_RESULT)


def require_r_torch(availability: Availability) -> None:
    """Skip with the one-line reason when R torch cannot run; fail instead under AMP_PARITY_REQUIRE_R=1."""
    reason = availability.r_reason
    if reason is None:
        return
    if r_required():
        pytest.fail(f"AMP_PARITY_REQUIRE_R=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def require_frontend(cell: Cell, availability: Availability) -> None:
    """``require_r_torch`` for R cells; Python cells always run."""
    if cell.frontend == "r":
        require_r_torch(availability)
