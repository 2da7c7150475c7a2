"""A malformed ``harness/workload/patches.toml`` stops every command with one line and its own exit status (issue 48, 13).

The file is part of the harness, read as its modules load: a switch whose ``new`` held two statements was a ``ValueError``
traceback from ``load_patches`` and exit 1, which a CI script reads as a failed parity check. Here a copy of the package
with one planted entry runs as ``python -m harness`` and as a script run by hand; every malformation's line is a unit test
(``tests/unit/workload/test_patches.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT
from tests.planting import copy_scripts, plant

_OLD = 'new = "clip_coef <- (total_norm + 1e-06)$reciprocal() * max_norm"'
_NEW = 'new = "clip_coef <- (total_norm + 1e-06)$reciprocal() * max_norm; group$lr <- 0.05"'
_LINE = ("error: harness/workload/patches.toml: switch 'r-clip-coef-reciprocal': `new` holds a second statement (`;` or a new "
         "line); a switch replaces one statement by one statement that computes the same thing another way")


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package and the scripts whose patches.toml has a switch that does two things."""
    root = tmp_path_factory.mktemp("broken")
    shutil.copytree(REPO_ROOT / "harness", root / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    copy_scripts(root)
    plant(root, "harness/workload/patches.toml", _OLD, _NEW)
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_a_command_stops_with_one_line_and_the_broken_patches_status(broken: Path) -> None:
    """Any command (the table loads with the commands' parser): no traceback, nothing on stdout, status 6."""
    done = _run(broken, "-m", "harness", "doctor")
    assert done.returncode == ExitCode.BROKEN_PATCHES == 6, done.stderr[-2000:]
    assert (done.stdout, done.stderr) == ("", _LINE + "\n")


def test_a_script_run_by_hand_stops_the_same_way(broken: Path) -> None:
    """py_scripts' shell mode loads the harness's preparation, and the table with it: the same line and status."""
    done = _run(broken, "py_scripts/with_autocast.py", "--mode", "default")
    assert (done.returncode, done.stdout, done.stderr) == (ExitCode.BROKEN_PATCHES, "", _LINE + "\n")
