"""The record check every worker call goes through: a record of the spec's steps, and its non-finite losses named.

Split from ``tests/integration/test_runner.py``, which runs the same checks on real cells.
"""

from __future__ import annotations

import math

import pytest

from harness.judge.record_check import describe_loss, judge_record, nonfinite_reason
from harness.model.result import Status
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec


@pytest.mark.parametrize(("value", "name"), [(None, "missing"), (math.nan, "NaN"), (math.inf, "inf"), (-math.inf, "-inf"), (0.25, "0.25")])
def test_non_finite_losses_are_named_as_such(value: float | None, name: str) -> None:
    """A missing, NaN or infinite loss is named so, with its step and frontend; a finite run has no reason."""
    assert describe_loss(value) == name
    assert nonfinite_reason([1.0, 0.5, value], "r") == (None if name == "0.25" else f"loss is {name} at step 2 (r)")


@pytest.mark.parametrize(
    ("mode", "change", "status", "reason"),
    [
        ("default", {}, Status.OK, None),
        ("default", {"schema_version": 2}, Status.ERROR, "the python script returned something that is not a version-4 run record"),
        ("default", {"losses": [1.0] * 19}, Status.ERROR, "the python script returned 19 losses, expected 20 (one per step)"),
        ("default", {"losses": "1.0"}, Status.ERROR, "the python script returned str losses, expected 20 (one per step)"),
        ("autocast", {"losses": [1.0] * 7 + [math.inf] + [1.0] * 12}, Status.NUMERICAL_FAILURE, "loss is inf at step 7 (python)"),
        ("autocast_scaler", {"losses": [1.0] * 7 + [math.inf] + [1.0] * 12}, Status.OK, None),
    ],
)
def test_one_record_check_for_every_call(
    tiny_spec: WorkloadSpec, mode: str, change: dict[str, object], status: Status, reason: str | None
) -> None:
    """``judge_record`` refuses what is not a record of the spec's steps, and fails a non-finite loss outside the scaler modes only."""
    script = "cuda_amp_grad_scaler" if mode.startswith("autocast_scaler") else "with_autocast"
    record = {"schema_version": 4, "losses": [1.0] * tiny_spec.steps} | change
    assert judge_record(record, tiny_spec, Cell("python", script, mode, "cpu")) == (status, reason)
    assert judge_record(None, tiny_spec, Cell("r", script, mode, "cpu"))[0] is Status.ERROR
