"""The matmul peak measured on this machine's CPU: real measurements, checked for shape and sanity, not speed.

Its refusals and its import (no torch in the parent) are in ``tests/unit/worker_side/test_matmul_peak.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import pytest
import torch

from harness.worker_side.matmul_peak import CPU_PLAN, measure_matmul_peak


@pytest.fixture
def two_threads() -> Iterator[None]:
    """A thread count the measurement (at 1 thread) must give back."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.usefixtures("two_threads")
def test_cpu_peak_is_a_sane_measurement(dtype: str) -> None:
    peak = measure_matmul_peak("cpu", dtype, threads=1)
    assert torch.get_num_threads() == 2
    assert (peak["device"], peak["dtype"], peak["threads"]) == ("cpu", dtype, 1)
    assert peak["n"] == CPU_PLAN.n
    assert peak["flops_per_matmul"] == 2 * peak["n"] ** 3
    assert len(peak["samples_tflops"]) == CPU_PLAN.repeats
    assert all(math.isfinite(t) and t > 0 for t in peak["samples_tflops"])
    assert math.isfinite(peak["tflops"]) and peak["tflops"] > 0
    assert peak["tflops"] == max(peak["samples_tflops"]) == max(peak["layouts_tflops"].values())
    assert list(peak["layouts_tflops"]) == ["NT", "NN", "TN"] and peak["layouts_tflops"][peak["layout"]] == peak["tflops"]
    assert peak["tflops"] >= peak["tflops_median"] > 0
    assert peak["seconds"] > 0
    assert json.loads(json.dumps(peak)) == peak  # plain data
