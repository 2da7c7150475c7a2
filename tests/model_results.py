"""Typed results for the tests of the result's storage: the committed real results, read into the model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.files.paths import REPO_ROOT
from harness.model.result import MatrixResult
from harness.store.result_file import load_result

__all__ = ["COMMITTED", "committed", "with_weights"]

#: The golden real result (schema 3: both frontends, all modes, with its weights) under tests/data/: test data
#: that stays put, unlike the measurements under docs/results/, which are re-measured in the current schema.
COMMITTED = REPO_ROOT / "tests" / "data"


def committed(name: str = "golden") -> MatrixResult:
    """The committed result ``name`` (upgraded to this schema on load)."""
    return load_result(COMMITTED / f"{name}.json")


def with_weights(result: MatrixResult, paths: list[Path | None]) -> MatrixResult:
    """``result`` cut to ``len(paths)`` cells: for a path, its next cell with a record, pointed at that path; for
    ``None``, its next cell that has none (an R scaler cell on CPU is ``unsupported``)."""
    ran = iter(c for c in result.cells if c.record is not None)
    not_run = iter(c for c in result.cells if c.record is None)
    cells = []
    for path in paths:
        if path is None:
            cells.append(next(not_run))
        else:
            cell = next(ran)
            assert cell.record is not None
            cells.append(dataclasses.replace(cell, record=dataclasses.replace(cell.record, weights_path=str(path))))
    return dataclasses.replace(result, cells=tuple(cells))
