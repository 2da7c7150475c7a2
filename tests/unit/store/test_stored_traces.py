"""Stored traces are checked, not believed: a pair trace in a result must be the one its cells' trace files give, and each
distance it shows must be the distance of the two values it names (issue 26: ``max_distance: -5`` read "-5 ULP" and
matched an entry)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from harness.errors import ResultError
from harness.judge.divergence import trace_cells
from harness.model.cell_trace import CellTrace
from harness.model.pair_trace import PairTrace, PointDifference
from harness.model.result import MatrixResult
from harness.store.consistency import check_consistency
from tests.twins import golden

#: One step of a trace: [step, name, dtype, shape, digest, value]; a one-element point keeps its value.
_LOSS = float(np.float32(1.0275248))
_NEXT = float(np.nextafter(np.float32(_LOSS), np.float32(2)))


def _points(loss: float) -> list[list[object]]:
    digest = f"{np.float32(loss).view(np.uint32):032x}"  # stands in for the bytes' digest: one per value
    return [[0, "batch.data", "float32", [32, 128], "a" * 32, None], [0, "loss", "float32", [], digest, loss],
            [0, "param.stepped.layer0.weight", "float32", [128, 128], "b" * 32, None]]


@pytest.fixture
def traced(tmp_path: Path) -> MatrixResult:
    """The golden default pair with trace files: python's and r's losses 1 ULP apart at step 0 (a real first difference)."""
    result = golden()
    cells = []
    for cell in result.cells:
        if cell.script == "with_autocast" and cell.mode == "default":
            loss = _LOSS if cell.frontend == "python" else _NEXT
            trace = CellTrace.from_reply({"points": _points(loss), "digest": "blake3"})
            cell = dataclasses.replace(cell, trace=trace.write(tmp_path / f"{cell.id}.trace.safetensors"))
        cells.append(cell)
    return dataclasses.replace(result, cells=tuple(cells), traces=())


def _stored(first: PointDifference, detail: PointDifference | None = None) -> PairTrace:
    return PairTrace("with_autocast-default-sgd-cpu", ("python", "r"), (3, 3), 1, first, (0, "batch.data"), {}, detail=detail)


def _first(point: str = "loss", distance: int | None = 1, values: tuple[float, float] = (_LOSS, _NEXT)) -> PointDifference:
    return PointDifference(0, point, "bytes", ("float32", "float32"), ((), ()), 1, 1, distance, (), values)


def test_a_stored_trace_its_cells_give_loads(traced: MatrixResult) -> None:
    """The trace the cells' files give, stored with its 1-ULP distance, is accepted."""
    check_consistency(dataclasses.replace(traced, traces=(_stored(_first()),)), "r.json")


@pytest.mark.parametrize(("stored", "refused"), [
    (_stored(_first(distance=-5)), "traces[0].first_difference.max_distance is -5"),
    (_stored(_first(distance=7)), "the distance of its worst values"),
    (_stored(_first(values=(_LOSS, float("nan")))), "traces[0].first_difference.max_distance"),
    (_stored(_first(point="param.stepped.layer0.weight", distance=None)), "its cells' stored traces first part at step 0, loss"),
    (_stored(_first(), detail=_first(point="batch.data")), "traces[0].detail"),
], ids=["negative-distance", "distance-its-values-deny", "nan-worst-value", "another-first-point", "detail-elsewhere"])
def test_a_stored_trace_that_cannot_be_is_refused_naming_the_field(traced: MatrixResult, stored: PairTrace, refused: str) -> None:
    """A hand-edited trace (a distance below zero, or not the one its values give, a first point the cells' traces deny,
    a measurement of another point) is refused on load in one line naming the field."""
    with pytest.raises(ResultError) as error:
        check_consistency(dataclasses.replace(traced, traces=(stored,)), "r.json")
    message = str(error.value)
    assert refused in message and "\n" not in message, message


def test_a_pair_whose_traces_were_hashed_differently_is_untraced_not_identical(tmp_path: Path) -> None:
    """A merge may bring a cell traced before BLAKE3 replaced SHA-256 beside one traced after: the same points, hashed
    differently, are neither identical nor a first difference; the pair is left untraced, with that reason."""
    result = golden()
    a, b = (c for c in result.cells if c.script == "with_autocast" and c.mode == "default")
    old, new = (CellTrace.from_reply({"points": _points(_LOSS), "digest": h}) for h in ("sha256", "blake3"))
    a = dataclasses.replace(a, trace=old.write(tmp_path / "a.trace.safetensors"))
    b = dataclasses.replace(b, trace=new.write(tmp_path / "b.trace.safetensors"))
    trace = trace_cells(a, b)
    assert not trace.identical and trace.first_difference is None
    assert trace.error is not None and "blake3 and sha256" in trace.error
