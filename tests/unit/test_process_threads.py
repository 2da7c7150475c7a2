"""A process that runs tests runs torch and NumPy's BLAS on :data:`tests.support.TEST_PROCESS_THREADS` threads.

The suite's processes share the cores (two xdist workers and the workers their tests start): on 2 threads, float64 unit
cases waited at their ops' barriers for a core another process held (1.3-2.7 s each, 0.03-0.14 s alone; docs/development.md).
"""

from __future__ import annotations

import torch
from threadpoolctl import threadpool_info

from tests.support import TEST_PROCESS_THREADS


def test_torch_and_numpys_blas_run_on_the_test_process_threads() -> None:
    """Set once when the session starts (tests/conftest.py's ``pytest_sessionstart``), in every process that runs tests."""
    assert torch.get_num_threads() == TEST_PROCESS_THREADS
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas and all(pool["num_threads"] == TEST_PROCESS_THREADS for pool in blas), blas
