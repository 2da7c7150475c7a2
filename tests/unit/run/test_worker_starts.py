"""The workers' start (``MatrixRunner.describe_installations``) and the calls that never need one: what the result says when a
worker could not describe itself, and a refused cell."""

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


def test_a_refused_cell_is_unsupported_in_its_reason_without_a_worker(tmp_path: Path) -> None:
    """A cell harness/workload/refusals.py refuses never reaches a worker: it is ``unsupported``, saying why (no worker runs
    here: the pool would start one on its first call)."""
    from harness.model.result import Status
    from harness.workload.matrix import Cell

    spec = WorkloadSpec.from_preset("tiny", amp_dtype="float16")
    runner = MatrixRunner(spec, ("python",), staging=tmp_path)
    try:
        outcome = runner._record_call(Cell("python", "with_autocast", "lowp_weights", "adam", "cpu"))
        assert outcome.status is Status.UNSUPPORTED and outcome.reason is not None and "is 0 in float16" in outcome.reason
        assert runner.pool.worker_info() == {}
    finally:
        runner.close()


def test_a_resume_that_never_happens_is_unsupported_saying_why(tmp_path: Path) -> None:
    """Issue 48 (7): with 5 steps and the checkpoint at step 7 no checkpoint was written, and the resume cell passed without
    a word. Its cell is now ``unsupported`` without a worker, naming what it needs and what the run has."""
    from harness.model.result import Status
    from harness.workload.matrix import Cell

    spec = WorkloadSpec.from_preset("tiny", num_batches=5, epochs=1)
    runner = MatrixRunner(spec, ("python",), staging=tmp_path)
    try:
        outcome = runner._record_call(Cell("python", "cuda_amp_grad_scaler", "default", "adam", "cpu", "resume"))
        assert outcome.status is Status.UNSUPPORTED and outcome.reason is not None, outcome.reason
        assert outcome.reason.startswith("loop feature resume cannot act in this spec: it needs 8 steps for its checkpoint after 7 "
                                         "iterations and the run from it, and the run has 5 (--num-batches 5 × --epochs 1")
        assert runner.pool.worker_info() == {}
    finally:
        runner.close()
