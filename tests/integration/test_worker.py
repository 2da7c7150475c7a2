"""The generic worker: lives across calls, and turns errors, crashes and hangs into harness errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.errors import ScriptError, WorkerCannotStart, WorkerCrashed, WorkerError, WorkerTimeout
from harness.run.frontends import open_worker
from harness.run.worker import Worker


@pytest.fixture
def worker() -> Iterator[Worker]:
    """A worker running the misbehaving test handler."""
    w = Worker("python", "tests.worker_handlers:CrashHandler")
    yield w
    w.close()


def test_worker_lives_across_calls(worker: Worker) -> None:
    """Repeated calls go to the same process."""
    assert worker.call({"value": 1}, timeout=30) == {"echo": 1, "torch_loaded": False}
    pid = worker.pid
    assert worker.call({"value": [1, 2]}, timeout=30)["echo"] == [1, 2]
    assert worker.pid == pid and worker.starts == 1


def test_handler_error_keeps_the_message_and_the_worker(worker: Worker) -> None:
    """A Python exception in the script becomes a ScriptError with its message; the process survives."""
    worker.start()
    pid = worker.pid
    with pytest.raises(ScriptError, match="ValueError: deliberate failure in CrashHandler"):
        worker.call({"fail": True, "script": "with_autocast", "mode": "default"}, timeout=30)
    assert worker.pid == pid


def test_crash_is_reported_with_the_signal_and_the_worker_restarts(worker: Worker) -> None:
    """A segfault in the worker raises WorkerCrashed naming SIGSEGV; the next call starts a new process."""
    with pytest.raises(WorkerCrashed, match="killed by signal SIGSEGV"):
        worker.call({"crash": True}, timeout=30)
    assert worker.call({"value": 2}, timeout=30)["echo"] == 2
    assert worker.starts == 2


def test_hang_is_stopped_at_the_timeout(worker: Worker) -> None:
    """A call that does not answer in time raises WorkerTimeout and the process is killed."""
    worker.start()
    pid = worker.pid
    with pytest.raises(WorkerTimeout, match="within 1 s"):
        worker.call({"hang": True}, timeout=1)
    assert worker.pid is None and pid is not None


def test_a_handler_that_cannot_start_is_a_clear_error() -> None:
    """A frontend that fails to import reports why, as a WorkerError (not a crash)."""
    w = Worker("imaginary", "tests.worker_handlers:BrokenStartHandler")
    with pytest.raises(WorkerError, match="could not start: ImportError: no module named 'imaginary_frontend'"):
        w.start()
    assert not w.alive


def test_a_worker_whose_start_fails_twice_the_same_way_is_not_started_again() -> None:
    """After two starts fail with one error, a call fails at once with that error's message (no third process)."""
    w = Worker("imaginary", "tests.worker_handlers:BrokenStartHandler")
    for _ in range(2):
        with pytest.raises(WorkerError, match="could not start: ImportError") as failed:
            w.start()
        assert not isinstance(failed.value, WorkerCannotStart)
    with pytest.raises(WorkerCannotStart) as refused:
        w.call({"value": 1}, timeout=30)
    assert str(refused.value) == str(failed.value) and w.starts == 2 and w.cannot_start == str(failed.value)


def test_python_worker_loads_torch_in_its_own_process() -> None:
    """The Python frontend's worker has libtorch mapped; the test process's detection therefore works."""
    w = open_worker("python")
    try:
        w.start()
        with open(f"/proc/{w.pid}/maps") as handle:
            assert "libtorch" in handle.read()
    finally:
        w.close()


def test_peak_memory_is_measured_per_call(worker: Worker) -> None:
    """A call that touches 200 MiB peaks that much above its start; the next, small call does not inherit that peak."""
    worker.call({"value": 0}, timeout=30)
    worker.call({"allocate_mib": 200}, timeout=30)
    big = worker.last_memory
    assert big is not None and big["scope"] == "call"
    assert big["peak_rss_bytes"] - big["rss_before_bytes"] >= 190 * 2**20
    worker.call({"value": 1}, timeout=30)
    small = worker.last_memory
    assert small is not None and small["peak_rss_bytes"] - small["rss_before_bytes"] < 20 * 2**20
    assert small["peak_rss_bytes"] < big["peak_rss_bytes"] - 150 * 2**20


def test_worker_env_reaches_the_process_and_start_up_is_timed() -> None:
    """``env`` (the thread count, in the runner) is set before the handler is imported; start-up seconds are kept."""
    w = Worker("python", "tests.worker_handlers:EnvHandler", {"OMP_NUM_THREADS": "3"})
    try:
        assert w.call({"name": "OMP_NUM_THREADS"}, timeout=30) == "3"
        assert w.startup_seconds is not None and w.startup_seconds > 0
    finally:
        w.close()


_PARENT_KILLED_MID_CALL = """
import os, signal, threading, time
from harness.run.worker import Worker
worker = Worker("python", "tests.worker_handlers:CrashHandler")
worker.start()
threading.Thread(target=worker.call, args=({"sleep_s": 2, "value": 1}, 60), daemon=True).start()
time.sleep(0.5)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_worker_whose_parent_is_killed_mid_call_exits_quietly() -> None:
    """The orphaned worker finds its parent gone when it answers and exits without a BrokenPipe traceback."""
    import signal
    import subprocess
    import sys

    from harness.files.paths import REPO_ROOT

    # capture_output reads to EOF: it returns once the orphan, which shares stderr, has exited too
    done = subprocess.run([sys.executable, "-c", _PARENT_KILLED_MID_CALL], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
