"""The typed result from whatever a caller still holds during the move to :mod:`harness.model`.

The views and judging (:mod:`harness.compare`, :mod:`harness.figures`, :mod:`harness.report`,
:mod:`harness.table`) work on :class:`~harness.model.MatrixResult` and :class:`~harness.model.CellResult`
only. Until every producer hands them those (the runner still builds the stored form), this is the one
place a stored-form result or cell is read into the model. Schema 3's in-memory form (``speedup_vs_default``,
default ÷ cell) is read as schema 4's ``time_vs_default`` (cell ÷ default). Remove this module, and its
calls at the entry points, once the runner returns a ``MatrixResult``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.model import RESULT_SCHEMA_VERSION, CellResult, MatrixResult

__all__ = ["as_cell", "as_result"]


def as_result(result: MatrixResult | Mapping[str, Any]) -> MatrixResult:
    """``result`` as the model (unchanged when it already is one)."""
    if isinstance(result, MatrixResult):
        return result
    data = dict(result) | {"schema_version": RESULT_SCHEMA_VERSION, "cells": [_cell_json(c) for c in result["cells"]]}
    return MatrixResult.from_json(data)


def as_cell(cell: CellResult | Mapping[str, Any]) -> CellResult:
    """``cell`` as the model (unchanged when it already is one)."""
    return cell if isinstance(cell, CellResult) else CellResult.from_json(_cell_json(cell))


def _cell_json(cell: Mapping[str, Any]) -> dict[str, Any]:
    data = dict(cell)
    if "speedup_vs_default" in data:
        speedup = data.pop("speedup_vs_default")
        data["time_vs_default"] = None if not speedup else 1 / speedup
        data["time_vs_default_note"] = data.pop("speedup_note", None)
    return data
