"""A resumed cell against its uninterrupted cell (harness/judge/resumed.py): bitwise the same run passes; a loss, a
scale or a final-weights tensor that differs ends the resumed cell in error, naming where."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from harness.judge.resumed import check_resumed
from harness.model.record import RunRecord
from harness.model.result import CellResult, Status
from harness.workload.matrix import Cell


def _cell(tmp_path: Path, feature: str, losses: list[float], weight: float, **record: Any) -> CellResult:
    path = tmp_path / f"{feature}.safetensors"
    save_file({"layer0.weight": np.full((2, 2), weight, dtype=np.float32)}, str(path))
    cell = Cell("r", "cuda_amp_grad_scaler", "default", "adagrad", "cpu", feature)
    fields = {f.name: None for f in dataclasses.fields(RunRecord)} | {"losses": tuple(losses), "weights_path": str(path)} | record
    return CellResult(cell, Status.OK, record=RunRecord(**fields))


def test_a_resumed_cell_is_its_uninterrupted_cell_or_an_error_naming_where_it_parts(tmp_path: Path) -> None:
    plain = _cell(tmp_path, "none", [1.0, 0.5, 0.25], 1.0)
    same = check_resumed([plain, _cell(tmp_path, "resume", [1.0, 0.5, 0.25], 1.0)])
    assert [c.status for c in same] == [Status.OK, Status.OK]
    loss = check_resumed([plain, _cell(tmp_path, "resume", [1.0, 0.5, 0.2500001], 1.0)])[1]
    assert loss.status is Status.ERROR and loss.reason is not None and "loss differs from step 2" in loss.reason
    weights = check_resumed([plain, _cell(tmp_path, "resume", [1.0, 0.5, 0.25], -1.0)])[1]
    assert weights.status is Status.ERROR and weights.reason is not None and "layer0.weight" in weights.reason
    alone = check_resumed([_cell(tmp_path, "resume", [9.0], 3.0)])  # no uninterrupted cell ran: nothing to compare
    assert alone[0].status is Status.OK


def test_a_resumed_cell_from_another_machine_is_not_held_to_bitwise(tmp_path: Path) -> None:
    """Two slices merged from two machines under one frontend name ran other kernels (their installation facts say so): the
    resumed cell is not held to the other's bits; on one machine's build and CPU it is."""
    plain = dataclasses.replace(_cell(tmp_path, "none", [1.0, 0.5, 0.25], 1.0), installation={"name": "r", "cpu": "Xeon"})
    resumed = _cell(tmp_path, "resume", [1.0, 0.5, 0.2500001], 1.0)
    assert check_resumed([plain, dataclasses.replace(resumed, installation={"name": "r", "cpu": "EPYC"})])[1].status is Status.OK
    assert check_resumed([plain, dataclasses.replace(resumed, installation={"name": "r", "cpu": "Xeon"})])[1].status is Status.ERROR
