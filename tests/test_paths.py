"""Script lookup: a copy of the scripts under $AMP_PARITY_SCRIPTS is what the workers really run."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.files.paths import REPO_ROOT, SCRIPTS_ENV, script_path, scripts_root
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner, collect_warnings
from harness.workload.spec import WorkloadSpec
from tests.planting import copy_scripts, plant


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
        clean = runner.run(("default",)).to_json()["cells"][0]["record"]["losses"]
    root = copy_scripts(tmp_path)
    plant(root, "py_scripts/with_autocast.py", 'lr=spec["lr"]', 'lr=2 * spec["lr"]')
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    with MatrixRunner(tiny_spec, ("python",), availability=availability) as runner:
        result = runner.run(("default",)).to_json()
    planted = result["cells"][0]["record"]["losses"]
    assert planted[0] == clean[0] and planted[-1] != clean[-1]  # same start, another trajectory
    assert any(w.startswith(f"scripts ran from {root.resolve()}") for w in result["warnings"])
