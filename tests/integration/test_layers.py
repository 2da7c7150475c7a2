"""The layers hold: import-linter's contracts pass and catch a planted upward import; the parent never imports torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.files.paths import REPO_ROOT
from harness.views.report import REPORT_FILES


def _lint_command() -> None:
    if shutil.which("lint-imports") is None:
        pytest.fail("import-linter is not installed: pip install -e '.[lint]' (bash .ci/setup does)")


def test_the_import_contracts_hold() -> None:
    """``lint-imports`` (the contracts in pyproject.toml: layers, views never judge, the worker and script sides stay bare) passes."""
    _lint_command()
    done = subprocess.run(["lint-imports"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "planted", "named"),
    [
        ("harness/store/lock.py", "from harness.views import table", "harness.store.lock -> harness.views.table"),
        ("harness/views/formatting.py", "from harness.judge import pairs", "harness.views.formatting -> harness.judge.pairs"),
        ("harness/worker_side/tensor_bytes.py", "import harness.model.result", "harness.worker_side.tensor_bytes -> harness.model.result"),
        ("harness/run/prepare.py", "import matplotlib", "harness.run.prepare -> matplotlib"),
    ],
    ids=["storage-imports-a-view", "a-view-judges", "worker-side-imports-the-model", "the-scripts-reach-matplotlib"],
)
def test_a_planted_import_breaks_a_contract(tmp_path: Path, module: str, planted: str, named: str) -> None:
    """A copy of the tree with one forbidden import planted fails ``lint-imports``, naming the import."""
    _lint_command()
    for part in ("harness", "py_scripts"):
        shutil.copytree(REPO_ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{planted}  # planted\n", encoding="utf-8")
    done = subprocess.run(["lint-imports"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert named in done.stdout, done.stdout[-3000:]


#: A fresh interpreter imports every module but those that run in workers only (the handlers, the float64 autograd
#: reference, the module sweep's comparison; the worker side's matmul peak and GEMM profiler
#: included: they import torch only when called), runs a whole matrix in-process (cells, timed rounds, peaks,
#: GEMM profiles), loads the result back (judged on load), writes its report and prints its table; then it says
#: which torch modules it imported. None may be: torch lives in the workers only.
_PARENT = """
import importlib, io, json, pkgutil, sys
from pathlib import Path
import harness
handlers = ("harness.worker_side.python_handler", "harness.worker_side.r_handler",  # they run in workers only
            "harness.worker_side.float64_autograd",  # as does a float64 reference by autograd (its own process)
            "harness.worker_side.module_compare")  # and the module sweep's comparison (the Python handler imports it on use)
parent = [m.name for m in pkgutil.walk_packages(harness.__path__, "harness.") if m.name not in handlers]
for name in parent:
    importlib.import_module(name)
from rich.console import Console
from harness.cli.main import main
from harness.store.result_file import load_result
from harness.views.report import write_report
from harness.views.table import print_result
out = Path(sys.argv[1])
try:
    main(["run", "--preset", "tiny", "--frontend", "python", "--optimizer", "sgd,adam", "--rounds", "1", "--profile",
          "--json", str(out / "r.json")])
except SystemExit as end:
    print("exit", end.code, file=sys.stderr)
result = load_result(out / "r.json")
written = write_report(result, out / "report")
print_result(result, Console(file=io.StringIO()))
print(json.dumps({"imported": len(parent), "cells": [str(c.status) for c in result.cells], "written": len(written),
                  "torch": sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))}))
"""


def test_the_parent_never_imports_torch(tmp_path: Path) -> None:
    """Importing every parent module, a whole run (every mode, two optimizers; timed rounds, peaks, GEMM profiles), loading,
    judging, the report and the table leave torch out of the parent: only the workers import it."""
    done = subprocess.run([sys.executable, "-c", _PARENT, str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["imported"] > 40 and found["cells"] == ["ok"] * 14 and found["written"] == len(REPORT_FILES)
    assert found["torch"] == [], f"torch was imported in the parent: {found['torch']}"
