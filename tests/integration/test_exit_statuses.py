"""One meaning per exit status, with real workers and real scripts: a planted diverged pair fails ``trace`` (``FAILED``;
``run``'s is tests/integration/test_planted.py's), and both languages' scripts run by hand tell a usage error from an
internal error (R's through its relay).

The same statuses of ``report``, ``merge``, ``doctor`` and ``prepare``, and ``run``/``trace`` refusing a flag or hitting a bug
before any cell, are checked in process in ``tests/unit/cli/test_exit_statuses.py``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT, SCRIPTS_ENV
from harness.run.availability import Availability
from tests.planting import copy_scripts, plant
from tests.support import require_r_torch, run_cli

#: The R learning rate times (1 + 1e-6): far inside every tolerance, yet not bitwise identical (tests/integration/test_planted.py).
_DIVERGED = ("r_scripts/optimizer.R", "  opt <- do.call(constructor, c(list(params), r$args))",
             "  r$args$lr <- r$args$lr * (1 + 1e-6)\n  opt <- do.call(constructor, c(list(params), r$args))")
_QUICK = ("--preset", "tiny", "--mode", "default", "--optimizer", "sgd", "--frontend", "python,r")


def test_a_diverged_pair_fails_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, availability: Availability) -> None:
    """A planted one-part-per-million change in R's learning rate: ``trace`` exits ``FAILED`` (1), not a usage error (``run``
    on such a copy: tests/integration/test_planted.py::test_the_cli_fails_a_run_whose_r_learning_rate_is_off_by_one_in_a_million)."""
    require_r_torch(availability)
    root = copy_scripts(tmp_path / "planted")
    plant(root, *_DIVERGED)
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    done = run_cli("trace", *_QUICK)
    assert done.returncode == ExitCode.FAILED, done.stdout[-2000:] + done.stderr[-2000:]
    assert "diverged" in done.stdout


def _script(frontend: str, root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A copy's ``with_autocast`` script run by hand, in either language."""
    if frontend == "python":
        command = [sys.executable, str(root / "py_scripts" / "with_autocast.py")]
    else:
        command = ["Rscript", str(root / "r_scripts" / "with_autocast.R")]
    return subprocess.run([*command, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("frontend", ["python", "r"])
def test_a_script_by_hand_tells_a_usage_error_from_a_bug(frontend: str, tmp_path: Path, availability: Availability) -> None:
    """A bad flag is a usage error (4) in both languages (R relays the harness's); a bug in the script is an internal error (3)."""
    if frontend == "r":
        require_r_torch(availability)
    root = copy_scripts(tmp_path / "scripts")
    refused = _script(frontend, root, "--mode", "default", "--lr", "inf")
    assert refused.returncode == ExitCode.USAGE_ERROR, refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith("error: argument --lr: must be a finite number")
    if frontend == "python":
        plant(root, "py_scripts/with_autocast.py", "    loop = start_loop(spec, mode, with_scaler=False)\n",
              '    raise RuntimeError("planted bug")\n')
    else:
        plant(root, "r_scripts/with_autocast.R", "  loop <- start_loop(spec, mode, with_scaler = FALSE)\n", '  stop("planted bug")\n')
    bug = _script(frontend, root, "--preset", "tiny", "--mode", "default", "--num-batches", "1", "--epochs", "1")
    assert bug.returncode == ExitCode.INTERNAL_ERROR, bug.stderr
    assert "planted bug" in bug.stderr.strip().splitlines()[-1]


def test_r_relays_the_harness_status_for_a_bug_in_the_harness(tmp_path: Path, availability: Availability) -> None:
    """A bug in the harness while it prepares R's run (its status 3, from ``prepare``) is R's status too, not R's own."""
    require_r_torch(availability)
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'error: unexpected RuntimeError: planted bug (run with --debug for the traceback)' >&2\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    done = _script("r", REPO_ROOT, "--mode", "default", env={**os.environ, "AMP_PARITY_PYTHON": str(broken)})
    assert done.returncode == ExitCode.INTERNAL_ERROR, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "error: unexpected RuntimeError: planted bug (run with --debug for the traceback)"
