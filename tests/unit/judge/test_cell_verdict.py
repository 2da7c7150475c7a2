"""One cell against float64 and the scaler rule: the bound passes clean runs, names the first step and worst tensor beyond it."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import pytest

from harness.contract.modes import mode_of
from harness.judge.cells import judge_cell
from harness.judge.reference import Reference
from harness.judge.scaler_oracle import expected_scale_history
from harness.judge.tolerances import float64_bound_for
from harness.model.result import CellResult, ReferenceSummary, Status
from harness.model.verdicts import MEASURED_STEPS, CellVerdict
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec
from tests.model_results import committed
from tests.support import float64_check

_STEPS = 20
_AUTOCAST = mode_of("with_autocast", "autocast")
_BOUND = float64_bound_for(_AUTOCAST, "cpu", "bfloat16", _STEPS)
_SPEC = WorkloadSpec.from_preset("tiny", init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=4)


def _reference() -> Reference:
    rng = np.random.default_rng(0)
    weights = {"layer0.weight": rng.normal(size=(4, 4)), "layer0.bias": rng.normal(size=4), "layer1.weight": rng.normal(size=(2, 4))}
    return Reference(losses=np.linspace(1.0, 0.5, _STEPS), weights=weights)


def _run(ref: Reference, loss_rel: float = 0.0, weight_rel: float = 0.0) -> tuple[list[float], dict[str, np.ndarray]]:
    """A run that sits ``loss_rel`` / ``weight_rel`` away from the reference (float32, as recorded)."""
    losses = [float(v * (1 + loss_rel)) for v in ref.losses]
    return losses, {k: (v * (1 + weight_rel)).astype(np.float32) for k, v in ref.weights.items()}


def test_bound_grows_linearly_past_the_measured_step_count() -> None:
    """At 20 steps plain SGD's bf16 bound is eps/16 and eps/2; at 50 steps 2.5 times that; CUDA doubles it."""
    assert (_BOUND.loss_rtol, _BOUND.weight_rtol) == (2.0**-7 / 16, 2.0**-7 / 2)
    longer = float64_bound_for(mode_of("cuda_amp_grad_scaler", "autocast_scaler"), "cpu", "bfloat16", 50)
    assert longer.weight_rtol == pytest.approx(2.5 * _BOUND.weight_rtol)
    assert longer.loss_bound_at(0) == pytest.approx(_BOUND.loss_rtol) and longer.loss_bound_at(49) == pytest.approx(longer.loss_rtol)
    assert float64_bound_for(_AUTOCAST, "cuda", "bfloat16", _STEPS).loss_rtol == 2 * _BOUND.loss_rtol
    for script in ("with_autocast", "cuda_amp_grad_scaler"):  # each script's own default computes in float32
        assert float64_bound_for(mode_of(script, "default"), "cpu", "bfloat16", MEASURED_STEPS).precision == "float32"


def test_run_close_to_float64_passes() -> None:
    """A run a fifth of the bound away passes with no step and the real distances."""
    ref = _reference()
    check = float64_check(*_run(ref, _BOUND.loss_rtol / 5, _BOUND.weight_rtol / 5), ref, _BOUND, frozenset())
    assert check.passed and check.first_step_beyond is None
    assert check.max_rel_loss_error == pytest.approx(_BOUND.loss_rtol / 5, rel=1e-3)
    assert check.final_weights_rel_error == pytest.approx(_BOUND.weight_rtol / 5, rel=0.05)


def test_loss_beyond_the_bound_names_the_first_step_and_worst_tensor() -> None:
    """A loss that leaves the bound at step 7 fails there; the tensor furthest from float64 is named."""
    ref = _reference()
    losses, weights = _run(ref)
    for step in range(7, _STEPS):
        losses[step] = float(ref.losses[step] * (1 + 3 * _BOUND.loss_rtol))
    weights["layer0.bias"] = (ref.weights["layer0.bias"] * (1 + 4 * _BOUND.weight_rtol)).astype(np.float32)
    check = float64_check(losses, weights, ref, _BOUND, frozenset())
    assert not check.passed and check.first_step_beyond == 7 and check.worst_tensor == "layer0.bias"
    assert "from step 7" in check.message and "worst tensor layer0.bias" in check.message


