"""Pair verdicts on the golden result, against a fake "r" frontend with exactly one planted difference (no torch)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from harness.contract.modes import mode_of
from harness.errors import UsageError
from harness.judge.pairs import VERDICTS, compare_cells, compare_result, judge
from harness.model.result import CellResult, MatrixResult
from harness.model.verdicts import PairVerdict, ReferenceDistance
from tests.twins import by_mode, extra_skip, golden, nudge_one_ulp, replace_cells, split_losses, twin_cell, with_record, with_status

Cells = dict[str, CellResult]


@pytest.fixture(scope="module")
def python() -> Cells:
    """The golden result's Python cells by mode (8 steps, 4 weight tensors)."""
    return by_mode(golden())


def test_exact_copy_is_identical_and_says_what_was_compared_bitwise(python: Cells, tmp_path: Path) -> None:
    """A twin with the same record and weights is ``identical`` in every mode, and its summary names each check it passed."""
    assert tuple(python) == ("default", "autocast", "autocast_scaler", "autocast_scaler_clip")  # the golden run's modes
    for mode in python:
        verdict = compare_cells(python[mode], twin_cell(python[mode], tmp_path / mode))
        assert verdict.verdict == "identical", verdict.explain()
        assert verdict.frontends == ("python", "r")
        assert verdict.details["identical"] is True and verdict.details["mismatches"] == []
        assert "bitwise equal at all 8 steps" in verdict.explain()
        assert "all 4 tensors bitwise equal" in verdict.explain()
        # an identical pair says what was compared bitwise, the scale history only where one was recorded
        scaler = ", the loss scale and skipped steps at every step" if mode.startswith("autocast_scaler") else ""
        assert verdict.cause == f"bitwise equal: losses at all 8 steps, all 4 final-weights tensors{scaler} and the dtypes inside autocast"


def test_the_golden_pairs_are_judged_as_the_run_judged_them() -> None:
    """Judging the golden result's cells again gives back its stored pairs, details and explanations included, but the reworded cause."""
    result = golden()
    again = compare_result(result)
    assert [v.verdict for v in again] == [p.verdict for p in result.pairs] == ["identical", "identical", "unsupported", "unsupported"]
    for fresh, stored in zip(again, result.pairs, strict=True):
        assert json.loads(json.dumps(fresh.details)) == stored.details
        assert fresh.explanation[1:] == stored.explanation[1:]


def test_one_ulp_nudge_on_one_libtorch_is_diverged_under_the_strict_policy(python: Cells, tmp_path: Path) -> None:
    """One weight moved by one ULP, one libtorch on CPU: ``diverged`` (identity is the truth), naming layer1.weight at (3, 5)."""
    twin = twin_cell(python["default"], tmp_path, edit=nudge_one_ulp("layer1.weight", (3, 5)))
    verdict = compare_cells(python["default"], twin)
    assert verdict.verdict == "diverged" and not verdict.ok, verdict.explain()
    assert verdict.details["identity_required"] is True and verdict.details["mismatches"] == []
    assert verdict.details["judging"] == "strict"
    weights = verdict.details["weights"]
    assert weights["worst_tensor"] == "layer1.weight"
    assert weights["tensors"]["layer1.weight"]["max_ulps"] == 1
    assert weights["tensors"]["layer1.weight"]["worst_index"] == [3, 5]
    assert "not bitwise identical where identity is expected (default on cpu, both on libtorch" in verdict.summary
    assert "worst tensor layer1.weight (rel L2" in verdict.summary and "1 ULP)" in verdict.summary
    assert "layer1.weight: max |Δ|" in verdict.explain() and "at (3, 5)" in verdict.explain()
    assert "even though every difference is inside the tolerance" in verdict.explain()


