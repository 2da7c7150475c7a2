"""The workers' start (``MatrixRunner.describe_installations``): what the result says when a worker could not describe itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.errors import WorkerError
from harness.run.runner import MatrixRunner
from harness.workload.spec import WorkloadSpec


def test_a_default_worker_that_dies_describing_itself_is_named_in_the_warnings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: an R worker that died during its first describe call was started again for its cells without a word, and its
    cells lacked their build and CPU facts. The run still goes on; the runner now keeps why, for the result's warnings."""
    def dies(self: MatrixRunner, name: str) -> dict[str, Any]:
        raise WorkerError(f"{name} worker crashed (signal 11)\n during describe")

    monkeypatch.setattr(MatrixRunner, "_describe", dies)
    monkeypatch.setattr(MatrixRunner, "_probed_by", lambda self, installation, facts: facts if facts is not None else {})
    runner = MatrixRunner(WorkloadSpec.from_preset("tiny"), ("python",), staging=tmp_path)
    try:
        assert runner.describe_installations() == {"python": {}}
        assert runner.start_problems == {"python": "python worker: python worker crashed (signal 11) during describe"}
    finally:
        runner.close()
