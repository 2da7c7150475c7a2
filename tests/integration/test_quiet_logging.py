"""Other libraries' INFO lines (rpy2's "R home found: ...", relayed from a worker under rpy2's own logger name) reach
the terminal only with ``-v``; their warnings always do. Pinned here because the issue saw them in a quiet run (not
reproduced on this branch: the command's logging stops at WARNING unless ``-v``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.files.paths import REPO_ROOT

#: ``run`` with its work replaced by what a worker's relayed log records do (harness.run.worker logs each under its name).
_SCRIPT = """
import logging, sys
import harness.cli.commands.run as run_command
import harness.cli.main as cli
def run(args):
    logging.getLogger("rpy2.situation").info("R home found: /usr/lib/R")
    logging.getLogger("rpy2.situation").warning("rpy2 warns")
    return 0
run_command.command = run
cli.main(sys.argv[1:])
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_rpy2_info_lines_only_with_verbose(verbose: bool) -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, "run", *(["-v"] if verbose else [])], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert ("R home found" in done.stderr) is verbose
    assert "rpy2 warns" in done.stderr