def test_one_ulp_nudge_is_within_tolerance_when_asked_for_tolerance_only(python: Cells, tmp_path: Path) -> None:
    """``tolerance_only``: the same nudge is ``within_tolerance``; the summary names the tolerance and the share of it used."""
    twin = twin_cell(python["default"], tmp_path, edit=nudge_one_ulp("layer1.weight", (3, 5)))
    verdict = compare_cells(python["default"], twin, judging="tolerance_only")
    assert verdict.verdict == "within_tolerance", verdict.explain()
    assert verdict.details["expected_identical"] is True and verdict.details["identity_required"] is False
    assert "worst tensor layer1.weight" in verdict.summary and "1 ULP" in verdict.summary
    # why a within_tolerance verdict passed: the criterion it was held to, and how much of it was used
    rel = verdict.details["weights"]["tensors"]["layer1.weight"]["rel_l2"]
    share = rel / verdict.details["tolerance"]["weight_rtol"]
    assert verdict.cause == (
        f"losses bitwise equal; worst tensor layer1.weight (rel L2 {rel:.2e}, 1 ULP), {share * 100:.3g}% of its tolerance "
        f"(rel L2 <= {verdict.details['tolerance']['weight_rtol']:.2e})"
    )
    assert "expected bitwise identical (default on cpu, both frontends on libtorch" in verdict.explain()


@pytest.mark.parametrize("mode", ["autocast", "autocast_scaler_clip"])
def test_every_mode_is_held_to_identity_on_one_libtorch(python: Cells, tmp_path: Path, mode: str) -> None:
    """Autocast and scaler modes on one libtorch on CPU are expected bitwise identical too: one ULP is ``diverged``."""
    twin = twin_cell(python[mode], tmp_path, edit=nudge_one_ulp("layer0.bias", (7,)))
    verdict = compare_cells(python[mode], twin)
    assert verdict.verdict == "diverged", verdict.explain()
    assert verdict.details["weights"]["tensors"]["layer0.bias"]["worst_index"] == [7]


def test_one_ulp_nudge_across_libtorch_versions_is_within_tolerance(python: Cells, tmp_path: Path) -> None:
    """With different libtorch versions identity is not expected: one ULP is ``within_tolerance``, with no identity note."""
    twin = twin_cell(python["autocast"], tmp_path, edit=nudge_one_ulp("layer0.bias", (7,)), libtorch_version="2.12.0")
    verdict = compare_cells(python["autocast"], twin)
    assert verdict.verdict == "within_tolerance", verdict.explain()
    assert verdict.details["expected_identical"] is False
    assert "expected bitwise identical" not in verdict.explain()
    assert "note: libtorch differs (python 2.13.0, r 2.12.0)" in verdict.explain()


def test_an_unknown_judging_policy_is_refused(python: Cells, tmp_path: Path) -> None:
    """A judging policy other than strict or tolerance_only raises UsageError naming both."""
    with pytest.raises(UsageError, match="judging must be one of 'strict', 'tolerance_only', got 'lenient'"):
        compare_cells(python["default"], twin_cell(python["default"], tmp_path), judging="lenient")


def test_loss_trajectory_split_at_step_k_diverges_from_k(python: Cells, tmp_path: Path) -> None:
    """Losses that jump by 1.0 from step 5 on are ``diverged`` with first step 5 and 3 of 8 steps beyond tolerance."""
    cell = python["autocast"]
    assert cell.record is not None
    twin = twin_cell(cell, tmp_path, losses=split_losses(cell.record, 5, 1.0))
    verdict = compare_cells(cell, twin)
    assert verdict.verdict == "diverged"
    losses = verdict.details["losses"]
    assert losses["first_beyond_tolerance_step"] == 5 and losses["first_difference_step"] == 5
    assert losses["steps_beyond_tolerance"] == 3
    assert losses["max_abs"] == pytest.approx(1.0, abs=1e-6)
    assert "losses split at step 5" in verdict.summary and "final weights bitwise equal" in verdict.summary
    k5 = cell.record.losses[5]
    assert k5 is not None
    assert f"losses diverge from step 5: python {k5:.7g} vs r {k5 + 1.0:.7g}" in verdict.explain()


