"""A cell's stored trace: written and read back exactly, and refused when it is not the one its result recorded."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.errors import ResultError
from harness.model.cell_trace import DIGEST_HEX, CellTrace, TraceFile

POINTS = [
    [0, "batch.data", "float32", [32, 128], "ab" * 32, None],
    [0, "loss", "float32", [], "cd" * 32, 1.0187934637069702],
    [0, "optim.step.layer0.weight", "int64", [], "ef" * 32, 1.0],
    [1, "clip.coef", "float32", [1], "01" * 32, 0.8527587652206421],
]


def test_a_trace_reads_back_as_it_was_written(tmp_path: Path) -> None:
    """Every point (step, name, dtype, shape, 128-bit digest, value), the switches and a kept tensor survive the file."""
    kept = {"1:clip.coef": {"dtype": "float32", "shape": [1], "data": b"\x01\x02\x03\x04"}}
    trace = CellTrace.from_points(POINTS, ("r-clip-coef-reciprocal",), kept)
    stored = trace.write(tmp_path / "c.trace.safetensors")
    assert stored.points == 4 and stored.switches == ("r-clip-coef-reciprocal",)
    again = CellTrace.read(stored)
    assert again == trace
    assert again.points[0][4] == "ab" * (DIGEST_HEX // 2) and again.points[1][5] == 1.0187934637069702
    assert again.points[3][3] == (1,) and again.kept["1:clip.coef"]["data"] == b"\x01\x02\x03\x04"


def test_a_replaced_trace_file_is_refused(tmp_path: Path) -> None:
    """A trace file that is not the one the result recorded (another SHA-256) is refused, naming the file."""
    stored = CellTrace.from_points(POINTS).write(tmp_path / "a.trace.safetensors")
    CellTrace.from_points(POINTS[:2]).write(tmp_path / "a.trace.safetensors")  # replaced after the run
    with pytest.raises(ResultError, match="a.trace.safetensors is not the one its result recorded"):
        CellTrace.read(stored)


def test_a_trace_whose_count_the_result_contradicts_is_refused(tmp_path: Path) -> None:
    """A result that says a trace holds other than its points (edited by hand) is refused as malformed."""
    stored = CellTrace.from_points(POINTS).write(tmp_path / "b.trace.safetensors")
    with pytest.raises(ResultError, match="holds 4 points, its result says 9"):
        CellTrace.read(dataclasses.replace(stored, points=9))


def test_a_missing_trace_file_is_one_line(tmp_path: Path) -> None:
    """A trace file that is gone is named, with what to do."""
    with pytest.raises(ResultError, match="cannot read the cell trace .*gone.trace.safetensors"):
        CellTrace.read(TraceFile(str(tmp_path / "gone.trace.safetensors"), "0" * 64, 1))
