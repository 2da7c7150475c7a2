"""The matmul peak on this machine's CPU: real measurements, checked for shape and sanity, not speed."""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from harness.frontends import matmul_peak
from harness.frontends.matmul_peak import CPU_PLAN, measure_matmul_peak


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


@pytest.mark.parametrize(
    ("device", "dtype", "threads", "match"),
    [
        ("cpu", "float64", 1, r"dtype must be one of 'float32', 'float16', 'bfloat16', but got 'float64'"),
        ("tpu", "float32", 1, r"device must be one of 'cpu', 'cuda', but got 'tpu'"),
        ("cpu", "float32", 0, r"threads must be at least 1"),
    ],
)
def test_unknown_values_are_refused(device: str, dtype: str, threads: int, match: str) -> None:
    before = torch.get_num_threads()
    with pytest.raises(ValueError, match=match):
        measure_matmul_peak(device, dtype, threads)
    assert torch.get_num_threads() == before


def test_the_parent_can_import_it_without_torch() -> None:
    tree = ast.parse(Path(matmul_peak.__file__).read_text(encoding="utf-8"))
    names = [a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert not [name for name in names if name.split(".")[0] == "torch"]