def test_a_loss_difference_inside_the_tolerance_is_within(python: Cells, tmp_path: Path) -> None:
    """Tolerance only: a relative loss change of 1e-5 from step 4 (tolerance 2.4e-4 in bf16) is within, first difference at 4."""
    cell = python["autocast"]
    assert cell.record is not None
    losses = [v * (1 + 1e-5) if i >= 4 and v is not None else v for i, v in enumerate(cell.record.losses)]
    twin = twin_cell(cell, tmp_path, losses=losses)
    verdict = compare_cells(cell, twin, judging="tolerance_only")
    assert verdict.verdict == "within_tolerance", verdict.explain()
    assert verdict.cause.startswith(f"max loss |Δ| {verdict.details['losses']['max_abs']:.2e}, ")
    assert "of the loss tolerance (rtol 2.44e-04) at step" in verdict.cause and verdict.cause.endswith("final weights bitwise equal")
    strict = compare_cells(cell, twin)
    assert strict.verdict == "diverged" and "losses first differ at step 4" in strict.summary
    assert verdict.details["losses"]["first_difference_step"] == 4
    assert verdict.details["losses"]["first_beyond_tolerance_step"] is None


def test_one_extra_skipped_step_diverges_naming_the_step_and_both_scales(python: Cells, tmp_path: Path) -> None:
    """An extra skip at step 5 is ``diverged``, with step 5 and both frontends' scales at that step named."""
    cell = python["autocast_scaler"]
    assert cell.record is not None and cell.record.loss_scale is not None and cell.record.skipped is not None
    twin = twin_cell(cell, tmp_path, **extra_skip(cell.record, 5))
    verdict = compare_cells(cell, twin)
    assert verdict.verdict == "diverged"
    scale = cell.record.loss_scale[5]
    assert f"loss scale differs first at step 5: python {scale:.9g} vs r {scale / 2:.9g}" in verdict.summary
    assert "skipped steps differ first at step 5: python not skipped vs r skipped" in verdict.explain()
    skipped = [i for i, s in enumerate(cell.record.skipped) if s]
    assert f"python skipped {skipped}, r skipped {sorted([*skipped, 5])}" in verdict.explain()
    assert verdict.details["scaler"]["skipped"] == {"equal": False, "first_difference_step": 5, "steps_differing": 1}


def test_a_scale_history_on_one_side_only_diverges(python: Cells, tmp_path: Path) -> None:
    """A twin that recorded no loss-scale history where Python did is ``diverged``, naming who recorded one."""
    twin = twin_cell(python["autocast_scaler"], tmp_path, loss_scale=None)
    verdict = compare_cells(python["autocast_scaler"], twin)
    assert verdict.verdict == "diverged"
    assert "loss scale: python recorded a history, r none" in verdict.summary


def test_a_different_output_dtype_diverges_naming_the_dtypes(python: Cells, tmp_path: Path) -> None:
    """A twin whose model output stayed float32 under autocast is ``diverged`` and names both dtypes."""
    cell = python["autocast"]
    verdict = compare_cells(cell, twin_cell(cell, tmp_path, output_dtype="float32"))
    assert verdict.verdict == "diverged"
    assert "output_dtype inside autocast differs: python bfloat16, r float32" in verdict.summary
    assert verdict.details["dtypes"]["output_dtype"] == ["bfloat16", "float32"]


def test_weights_beyond_tolerance_name_the_worst_tensor(python: Cells, tmp_path: Path) -> None:
    """Scaling layer1.weight by 1% (rel L2 0.01/1.01 > 4.9e-4) is ``diverged`` with layer1.weight as the worst tensor."""

    def scale(weights: dict[str, np.ndarray]) -> None:
        weights["layer1.weight"] *= np.float32(1.01)

    verdict = compare_cells(python["autocast"], twin_cell(python["autocast"], tmp_path, edit=scale))
    assert verdict.verdict == "diverged"
    assert verdict.details["weights"]["worst_tensor"] == "layer1.weight"
    assert verdict.details["weights"]["tensors"]["layer1.weight"]["rel_l2"] == pytest.approx(0.01 / 1.01, rel=1e-4)
    assert "worst tensor layer1.weight (rel L2 9.90e-03, " in verdict.summary
    assert "layer1.weight: max |Δ|" in verdict.explain() and "beyond tolerance" in verdict.explain()


