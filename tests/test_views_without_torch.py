"""Judging and the views need no torch: the compare, report, table and figures tests can run where torch is absent."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.files.paths import REPO_ROOT

#: Everything the view tests import, then a whole judging and report pass over the golden result.
_PROGRAM = """
import io, sys
import tests.test_compare, tests.test_report, tests.test_report_timing
from rich.console import Console
from harness.judge.pairs import compare_result
from harness.judge.targets import check_targets
from harness.views.report import render_markdown
from harness.views.table import print_result
from tests.twins import golden
result = golden()
assert [v.verdict for v in compare_result(result)] == ["identical", "identical", "unsupported", "unsupported"]
assert check_targets(result) and "## Pair details" in render_markdown(result)
print_result(result, Console(file=io.StringIO()))
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def test_compare_report_table_and_figures_import_no_torch() -> None:
    """A fresh interpreter that imports the view tests and judges and renders the golden result has not imported torch."""
    done = subprocess.run([sys.executable, "-c", _PROGRAM], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", f"torch was imported: {done.stdout.strip()}"
