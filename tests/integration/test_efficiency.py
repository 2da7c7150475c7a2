"""Efficiency of a real fp16 cell: the real script run in this process, against the matmul peak measured here.

FLOP counts and the efficiency arithmetic on saved data are in ``tests/unit/model/test_efficiency.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from harness.model.cell_efficiency import cell_efficiency
from harness.model.record import RunRecord
from harness.model.result import CellResult, Peaks, Status
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec


def _peaks(by_dtype: dict[str, Any]) -> Peaks:
    return Peaks("cpu", 1, by_dtype, None)


@pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN")  # torch's note when oneDNN flags are set
def test_fp16_cell_on_the_fallback_gemm_stays_within_its_measured_peak(tmp_path: Path) -> None:
    """The 153 % case: float16 on CPU without oneDNN's half kernels (here forced off) runs PyTorch's fallback GEMM,
    whose speed depends on the operand layout; the peak over a Linear step's layouts bounds a real fp16 cell."""
    from harness.run.prepare import prepare_run_spec
    from harness.worker_side.matmul_peak import measure_matmul_peak
    from py_scripts import with_autocast

    spec = WorkloadSpec.from_preset("tiny", amp_dtype="float16", num_batches=4, epochs=1)
    run_spec = prepare_run_spec(spec, "with_autocast", "sgd", tmp_path / "w.safetensors")
    before = torch.get_num_threads()
    with torch.backends.mkldnn.flags(enabled=False):
        peak = measure_matmul_peak("cpu", "float16", threads=1)
        record = with_autocast.run_workload(run_spec, "autocast")
    torch.set_num_threads(before)
    assert peak["layouts_tflops"]["NT"] > peak["layouts_tflops"]["NN"]  # the layout a lone `a @ b` peak missed
    cell = CellResult(Cell("python", "with_autocast", "autocast", "sgd", "cpu"), Status.OK, record=RunRecord.from_json(record))
    e = cell_efficiency(cell, spec, _peaks({"float16": peak}))
    assert e is not None and e.share_note is None and e.share_of_peak is not None
    assert 0 < e.share_of_peak <= 1