def test_a_missing_tensor_a_shape_and_a_dtype_are_each_a_mismatch(python: Cells, tmp_path: Path) -> None:
    """A tensor one side lacks, one of another shape and one stored as float64 are all listed, and the pair is not identical."""

    def mangle(weights: dict[str, np.ndarray]) -> None:
        del weights["layer1.bias"]
        weights["layer0.bias"] = np.zeros(3, np.float32)
        weights["layer0.weight"] = weights["layer0.weight"].astype(np.float64)

    verdict = compare_cells(python["default"], twin_cell(python["default"], tmp_path, edit=mangle), judging="tolerance_only")
    assert verdict.verdict == "diverged" and verdict.details["identical"] is False
    assert verdict.details["mismatches"] == [
        "final weights: r has no tensor layer1.bias",
        "layer0.bias: shape python [32] vs r [3]",
        "layer0.weight: dtype python float32 vs r float64 (the contract says float32)",
    ]
    assert verdict.cause.startswith("final weights: r has no tensor layer1.bias")


def test_a_different_step_count_is_a_mismatch_and_not_identical(python: Cells, tmp_path: Path) -> None:
    """A twin with one loss fewer is ``diverged`` and not identical (the first seven steps are equal, the counts are not)."""
    cell = python["default"]
    assert cell.record is not None
    verdict = compare_cells(cell, twin_cell(cell, tmp_path, losses=cell.record.losses[:-1]))
    assert verdict.verdict == "diverged" and verdict.details["identical"] is False
    assert verdict.cause.startswith("step count differs: python recorded 8 losses, r 7; final weights bitwise equal")
    assert "MISMATCH step count differs: python recorded 8 losses, r 7; compared the first 7" in verdict.explain()


def test_every_mismatch_is_listed_not_only_the_first(python: Cells, tmp_path: Path) -> None:
    """Compare first, judge once: a loss split, a dtype change and a scale change all appear in one verdict."""
    cell = python["autocast_scaler"]
    assert cell.record is not None
    changes = extra_skip(cell.record, 6) | {"losses": split_losses(cell.record, 3), "loss_dtype": "bfloat16"}
    verdict = compare_cells(cell, twin_cell(cell, tmp_path, **changes))
    mismatches = verdict.details["mismatches"]
    assert verdict.verdict == "diverged"
    assert [m.split(" ")[0] for m in mismatches] == ["losses", "loss", "skipped", "loss_dtype"]
    assert all(f"MISMATCH {m}" in verdict.explain() for m in mismatches)


@pytest.mark.parametrize(
    ("status", "verdict"),
    [("unsupported", "unsupported"), ("error", "error"), ("numerical_failure", "error"), ("skipped", "skipped")],
)
def test_a_side_that_did_not_run_gives_its_status_and_reason(python: Cells, tmp_path: Path, status: str, verdict: str) -> None:
    """A side that is unsupported, failed or skipped decides the verdict, and its own reason is carried."""
    reason = f"the r side says {status} because of reasons"
    twin = with_status(twin_cell(python["autocast_scaler_clip"], tmp_path), status, reason)
    judged = compare_cells(python["autocast_scaler_clip"], twin)
    assert judged.verdict == verdict
    assert judged.summary.endswith(f"{verdict} — r {status}: {reason}")
    assert judged.details["reasons"] == {"r": reason}


def test_the_worse_failure_wins_when_both_sides_failed(python: Cells, tmp_path: Path) -> None:
    """Python ``error`` and R ``skipped`` is an ``error`` pair, and both reasons are kept."""
    broken = with_status(python["default"], "error", "python script crashed")
    twin = with_status(twin_cell(python["default"], tmp_path), "skipped", "R torch missing")
    judged = compare_cells(broken, twin)
    assert judged.verdict == "error"
    assert "python error: python script crashed" in judged.summary
    assert "r skipped: R torch missing" in judged.explain()
    assert judged.details["statuses"] == {"python": "error", "r": "skipped"}


def test_unreadable_weights_make_an_error_but_losses_are_still_compared(python: Cells, tmp_path: Path) -> None:
    """A missing weights file is an ``error`` naming the file; the rest of the comparison still happens."""
    twin = twin_cell(python["default"], tmp_path, weights_path=str(tmp_path / "gone.safetensors"))
    judged = compare_cells(python["default"], twin)
    assert judged.verdict == "error"
    assert f"cannot read r's final weights {tmp_path / 'gone.safetensors'}" in judged.summary
    assert judged.details["losses"]["first_difference_step"] is None
    assert "weights" not in judged.details and judged.details["problems"] == [judged.cause]


