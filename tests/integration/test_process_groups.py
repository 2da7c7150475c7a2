"""A worker, its activation script and a probe are each a process group, ended whole: a timeout, a crash or a close
leaves no process they started running, and ``--timeout`` rules every wait (start, activation, call).

Before: a wrapper interpreter without ``exec`` kept its Python training after the cell timed out (the wrapper alone was
killed), a hanging activation script left its ``sleep``, the activation waited a fixed 300 s and the start 120 s.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from harness.errors import UsageError, WorkerTimeout
from harness.run.frontends import worker_env
from harness.run.worker import Worker
from harness.workload.installations import Installation
from tests.support import harness_command


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (no such process, or a zombie waiting for a reaper that is not us)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def _eventually_gone(pid: int) -> bool:
    """``_gone``, allowing the kernel a moment to deliver the kill (no duration is asserted: at most a few seconds)."""
    for _ in range(200):
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


def _wrapper(tmp_path: Path, before: str = "") -> Path:
    """An interpreter wrapper that does not ``exec``: the worker's process is ``sh``, its Python a child of it."""
    path = tmp_path / "python-wrapper"
    path.write_text(f'#!/bin/sh\n{before}"{sys.executable}" "$@"\n')
    path.chmod(0o755)
    return path


def test_a_timed_out_call_kills_the_interpreter_behind_a_wrapper(tmp_path: Path) -> None:
    """The cell's call times out: the wrapper and the Python it started both end (the Python kept running before)."""
    worker = Worker("wrapped", "tests.worker_handlers:PidHandler", python=str(_wrapper(tmp_path)))
    try:
        pid = worker.call({}, timeout=60)
        assert pid != worker.pid  # the Python answering is the wrapper's child, not the process the harness started
        with pytest.raises(WorkerTimeout, match=r"gave no answer to its call within 1 s \(--timeout\); it was stopped, with every "
                                                r"process it started"):
            worker.call({"hang": True}, timeout=1)
        assert _eventually_gone(pid)
    finally:
        worker.close()


def test_closing_a_worker_ends_its_whole_group(tmp_path: Path) -> None:
    """``close`` stops the wrapper's Python with it, whatever state it is in."""
    worker = Worker("wrapped", "tests.worker_handlers:PidHandler", python=str(_wrapper(tmp_path)))
    pid = worker.call({}, timeout=60)
    worker.close()
    assert _eventually_gone(pid)


def test_the_start_obeys_its_timeout_and_leaves_nothing(tmp_path: Path) -> None:
    """A worker slow to start is stopped after its start timeout (the run's ``--timeout``), with the ``sleep`` it waits on."""
    marker = tmp_path / "sleep.pid"
    worker = Worker("slow", "tests.worker_handlers:PidHandler", python=str(_wrapper(tmp_path, f"sleep 300 & echo $! > {marker}; wait\n")),
                    start_timeout=1)
    with pytest.raises(WorkerTimeout, match=r"gave no answer to its start within 1 s \(--timeout\)"):
        worker.start()
    worker.close()
    assert _eventually_gone(int(marker.read_text()))


def test_a_hanging_activation_script_is_stopped_with_its_sleep(tmp_path: Path) -> None:
    """An activation script that never finishes is refused after the timeout given, and its ``sleep`` ends with it."""
    marker = tmp_path / "sleep.pid"
    script = tmp_path / "activate.sh"
    script.write_text(f"sleep 300 &\necho $! > {marker}\nwait\n")
    with pytest.raises(UsageError, match=r"an activation script that finishes within --timeout 1 s \(it was stopped, with every "
                                         r"process it started\)"):
        worker_env(Installation("r2", "r", activate=str(script)), timeout=1)
    assert _eventually_gone(int(marker.read_text()))


def test_run_with_a_hanging_activation_obeys_timeout_in_one_line(tmp_path: Path) -> None:
    """``run --timeout 2`` with an activation script that hangs: one line naming the installation and the timeout, no orphan."""
    marker = tmp_path / "sleep.pid"
    script = tmp_path / "activate.sh"
    script.write_text(f"sleep 300 &\necho $! > {marker}\nwait\n")
    done = harness_command("run", "--frontend", f"python,r2=r:{script}", "--mode", "default", "--timeout", "2", "--rounds", "1",
                           "--warmup-rounds", "1", timeout=240)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: installation r2 must be an activation script that finishes within "
                                                   "--timeout 2 s"), done.stderr
    assert _eventually_gone(int(marker.read_text()))


def test_an_activation_script_s_leftovers_are_ended(tmp_path: Path) -> None:
    """An activation that succeeds but leaves a background process (its output closed) does not leave it running."""
    marker = tmp_path / "sleep.pid"
    script = tmp_path / "activate.sh"
    script.write_text(f"sleep 300 >/dev/null 2>&1 </dev/null &\necho $! > {marker}\nexport AMP_TEST_ACTIVATED=1\n")
    env = worker_env(Installation("r2", "r", activate=str(script)), timeout=60)
    assert env["AMP_TEST_ACTIVATED"] == "1"
    assert _eventually_gone(int(marker.read_text()))


def test_the_process_group_is_the_worker_s_own(tmp_path: Path) -> None:
    """The worker leads a session of its own: a kill of its group never reaches the harness's."""
    worker = Worker("python", "tests.worker_handlers:PidHandler")
    try:
        pid = worker.call({}, timeout=60)
        assert os.getpgid(pid) == pid != os.getpgid(os.getpid())
    finally:
        worker.close()
