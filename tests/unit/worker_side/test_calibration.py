"""The noise-floor loop in the Python worker's handler, with real torch: what it answers, what it leaves as it was, what it
refuses. The R worker's twin is tested in ``tests/integration/test_r_worker.py`` (a worker is a process)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness.worker_side.python_handler import PythonHandler


def _request(**changes: Any) -> dict[str, Any]:
    return {"kind": "calibrate", "device": "cpu", "dtype": "float32", "threads": 1, "iterations": 3} | changes


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_python_handler_times_the_calibration_loop(dtype: str) -> None:
    """A calibrate request gets the loop's seconds and its product count, and leaves the threads and the global RNG as they were."""
    handler = PythonHandler()
    threads, rng = torch.get_num_threads(), torch.random.get_rng_state()
    reply = handler(_request(dtype=dtype, threads=max(1, threads - 1) if threads > 1 else 2))
    assert set(reply) == {"seconds", "iterations"} and reply["iterations"] == 3
    assert isinstance(reply["seconds"], float) and 0 < reply["seconds"] < 10
    assert torch.get_num_threads() == threads and torch.equal(torch.random.get_rng_state(), rng)


def test_more_products_take_longer() -> None:
    """The loop runs ``iterations`` products: 300 take longer than 3 (a loop that ignored the count would not)."""
    handler = PythonHandler()
    handler(_request())  # the first call pays the kernel selection
    assert handler(_request(iterations=300))["seconds"] > 10 * handler(_request(iterations=3))["seconds"]


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"dtype": "float64"}, r"dtype must be one of 'float32', 'float16', 'bfloat16', but got 'float64'\."),
        ({"device": "tpu"}, r"device must be one of 'cpu', 'cuda', but got 'tpu'\."),
        ({"threads": 0}, r"threads must be a whole number of at least 1, but got 0\."),
        ({"iterations": 0}, r"iterations must be a whole number of at least 1, but got 0\."),
        ({"iterations": True}, r"iterations must be a whole number of at least 1, but got True\."),
    ],
)
def test_a_calibration_request_the_loop_would_misread_is_refused(changes: dict[str, Any], match: str) -> None:
    """An unknown device or dtype, or a count below one, is refused in one line naming it."""
    with pytest.raises(ValueError, match=match):
        PythonHandler()(_request(**changes))