def test_the_side_further_from_float64_is_named(python: Cells, tmp_path: Path) -> None:
    """With r's recorded float64 distance tripled, the explanation blames r by a factor of 3."""
    cell = python["autocast"]
    assert cell.reference_distance is not None
    tripled = ReferenceDistance(*(3 * (v or 0.0) for v in (cell.reference_distance.max_rel_loss_error,
                                                            cell.reference_distance.final_weights_rel_error)))
    twin = dataclasses.replace(twin_cell(cell, tmp_path, edit=nudge_one_ulp("layer1.bias", (0,))), reference_distance=tripled)
    judged = compare_cells(cell, twin)
    assert judged.details["further_from_float64"] == "r"
    assert "r is further from float64 (3x python's weight error)" in judged.explain()
    assert "the weight gap between them" in judged.explain()


def test_a_missing_float64_distance_is_said(python: Cells, tmp_path: Path) -> None:
    """Without r's float64 distance the explanation says the difference cannot be blamed on one side."""
    twin = dataclasses.replace(twin_cell(python["default"], tmp_path), reference_distance=None)
    explained = compare_cells(python["default"], twin).explain()
    assert "float64 distance not recorded for r: the difference cannot be blamed on one side" in explained


def _paired(result: MatrixResult, twins: dict[str, CellResult]) -> MatrixResult:
    """``result``'s Python cells with the given twins (by pair) as their r cells, the golden r cells dropped."""
    python = tuple(c for c in result.cells if c.frontend == "python")
    cells = [c for p in python for c in (p, twins.get(p.pair)) if c is not None]
    return dataclasses.replace(result, cells=tuple(cells))


def test_compare_result_orders_python_first_and_ignores_lone_cells(python: Cells, tmp_path: Path) -> None:
    """Pairs come out python-then-r whatever the cell order; a pair with one cell only is left out."""
    twins = {c.pair: twin_cell(c, tmp_path) for c in python.values() if c.mode in ("default", "autocast")}
    combined = _paired(golden(), twins)
    verdicts = compare_result(dataclasses.replace(combined, cells=combined.cells[::-1]))
    assert {v.pair for v in verdicts} == {"with_autocast-default-sgd-cpu", "with_autocast-autocast-sgd-cpu"}
    assert {v.optimizer for v in verdicts} == {"sgd"}
    assert all(v.frontends == ("python", "r") and v.verdict == "identical" for v in verdicts)
    assert all(v.details["tolerance"]["expected_identical"] is True for v in verdicts)


def test_compare_result_judges_as_the_run_did_unless_told_otherwise(python: Cells, tmp_path: Path) -> None:
    """A result run under tolerance_only is judged so by default; an explicit policy overrides the recorded one."""
    cell = python["default"]
    combined = _paired(golden(), {cell.pair: twin_cell(cell, tmp_path, edit=nudge_one_ulp("layer1.bias", (0,)))})
    assert [v.verdict for v in compare_result(combined)] == ["diverged"]  # the golden run was strict
    combined = dataclasses.replace(combined, judging="tolerance_only")
    assert [v.verdict for v in compare_result(combined)] == ["within_tolerance"]
    assert [v.verdict for v in compare_result(combined, "strict")] == ["diverged"]


def test_a_python_only_result_has_no_pairs() -> None:
    """A result from one frontend gives no verdicts: there is nothing to compare."""
    result = golden()
    assert compare_result(dataclasses.replace(result, cells=tuple(c for c in result.cells if c.frontend == "python"))) == []


def test_cells_of_different_pairs_are_refused(python: Cells, tmp_path: Path) -> None:
    """Comparing cells of two different pairs (or a cell with itself) is a programming error."""
    with pytest.raises(ValueError, match="are not two frontends of one pair"):
        compare_cells(python["default"], twin_cell(python["autocast"], tmp_path))
    with pytest.raises(ValueError, match="are not two frontends of one pair"):
        compare_cells(python["default"], python["default"])


