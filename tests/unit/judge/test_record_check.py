"""The record check every worker call goes through: a record of the cell's script, mode and optimizer, of the spec's steps,
with the overflows it was asked for, and its non-finite losses named.

Split from ``tests/integration/test_runner.py``, which runs the same checks on real cells.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from harness.contract.modes import SCRIPTS
from harness.judge.record_check import describe_loss, expected_injections, judge_record, nonfinite_reason
from harness.model.record import RECORD_SCHEMA_VERSION
from harness.model.result import Status
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec


def _record(spec: WorkloadSpec, cell: Cell, **changes: Any) -> dict[str, Any]:
    """The fields ``judge_record`` reads of a good record of ``cell``, then ``changes``."""
    return {
        "schema_version": RECORD_SCHEMA_VERSION, "script": cell.script, "mode": cell.mode, "optimizer": cell.optimizer,
        "losses": [1.0] * spec.steps, "injected_steps": expected_injections(spec, cell),
    } | changes


@pytest.mark.parametrize(("value", "name"), [(None, "missing"), (math.nan, "NaN"), (math.inf, "inf"), (-math.inf, "-inf"), (0.25, "0.25")])
def test_non_finite_losses_are_named_as_such(value: float | None, name: str) -> None:
    """A missing, NaN or infinite loss is named so, with its step and frontend; a finite run has no reason."""
    assert describe_loss(value) == name
    assert nonfinite_reason([1.0, 0.5, value], "r") == (None if name == "0.25" else f"loss is {name} at step 2 (r)")


@pytest.mark.parametrize(
    ("script", "mode", "change", "status", "reason"),
    [
        ("with_autocast", "default", {}, Status.OK, None),
        ("with_autocast", "default", {"schema_version": 4}, Status.ERROR,
         "the python script returned something that is not a version-5 run record"),
        ("with_autocast", "default", {"losses": [1.0] * 19}, Status.ERROR,
         "the python script returned 19 losses, expected 20 (one per step)"),
        ("with_autocast", "default", {"losses": "1.0"}, Status.ERROR, "the python script returned str losses, expected 20 (one per step)"),
        ("with_autocast", "autocast", {"losses": [1.0] * 7 + [math.inf] + [1.0] * 12}, Status.NUMERICAL_FAILURE,
         "loss is inf at step 7 (python)"),
        ("with_autocast", "lowp_weights", {"losses": [1.0] * 7 + [math.nan] + [1.0] * 12}, Status.NUMERICAL_FAILURE,
         "loss is NaN at step 7 (python)"),
        ("cuda_amp_grad_scaler", "default", {"losses": [1.0] * 7 + [math.inf] + [1.0] * 12}, Status.NUMERICAL_FAILURE,
         "loss is inf at step 7 (python)"),
        ("cuda_amp_grad_scaler", "autocast_scaler", {"losses": [1.0] * 7 + [math.inf] + [1.0] * 12}, Status.OK, None),
    ],
)
def test_one_record_check_for_every_call(
    tiny_spec: WorkloadSpec, script: str, mode: str, change: dict[str, object], status: Status, reason: str | None
) -> None:
    """``judge_record`` refuses what is not a record of the spec's steps, and fails a non-finite loss outside the modes with a
    dynamic scaler only (the scaler script's own default, scaler disabled, fails it too)."""
    cell = Cell("python", script, mode, "sgd", "cpu")
    assert judge_record(_record(tiny_spec, cell, **change), tiny_spec, cell) == (status, reason)
    assert judge_record(None, tiny_spec, Cell("r", script, mode, "sgd", "cpu"))[0] is Status.ERROR


@pytest.mark.parametrize(("field", "wrong"), [("script", "cuda_amp_grad_scaler"), ("mode", "autocast"), ("optimizer", "sgd")])
def test_a_record_of_another_cell_is_an_error_naming_the_field(tiny_spec: WorkloadSpec, field: str, wrong: str) -> None:
    """A record that names another script, mode or optimizer than the cell asked for (a script that ignored the run spec's
    optimizer builds plain SGD) is an ``error`` naming the field, what the record says and what was asked."""
    cell = Cell("r", "with_autocast", "default", "adam", "cpu")
    asked = {"script": "with_autocast", "mode": "default", "optimizer": "adam"}[field]
    assert judge_record(_record(tiny_spec, cell, **{field: wrong}), tiny_spec, cell) == (
        Status.ERROR, f"the r script's record says {field} {wrong!r}, but it was asked for {asked!r}")
    assert judge_record(_record(tiny_spec, cell), tiny_spec, cell) == (Status.OK, None)
    without = {k: v for k, v in _record(tiny_spec, cell).items() if k != field}  # a record without the field at all
    assert judge_record(without, tiny_spec, cell) == (
        Status.ERROR, f"the r script's record says {field} None, but it was asked for {asked!r}")


def test_injections_are_expected_exactly_in_the_modes_with_a_dynamic_scaler() -> None:
    """The spec's overflow steps are expected in every mode whose scaler is dynamic, none in the others (the scaler script's
    default included: its scaler is disabled)."""
    spec = WorkloadSpec.from_preset("tiny", overflow_steps=(3, 7))
    for pair in SCRIPTS.values():
        for mode in pair.modes:
            wanted = [3, 7] if mode.scaler == "dynamic" else []
            assert expected_injections(spec, Cell("python", pair.stem, mode.name, "sgd", "cpu")) == wanted, mode
    assert [m.name for p in SCRIPTS.values() for m in p.modes if m.skips_steps] == ["autocast_scaler", "autocast_scaler_clip"]


@pytest.mark.parametrize(("injected", "mode"), [([], "autocast_scaler"), ([3], "autocast_scaler_clip"), ([3, 7, 9], "autocast_scaler"),
                                                 (None, "autocast_scaler"), ([3, 7], "default")])
def test_a_script_that_did_not_inject_what_was_asked_is_an_error(injected: list[int] | None, mode: str) -> None:
    """A record whose ``injected_steps`` is not the spec's overflow steps (in a dynamic-scaler mode; none elsewhere) is an
    ``error`` naming both: a script that ignores ``--overflow-steps`` would pass the skip checks it is there to exercise."""
    spec = WorkloadSpec.from_preset("tiny", overflow_steps=(3, 7))
    cell = Cell("python", "cuda_amp_grad_scaler", mode, "sgd", "cpu")
    wanted = expected_injections(spec, cell)
    status, reason = judge_record(_record(spec, cell, injected_steps=injected), spec, cell)
    assert status is Status.ERROR
    assert reason == (f"the python script put an overflow at steps {injected!r}, but was asked for {wanted} (overflow_steps): "
                      "a script must inject what the spec asks, or the scaler's skip goes untested")
    assert judge_record(_record(spec, cell), spec, cell) == (Status.OK, None)


def test_a_plain_run_that_applied_a_switch_is_an_error(tiny_spec: WorkloadSpec) -> None:
    """A record or timed call that turned a known difference's switch on would hide that difference (the pair would be
    identical): an ``error`` naming the switches; an empty list is a plain run."""
    cell = Cell("r", "cuda_amp_grad_scaler", "autocast_scaler_clip", "sgd", "cpu")
    status, reason = judge_record(_record(tiny_spec, cell, switches=["r-clip-coef-reciprocal"]), tiny_spec, cell)
    assert status is Status.ERROR and reason is not None
    assert "applied the switches ['r-clip-coef-reciprocal'] in a run that asked for none" in reason
    assert judge_record(_record(tiny_spec, cell, switches=[]), tiny_spec, cell) == (Status.OK, None)
