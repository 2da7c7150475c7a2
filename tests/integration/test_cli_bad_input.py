"""Bad input given to the real command, ``python -m harness`` in a new process, and ``doctor -v`` (it probes R).

The other refusals are checked in process, in ``tests/unit/cli/test_cli_bad_input.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.errors import ExitCode
from harness.run.availability import Availability
from tests.support import harness_command, one_error_line, run_cli


def test_the_real_command_prints_the_same_line() -> None:
    """``python -m harness`` in a new process exits with a usage error and exactly the line ``main`` prints in process."""
    args = ("run", "--lr", "inf")
    done = harness_command(*args)
    assert (done.returncode, done.stdout, done.stderr) == (ExitCode.USAGE_ERROR, "", run_cli(*args).stderr)
    assert one_error_line(done).startswith("error: argument --lr: must be a finite number")


def test_verbose_is_accepted_after_the_command(availability: Availability) -> None:
    """``doctor -v`` is accepted like ``-v doctor`` (it reads the session's probe of R: ``probe`` is cached per process)."""
    done = run_cli("doctor", "-v")
    assert done.returncode in (0, 1)  # 1 only under AMP_PARITY_REQUIRE_R without R torch
    assert "unrecognized" not in done.stderr and "Python" in done.stdout


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    """A named pipe with no writer: both commands answer in one line at once (the open used to block forever)."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    spec = one_error_line(harness_command("run", "--spec-file", str(fifo), timeout=60))
    assert spec == ("error: spec_file must be a regular file holding a JSON object of spec fields (not a regular file: "
                    f"it is a FIFO), got '{fifo}'.")
    report = one_error_line(harness_command("report", str(fifo), "--out", str(tmp_path / "out"), timeout=60))
    assert report.startswith(f"error: {fifo} is not a result file: not a regular file: it is a FIFO.")
