"""Script lookup: a copy of the scripts under $AMP_PARITY_SCRIPTS is what the workers really run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.availability import Availability
from harness.paths import REPO_ROOT, SCRIPTS_ENV, script_path, scripts_root
from harness.runner import MatrixRunner, collect_warnings
from harness.spec import WorkloadSpec


def copy_scripts(dest: Path) -> Path:
    """The checkout's ``py_scripts/`` and ``r_scripts/`` copied under ``dest`` (caches left out)."""
    for folder in ("py_scripts", "r_scripts"):
        shutil.copytree(REPO_ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_scripts_root_defaults_to_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the variable the checkout's scripts run and no warning is added."""
    monkeypatch.delenv(SCRIPTS_ENV, raising=False)
    assert scripts_root() == REPO_ROOT
    assert script_path("r", "with_autocast") == REPO_ROOT / "r_scripts" / "with_autocast.R"
    assert collect_warnings([]) == []


def test_python_worker_runs_the_planted_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """A copy whose learning rate is doubled trains differently from the checkout's script, and the result says so."""
    with MatrixRunner(tiny_spec, ("python",), availability=availability) as runner:
        clean = runner.run(("default",))["cells"][0]["record"]["losses"]
    root = copy_scripts(tmp_path)
    script = root / "py_scripts" / "with_autocast.py"
    source = script.read_text()
    assert source.count('lr=spec["lr"]') == 1
    script.write_text(source.replace('lr=spec["lr"]', 'lr=2 * spec["lr"]'))
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    with MatrixRunner(tiny_spec, ("python",), availability=availability) as runner:
        result = runner.run(("default",))
    planted = result["cells"][0]["record"]["losses"]
    assert planted[0] == clean[0] and planted[-1] != clean[-1]  # same start, another trajectory
    assert any(w.startswith(f"scripts ran from {root.resolve()}") for w in result["warnings"])
