"""GEMM dtype profiling read as plain data: the judge of a profile, and the profiler module the parent imports without torch.

Profiles of the real scripts at the tiny preset are in ``tests/integration/test_gemm_profile.py``.
"""

from __future__ import annotations

from harness.contract.modes import mode_of
from harness.judge.gemm_precision import amp_gemm_problem


def test_amp_gemm_problem_on_plain_data() -> None:
    mixed = {
        "gemm_seconds": 4.0,
        "seconds_by_dtype": {"float16": 3.0, "float32": 1.0},
        "ops": [
            {"name": "aten::addmm", "dtype": "float16", "count": 3, "seconds": 3.0},
            {"name": "aten::mm", "dtype": "float32", "count": 2, "seconds": 1.0},
        ],
    }
    assert amp_gemm_problem(mode_of("cuda_amp_grad_scaler", "autocast_scaler"), mixed) == (
        "claims AMP (autocast_scaler) but 25.0% of GEMM time ran in float32 (aten::mm ×2)")
    assert amp_gemm_problem(mode_of("with_autocast", "default"), mixed) is None
    clean = {**mixed, "seconds_by_dtype": {"float16": 4.0}, "ops": mixed["ops"][:1]}
    assert amp_gemm_problem(mode_of("with_autocast", "autocast"), clean) is None
    assert amp_gemm_problem(mode_of("with_autocast", "autocast"), {"gemm_seconds": 0.0, "seconds_by_dtype": {}, "ops": []}) is None


