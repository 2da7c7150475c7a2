"""The matmul peak's refusals, and its module the parent imports without torch.

Real measurements are in ``tests/integration/test_matmul_peak.py``.
"""

from __future__ import annotations

import pytest
import torch

from harness.worker_side.matmul_peak import measure_matmul_peak


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


