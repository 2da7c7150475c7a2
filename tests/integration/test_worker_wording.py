"""What a failing worker says: one line that fits where it is read (a refusal before the first cell, a cell's reason)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness.errors import ScriptError, WorkerCrashed, WorkerError
from harness.run.worker import Worker
from tests.support import run_cli


def test_a_failed_describe_is_one_error_without_a_script_or_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """A request that is not a cell (``describe``) failed as "script describe (mode -, ) failed", with the child's echo of
    its error as a second WARNING line: now it says which request failed, and the echo is INFO (shown with -v)."""
    worker = Worker("x", "tests.worker_handlers:WarnThenFailHandler")
    try:
        with caplog.at_level(logging.INFO), pytest.raises(WorkerError) as failed:
            worker.call({"kind": "describe", "device": "cpu"}, timeout=60)
    finally:
        worker.close()
    assert not isinstance(failed.value, ScriptError)
    assert str(failed.value) == "x worker could not answer its describe request: ValueError: there is no package called 'torch'"
    echoed = [r for r in caplog.records if r.name == "harness.r"]
    assert [r.levelno for r in echoed] == [logging.INFO]


def test_a_cell_s_failure_still_names_its_script_and_mode() -> None:
    """A cell request keeps the script, mode and spec in its one line."""
    worker = Worker("x", "tests.worker_handlers:CrashHandler")
    try:
        with pytest.raises(ScriptError, match=r"^x script with_autocast \(mode default, tiny\) failed: ValueError: deliberate"):
            worker.call({"script": "with_autocast", "mode": "default", "spec_summary": "tiny", "fail": True}, timeout=60)
    finally:
        worker.close()


def test_an_installation_that_dies_at_start_is_refused_without_a_promise_of_restart(tmp_path: Path) -> None:
    """An interpreter that exits at once: the refusal said "it will be restarted for the next call" (there is none)."""
    interpreter = tmp_path / "python"
    interpreter.write_text("#!/bin/sh\nexit 3\n")
    interpreter.chmod(0o755)
    done = run_cli("run", "--frontend", f"python,dead=python:{interpreter}", "--mode", "default", "--rounds", "1")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: installation dead must be one that starts a worker (dead worker died "
                                                   "during its start (exited with status 3).)"), done.stderr
    assert "restarted" not in done.stderr


def test_a_crash_says_how_it_died_and_nothing_more() -> None:
    """A segfault mid-call: the signal, in one sentence."""
    worker = Worker("x", "tests.worker_handlers:CrashHandler")
    try:
        with pytest.raises(WorkerCrashed) as crashed:
            worker.call({"crash": True}, timeout=60)
    finally:
        worker.close()
    assert str(crashed.value) == "x worker died during its call (killed by signal SIGSEGV)."