def test_the_judge_reads_typed_fields_not_text(python: Cells, tmp_path: Path) -> None:
    """The same findings judge ``diverged`` under strict and ``within_tolerance`` under tolerance_only, and say which rule decided."""
    from harness.judge.findings import find_pair
    from harness.judge.tolerances import tolerance_for

    a, b = python["default"], twin_cell(python["default"], tmp_path, edit=nudge_one_ulp("layer0.weight", (0, 0)))
    assert a.record is not None and b.record is not None
    tolerance = tolerance_for(mode_of("with_autocast", "default"), "cpu", "bfloat16", 8, True)
    found = find_pair(("python", "r"), "default", "cpu", a.record, b.record, tolerance,
                      (a.reference_distance, b.reference_distance))
    assert (found.identical, found.beyond, found.weights.worst and found.weights.worst.name) == (False, False, "layer0.weight")
    strict, lenient = judge(found, "strict"), judge(found, "tolerance_only")
    assert (strict.verdict, strict.identity_missed) == ("diverged", True)
    assert (lenient.verdict, lenient.identity_required, lenient.identity_missed) == ("within_tolerance", False, False)


def test_verdict_is_plain_data_and_explains_every_line(python: Cells, tmp_path: Path) -> None:
    """``to_json`` survives JSON, and ``explain`` prints the summary then every finding, indented."""
    twin = twin_cell(python["default"], tmp_path, edit=nudge_one_ulp("layer0.weight", (0, 0)))
    verdict = compare_cells(python["default"], twin, judging="tolerance_only")
    data = json.loads(json.dumps(verdict.to_json()))
    assert data["verdict"] == "within_tolerance" and data["frontends"] == ["python", "r"]
    assert data["details"]["weights"]["tensors"]["layer0.weight"]["worst_index"] == [0, 0]
    lines = verdict.explain().splitlines()
    assert lines[0] == verdict.summary and len(lines) == len(verdict.explanation)
    assert all(line.startswith("  ") for line in lines[1:])
    assert verdict.verdict in VERDICTS and PairVerdict.from_json(data) == verdict


def test_a_nan_loss_on_one_side_is_beyond_any_tolerance(python: Cells, tmp_path: Path) -> None:
    """A loss that is NaN on one side only diverges at that step (NaN on both sides would be equal)."""
    cell = python["default"]
    assert cell.record is not None
    losses = [None if i == 2 else v for i, v in enumerate(cell.record.losses)]
    verdict = compare_cells(cell, with_record(twin_cell(cell, tmp_path), losses=losses), judging="tolerance_only")
    assert verdict.verdict == "diverged" and verdict.details["losses"]["first_beyond_tolerance_step"] == 2
    both_nan = with_record(twin_cell(cell, tmp_path / "b"), losses=losses)
    assert compare_cells(with_record(cell, losses=losses), both_nan).verdict == "identical"


def test_the_golden_result_is_unchanged_by_replace_cells(tmp_path: Path) -> None:
    """``replace_cells`` swaps a cell by id and keeps the order (a guard on the helper the report tests use)."""
    result = golden()
    first = result.cells[0]
    swapped = replace_cells(result, {first.id: with_status(first, "error", "boom")})
    assert [c.id for c in swapped.cells] == [c.id for c in result.cells] and swapped.cells[0].status == "error"


@pytest.mark.parametrize("tolerance_only", [False, True])
def test_a_tensor_of_another_shape_is_named_by_its_shapes_not_minus_one_ulps(python: Cells, tmp_path: Path, tolerance_only: bool) -> None:
    """A final-weights tensor one element short on one side: the cause names both shapes, never "-1 ULPs" (weight_findings' mark)."""
    def drop_last(weights: dict[str, np.ndarray]) -> None:
        weights["layer0.bias"] = weights["layer0.bias"][:-1].copy()

    twin = twin_cell(python["autocast"], tmp_path, edit=drop_last)
    verdict = compare_result(replace_cells(golden(), {twin.id: twin}), "tolerance_only" if tolerance_only else "strict")[1]
    assert verdict.mode == "autocast" and verdict.verdict == "diverged"
    assert "worst tensor layer0.bias (shapes [32] vs [31], no distance)" in verdict.cause
    assert "-1 ULP" not in verdict.explain()
