"""FLOPs counted from the spec agree with torch's own FLOP counter; efficiency reads the median loop and the peak."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from harness.efficiency import cell_efficiency, gemm_dtype, step_flops, workload_flops
from harness.spec import WorkloadSpec


@pytest.mark.parametrize("overrides", [{}, {"num_layers": 1}, {"num_layers": 4, "out_size": 24, "batch_size": 16}])
def test_step_flops_match_torch_flop_counter(overrides: dict[str, int]) -> None:
    """One training step of the recipe's MLP, counted by torch.utils.flop_counter, equals the spec's count."""
    spec = WorkloadSpec.from_preset("tiny", **overrides)
    layers: list[torch.nn.Module] = []
    for k, (out_features, in_features) in enumerate(spec.layer_shapes):
        layers.append(torch.nn.Linear(in_features, out_features))
        if k < spec.num_layers - 1:
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers)
    data, target = torch.randn(spec.batch_size, spec.in_size), torch.randn(spec.batch_size, spec.out_size)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.mse_loss(net(data), target).backward()
    assert step_flops(spec) == counter.get_total_flops()
    assert workload_flops(spec) == step_flops(spec) * spec.steps


def test_cell_efficiency_uses_the_median_loop_and_the_dtype_peak() -> None:
    """TFLOP/s = FLOPs ÷ median timed loop; the share divides by the peak of the mode's GEMM dtype."""
    spec = WorkloadSpec.from_preset("tiny")
    cell = {"mode": "autocast", "record": {"seconds_total": 9.0}, "timing": {"loop": {"median": 0.001}}}
    peaks = {"bfloat16": {"tflops": 0.5}, "float32": {"tflops": 0.1}}
    e = cell_efficiency(cell, spec, peaks)
    assert e is not None and e["seconds"] == 0.001 and e["gemm_dtype"] == "bfloat16"
    assert e["tflops"] == pytest.approx(workload_flops(spec) / 0.001 / 1e12)
    assert e["share_of_peak"] == pytest.approx(e["tflops"] / 0.5)
    untimed = cell_efficiency({"mode": "default", "record": {"seconds_total": 2.0}, "timing": None}, spec, {})
    assert untimed is not None and untimed["seconds"] == 2.0 and untimed["peak_tflops"] is None and untimed["share_of_peak"] is None
    assert cell_efficiency({"mode": "default", "record": None}, spec, peaks) is None
    assert gemm_dtype("default", spec) == "float32" and gemm_dtype("autocast_scaler", spec.replace(amp_dtype="float16")) == "float16"
