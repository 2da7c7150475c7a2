"""The noise-floor loop in the Python worker's handler, with real torch: what it answers, what it leaves as it was, what it
refuses. The R worker's twin is tested in ``tests/integration/test_r_worker.py`` (a worker is a process)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness.worker_side.python_handler import PythonHandler

#: A small MLP's shapes (the loop is a bare training step of the cell's MLP), so the tests stay fast.
SHAPES = {"batch_size": 8, "in_size": 16, "out_size": 4, "num_layers": 3}


def _request(**changes: Any) -> dict[str, Any]:
    return {"kind": "calibrate", "device": "cpu", "dtype": "float32", "threads": 1, "iterations": 3, **SHAPES} | changes


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_python_handler_times_the_calibration_loop(dtype: str) -> None:
    """A calibrate request gets the loop's seconds and its step count, and leaves the threads and the global RNG as they were."""
    handler = PythonHandler()
    threads, rng = torch.get_num_threads(), torch.random.get_rng_state()
    reply = handler(_request(dtype=dtype, threads=max(1, threads - 1) if threads > 1 else 2))
    assert set(reply) == {"seconds", "iterations"} and reply["iterations"] == 3
    assert isinstance(reply["seconds"], float) and 0 < reply["seconds"] < 10
    assert torch.get_num_threads() == threads and torch.equal(torch.random.get_rng_state(), rng)


def test_more_steps_take_longer() -> None:
    """The loop runs ``iterations`` steps: 300 take longer than 3 (a loop that ignored the count would not)."""
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
        ({"num_layers": 0}, r"num_layers must be a whole number of at least 1, but got 0\."),
        ({"batch_size": None}, r"batch_size must be a whole number of at least 1, but got None\."),
    ],
)
def test_a_calibration_request_the_loop_would_misread_is_refused(changes: dict[str, Any], match: str) -> None:
    """An unknown device or dtype, or a count or shape below one or missing, is refused in one line naming it."""
    with pytest.raises(ValueError, match=match):
        PythonHandler()(_request(**changes))


def test_the_loop_is_a_training_step_of_the_shapes_asked_for() -> None:
    """Wider layers take longer (a loop that ignored the shapes would not), and the step trains: its backward and update run
    (a loop of products or of forwards alone would not call autograd's backward)."""
    handler = PythonHandler()
    handler(_request())
    small = min(handler(_request(iterations=20))["seconds"] for _ in range(3))
    wide = min(handler(_request(iterations=20, in_size=256, batch_size=64))["seconds"] for _ in range(3))
    assert wide > 3 * small
    backward = torch.Tensor.backward
    calls: list[int] = []

    def counted(self: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        backward(self, *args, **kwargs)

    torch.Tensor.backward = counted  # type: ignore[method-assign]
    try:
        handler(_request(iterations=4))
    finally:
        torch.Tensor.backward = backward  # type: ignore[method-assign]
    assert len(calls) == 5  # the untimed first step and the four timed
