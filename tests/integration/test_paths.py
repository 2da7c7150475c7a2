"""Script lookup under real workers: a copy of the scripts under $AMP_PARITY_SCRIPTS is what the Python worker runs.

The lookup itself is in ``tests/unit/files/test_paths.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.files.paths import SCRIPTS_ENV
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.spec import WorkloadSpec
from tests.planting import copy_scripts, plant
from tests.support import kept_workers


def test_python_worker_runs_the_planted_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """A copy whose learning rate is doubled trains differently from the checkout's script, and the result says so."""
    with MatrixRunner(tiny_spec, ("python",), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        clean = runner.run(("default",), ("sgd",)).to_json()["cells"][0]["record"]["losses"]
    root = copy_scripts(tmp_path)
    plant(root, "py_scripts/optimizer.py", 'python["class"])(params, **args)',
          'python["class"])(params, **(args | {"lr": 2 * args["lr"]}))')
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    with MatrixRunner(tiny_spec, ("python",), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("default",), ("sgd",)).to_json()
    planted = result["cells"][0]["record"]["losses"]
    assert planted[0] == clean[0] and planted[-1] != clean[-1]  # same start, another trajectory
    assert any(w.startswith(f"scripts ran from {root.resolve()}") for w in result["warnings"])