def test_weights_beyond_the_bound_fail_even_when_losses_pass() -> None:
    """Final weights 3x the bound away fail although every loss is within it."""
    ref = _reference()
    check = float64_check(*_run(ref, 0.0, 3 * _BOUND.weight_rtol), ref, _BOUND, frozenset())
    assert not check.passed and check.first_step_beyond is None and check.final_weights_rel_error > _BOUND.weight_rtol


def test_nonfinite_loss_counts_only_where_the_step_was_not_skipped() -> None:
    """An inf loss at a skipped step is left out; at a step taken it fails at that step."""
    ref = _reference()
    losses, weights = _run(ref)
    losses[4] = math.inf
    assert float64_check(losses, weights, ref, _BOUND, frozenset({4})).passed
    failed = float64_check(losses, weights, ref, _BOUND, frozenset())
    assert not failed.passed and failed.first_step_beyond == 4 and failed.max_rel_loss_error == math.inf


def _cell(status: str = "ok", **record_changes: Any) -> CellResult:
    """The committed tiny result's Python scaler cell, its record changed by ``record_changes`` (no record unless ``ok``)."""
    cell = committed().cell("cuda_amp_grad_scaler-autocast_scaler-sgd-python-cpu")
    assert cell.record is not None
    record = dataclasses.replace(cell.record, **record_changes) if status == "ok" else None
    return dataclasses.replace(cell, status=Status(status), record=record)


def test_cell_verdict_combines_both_checks_and_survives_json() -> None:
    """A scaler cell within the bound but with a late growth fails on the scaler; the verdict round-trips through JSON."""
    result = committed()
    record = _cell().record
    assert record is not None and record.skipped is not None
    late = expected_scale_history(65536.0, 2.0, 0.5, result.spec.growth_interval + 1, list(record.skipped))
    verdict = judge_cell(_cell(loss_scale=tuple(late)), result.spec, result.reference)
    assert verdict.failed and verdict.float64 is not None and verdict.float64.passed
    assert verdict.scaler is not None and verdict.scaler.first_step is not None
    assert f"step {verdict.scaler.first_step}" in verdict.reason
    assert CellVerdict.from_json(json.loads(json.dumps(verdict.to_json()))) == verdict
    assert judge_cell(_cell(), result.spec, result.reference).outcome == "pass"  # the real history follows the rule


def test_a_cell_is_judged_from_what_the_result_stores() -> None:
    """Judged again from its losses, the stored reference losses and its stored distance, a cell gets the verdict its run gave."""
    result = committed()
    for cell in result.cells:
        assert judge_cell(cell, result.spec, result.reference) == cell.verdict
    assert any(c.verdict is not None and c.verdict.float64 is not None for c in result.cells)


def test_cells_that_did_not_run_are_not_judged() -> None:
    """An unsupported or skipped cell has nothing to judge: not_judged, never pass."""
    reference = committed().reference
    for status in ("unsupported", "skipped", "error"):
        verdict = judge_cell(_cell(status), _SPEC, reference)
        assert verdict.outcome == "not_judged" and status in verdict.reason
    skipped = ReferenceSummary(False, "float64 reference skipped: too big")
    no_reference = judge_cell(_cell(loss_scale=None), _SPEC, skipped)
    assert no_reference.outcome == "not_judged" and "too big" in no_reference.reason


def test_overflow_steps_without_a_scaler_mode_are_named_in_the_warnings() -> None:
    """Asking for overflows in a run without a dynamic scaler (with_autocast's modes, the scaler script's own default) injects
    nothing, and the result says so."""
    from harness.run.runner import collect_warnings

    spec = WorkloadSpec.from_preset("tiny", overflow_steps=(3, 7))
    default = CellResult(Cell("python", "with_autocast", "default", "sgd", "cpu"), Status.OK)
    assert "overflow_steps [3, 7] given, but no scaler mode ran: nothing was injected" in collect_warnings([default], spec)
    scaler_default = CellResult(Cell("python", "cuda_amp_grad_scaler", "default", "sgd", "cpu"), Status.OK)
    assert "overflow_steps [3, 7] given, but no scaler mode ran: nothing was injected" in collect_warnings([default, scaler_default], spec)
    scaler = CellResult(Cell("python", "cuda_amp_grad_scaler", "autocast_scaler", "sgd", "cpu"), Status.OK)
    assert not any("overflow_steps" in w for w in collect_warnings([default, scaler], spec))
