"""Both workers run backward on the run's threads: R torch's autograd threads keep the count they first ran with.

docs/determinism.md has the evidence. A worker sets the run's threads as it starts, before its first backward (the first
step its describe call pays), and reports what :mod:`harness.worker_side.thread_probe` measures; the runner stores it
with each cell (``installation.backward_threads``), and the run warns where it is not the spec's. The count asked for
here is one above the cores this process may use: libtorch's default (what a pool thread takes when nothing was set
before it first ran a parallel op) is at most the cores, so a default taken anywhere shows.
"""

from __future__ import annotations

import pytest

from harness.run.availability import Availability
from harness.run.frontends import open_worker
from harness.run.pool import worker_env
from harness.workload.spec import available_cores
from tests.support import require_r_torch


@pytest.mark.parametrize("language", ["python", "r"])
def test_a_worker_runs_backward_on_the_runs_threads(language: str, availability: Availability) -> None:
    """The describe call with ``threads`` gives the thread counts, and every backward pass ran on that many."""
    if language == "r":
        require_r_torch(availability)
    threads = available_cores() + 1
    worker = open_worker(language, worker_env(threads))
    try:
        facts = worker.call({"kind": "describe", "device": "cpu", "threads": threads}, timeout=180)
    finally:
        worker.close()
    assert facts["intra_op_threads"] == threads
    assert facts["backward_threads"] == [threads], facts
    assert isinstance(facts["interop_threads"], int)


def test_the_r_probe_sees_a_pool_thread_that_kept_an_older_count(availability: Availability) -> None:
    """The probe can fail: a count set after R torch's first backward does not reach the pool thread that ran it."""
    require_r_torch(availability)
    worker = open_worker("r", worker_env(1))
    try:
        facts = worker.call({"kind": "describe", "device": "cpu", "threads": 1}, timeout=180)
        assert facts["backward_threads"] == [1]
        worker.call({"kind": "describe", "device": "cpu", "threads": 2}, timeout=180)
        again = worker.call({"kind": "describe", "device": "cpu", "threads": 2}, timeout=180)
    finally:
        worker.close()
    assert 1 in again["backward_threads"], again
