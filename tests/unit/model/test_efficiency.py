"""FLOPs counted from the spec agree with torch's own FLOP counter; efficiency reads the median loop and the peak.

A real fp16 cell against a measured peak is in ``tests/integration/test_efficiency.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from harness.contract.modes import mode_of
from harness.files.paths import REPO_ROOT
from harness.model.cell_efficiency import cell_efficiency
from harness.model.efficiency import gemm_dtype, step_flops, workload_flops
from harness.model.result import CellResult, Peaks, Status
from harness.store.result_file import load_result
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec

#: A real result (schema 3, both frontends) committed with its weights: the golden test data.
COMMITTED_TINY = REPO_ROOT / "tests" / "data" / "golden.json"


@pytest.mark.parametrize("overrides", [{}, {"num_layers": 1}, {"num_layers": 4, "out_size": 24, "batch_size": 16}])
def test_step_flops_match_torch_flop_counter(overrides: dict[str, int]) -> None:
    """One training step of the recipe's MLP, counted by torch.utils.flop_counter, equals the spec's count."""
    spec = WorkloadSpec.from_preset("tiny", **overrides)
    layers: list[torch.nn.Module] = []
    for k, (out_features, in_features) in enumerate(p.shape for p in spec.parameters if p.name.endswith(".weight")):
        layers.append(torch.nn.Linear(in_features, out_features))
        if k < spec.num_layers - 1:
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers)
    data, target = torch.randn(spec.batch_size, spec.in_size), torch.randn(spec.batch_size, spec.out_size)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.mse_loss(net(data), target).backward()
    assert step_flops(spec) == counter.get_total_flops()
    assert workload_flops(spec) == step_flops(spec) * spec.steps


def _cell(mode: str, seconds_total: float, loop_median: float | None) -> CellResult:
    """A real cell of the committed tiny result, in ``mode``, with its record's loop seconds and its timed median set."""
    cell = next(c for c in load_result(COMMITTED_TINY).cells if c.mode == mode and c.record is not None)
    assert cell.record is not None and cell.timing is not None
    loop = dataclasses.replace(cell.timing.loop, median=loop_median)
    timing = None if loop_median is None else dataclasses.replace(cell.timing, loop=loop)
    return dataclasses.replace(cell, record=dataclasses.replace(cell.record, seconds_total=seconds_total), timing=timing)


def _peaks(by_dtype: dict[str, Any]) -> Peaks:
    return Peaks("cpu", 1, by_dtype, None)


def test_cell_efficiency_uses_the_median_loop_and_the_dtype_peak() -> None:
    """TFLOP/s = FLOPs ÷ median timed loop; the share divides by the peak of the mode's GEMM dtype."""
    spec = WorkloadSpec.from_preset("tiny")
    peaks = _peaks({"bfloat16": {"tflops": 0.5}, "float32": {"tflops": 0.1}})
    e = cell_efficiency(_cell("autocast", 9.0, 0.001), spec, peaks)
    assert e is not None and e.seconds == 0.001 and e.gemm_dtype == "bfloat16"
    assert e.tflops == pytest.approx(workload_flops(spec) / 0.001 / 1e12)
    assert e.share_of_peak == pytest.approx(e.tflops / 0.5)
    untimed = cell_efficiency(_cell("default", 2.0, None), spec, _peaks({}))
    assert untimed is not None and untimed.seconds == 2.0 and untimed.peak_tflops is None and untimed.share_of_peak is None
    not_run = CellResult(Cell("r", "with_autocast", "default", "sgd", "cpu"), Status.SKIPPED, "no R")
    assert cell_efficiency(not_run, spec, peaks) is None
    assert gemm_dtype(mode_of("with_autocast", "default"), spec) == "float32"
    assert gemm_dtype(mode_of("cuda_amp_grad_scaler", "autocast_scaler"), spec.replace(amp_dtype="float16")) == "float16"
    # the low-precision-weights modes run their GEMMs in the AMP dtype too (weights and inputs are in it)
    lowp = [gemm_dtype(mode_of("with_autocast", name), spec) for name in ("lowp_weights", "lowp_weights_scaled")]
    assert lowp == ["bfloat16", "bfloat16"]


def test_a_share_above_the_peak_is_not_given_and_says_why() -> None:
    """A cell faster than its measured peak gets no share (never 153 %), and share_note names both rates."""
    spec = WorkloadSpec.from_preset("tiny", amp_dtype="float16")
    cell = _cell("autocast", 9.0, 0.01)
    tflops = workload_flops(spec) / 0.01 / 1e12
    e = cell_efficiency(cell, spec, _peaks({"float16": {"tflops": tflops / 1.53, "n": 256}}))
    assert e is not None and e.share_of_peak is None and e.tflops == pytest.approx(tflops)
    assert e.share_note is not None and e.share_note.startswith(
        f"no share of peak: the cell reached {tflops:.3g} TFLOP/s, 153% of the {tflops / 1.53:.3g} TFLOP/s measured "
        "for float16 square 256³ matmuls"
    )
    within = cell_efficiency(cell, spec, _peaks({"float16": {"tflops": tflops / 0.5, "n": 256}}))
    assert within is not None and within.share_of_peak == pytest.approx(0.5) and within.share_note is None
