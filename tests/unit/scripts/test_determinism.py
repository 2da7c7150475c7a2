"""CUDA cells run PyTorch's deterministic algorithms (docs/determinism.md, "CUDA: the models' backward kernels"): the conv
net's bilinear backward is atomic adds without them, and no two of its CUDA runs agreed bitwise (the H200 run,
docs/results/h200-python-cuda-models/)."""

from __future__ import annotations

import torch

from harness.run.pool import DETERMINISM_ENV, worker_env
from py_scripts.loop import set_determinism


def test_cuda_cells_run_pytorchs_deterministic_algorithms_and_cpu_cells_do_not() -> None:
    """On CUDA: on, warning (never raising) where an operation has no deterministic implementation; on the CPU: off, the
    kernels users run (a worker that ran a CUDA cell before turns it off again)."""
    try:
        set_determinism("cuda")
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
        set_determinism("cpu")
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


def test_every_worker_gets_the_cublas_workspace_the_deterministic_algorithms_ask_for() -> None:
    """``CUBLAS_WORKSPACE_CONFIG`` in each worker's environment from its start (cuBLAS reads it when it makes its handle),
    unless the user set their own."""
    assert DETERMINISM_ENV == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    assert worker_env(1, {})["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert "CUBLAS_WORKSPACE_CONFIG" not in worker_env(1, {"CUBLAS_WORKSPACE_CONFIG": ":16:8"})
