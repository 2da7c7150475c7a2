"""Pair verdicts from recorded results, against a fake "r" frontend with exactly one planted difference."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.compare import VERDICTS, compare_cells, compare_result, ulp_distance
from harness.errors import UsageError
from harness.model import PairVerdict
from harness.spec import MODES
from tests.fake_results import build_python_result, extra_skip, nudge_one_ulp, pair_result, split_losses, twin_cell, with_status

Cells = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real Python result (tiny preset, every mode), built once for this module."""
    return build_python_result(tmp_path_factory.mktemp("compare"))


@pytest.fixture(scope="module")
def python(result: dict[str, Any]) -> Cells:
    """The Python cells by mode."""
    return {c["mode"]: c for c in result["cells"]}


def test_exact_copy_is_identical(python: Cells, tmp_path: Path) -> None:
    """A twin with the same record and the same weights is ``identical`` in every mode."""
    for mode in MODES:
        verdict = compare_cells(python[mode], twin_cell(python[mode], tmp_path))
        assert verdict.verdict == "identical", verdict.explain()
        assert verdict.frontends == ("python", "r")
        assert verdict.details["identical"] is True and verdict.details["mismatches"] == []
        assert "bitwise equal at all 20 steps" in verdict.explain()
        assert "all 6 tensors bitwise equal" in verdict.explain()


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
    """``tolerance_only``: the same one-ULP nudge is ``within_tolerance``, and the missed identity is noted."""
    twin = twin_cell(python["default"], tmp_path, edit=nudge_one_ulp("layer1.weight", (3, 5)))
    verdict = compare_cells(python["default"], twin, judging="tolerance_only")
    assert verdict.verdict == "within_tolerance", verdict.explain()
    assert verdict.details["expected_identical"] is True and verdict.details["identity_required"] is False
    assert "worst tensor layer1.weight" in verdict.summary and "1 ULP" in verdict.summary
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
    """Losses that jump by 1.0 from step 7 on are ``diverged`` with first step 7 and 13 steps beyond tolerance."""
    cell = python["autocast"]
    twin = twin_cell(cell, tmp_path, losses=split_losses(cell["record"]["losses"], 7, 1.0))
    verdict = compare_cells(cell, twin)
    assert verdict.verdict == "diverged"
    losses = verdict.details["losses"]
    assert losses["first_beyond_tolerance_step"] == 7 and losses["first_difference_step"] == 7
    assert losses["steps_beyond_tolerance"] == 13
    assert losses["max_abs"] == pytest.approx(1.0, abs=1e-6)
    assert "losses split at step 7" in verdict.summary and "final weights bitwise equal" in verdict.summary
    k7 = cell["record"]["losses"][7]
    assert f"losses diverge from step 7: python {k7:.7g} vs r {k7 + 1.0:.7g}" in verdict.explain()


def test_a_loss_difference_inside_the_tolerance_is_within(python: Cells, tmp_path: Path) -> None:
    """Tolerance only: a relative loss change of 1e-5 from step 4 (tolerance 2.4e-4 in bf16) is within, first difference at 4."""
    cell = python["autocast"]
    losses = [v * (1 + 1e-5) if i >= 4 else v for i, v in enumerate(cell["record"]["losses"])]
    twin = twin_cell(cell, tmp_path, losses=losses)
    verdict = compare_cells(cell, twin, judging="tolerance_only")
    assert verdict.verdict == "within_tolerance", verdict.explain()
    strict = compare_cells(cell, twin)
    assert strict.verdict == "diverged" and "losses first differ at step 4" in strict.summary
    assert verdict.details["losses"]["first_difference_step"] == 4
    assert verdict.details["losses"]["first_beyond_tolerance_step"] is None


def test_one_extra_skipped_step_diverges_naming_the_step_and_both_scales(python: Cells, tmp_path: Path) -> None:
    """An extra skip at step 5 is ``diverged``, with step 5 and both frontends' scales at that step named."""
    cell = python["autocast_scaler"]
    twin = twin_cell(cell, tmp_path, **extra_skip(cell["record"], 5))
    verdict = compare_cells(cell, twin)
    assert verdict.verdict == "diverged"
    scale = cell["record"]["loss_scale"][5]
    assert f"loss scale differs first at step 5: python {scale:.9g} vs r {scale / 2:.9g}" in verdict.summary
    assert "skipped steps differ first at step 5: python not skipped vs r skipped" in verdict.explain()
    assert "python skipped [], r skipped [5]" in verdict.explain()
    assert verdict.details["scaler"]["skipped"] == {"equal": False, "first_difference_step": 5, "steps_differing": 1}


def test_a_different_output_dtype_diverges_naming_the_dtypes(python: Cells, tmp_path: Path) -> None:
    """A twin whose model output stayed float32 under autocast is ``diverged`` and names both dtypes."""
    cell = python["autocast"]
    verdict = compare_cells(cell, twin_cell(cell, tmp_path, output_dtype="float32"))
    assert verdict.verdict == "diverged"
    assert "output_dtype inside autocast differs: python bfloat16, r float32" in verdict.summary
    assert verdict.details["dtypes"]["output_dtype"] == ["bfloat16", "float32"]


def test_weights_beyond_tolerance_name_the_worst_tensor(python: Cells, tmp_path: Path) -> None:
    """Scaling layer2.weight by 1% (rel L2 0.01/1.01 > 4.9e-4) is ``diverged`` with layer2.weight as the worst tensor."""

    def scale(weights: dict[str, np.ndarray]) -> None:
        weights["layer2.weight"] *= np.float32(1.01)

    verdict = compare_cells(python["autocast"], twin_cell(python["autocast"], tmp_path, edit=scale))
    assert verdict.verdict == "diverged"
    assert verdict.details["weights"]["worst_tensor"] == "layer2.weight"
    assert verdict.details["weights"]["tensors"]["layer2.weight"]["rel_l2"] == pytest.approx(0.01 / 1.01, rel=1e-4)
    assert "worst tensor layer2.weight (rel L2 9.90e-03, " in verdict.summary
    assert "layer2.weight: max |Δ|" in verdict.explain() and "beyond tolerance" in verdict.explain()


def test_every_mismatch_is_listed_not_only_the_first(python: Cells, tmp_path: Path) -> None:
    """Compare first, judge once: a loss split, a dtype change and a scale change all appear in one verdict."""
    cell = python["autocast_scaler"]
    changes = extra_skip(cell["record"], 9) | {"losses": split_losses(cell["record"]["losses"], 3), "loss_dtype": "bfloat16"}
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


def test_unreadable_weights_make_an_error_but_losses_are_still_compared(python: Cells, tmp_path: Path) -> None:
    """A missing weights file is an ``error`` naming the file; the rest of the comparison still happens."""
    twin = twin_cell(python["default"], tmp_path)
    twin["record"]["weights_path"] = str(tmp_path / "gone.safetensors")
    judged = compare_cells(python["default"], twin)
    assert judged.verdict == "error"
    assert f"cannot read r's final weights {tmp_path / 'gone.safetensors'}" in judged.summary
    assert judged.details["losses"]["first_difference_step"] is None


def test_the_side_further_from_float64_is_named(python: Cells, tmp_path: Path) -> None:
    """With r's recorded float64 distance tripled, the explanation blames r by a factor of 3."""
    twin = twin_cell(python["autocast"], tmp_path, edit=nudge_one_ulp("layer2.bias", (0,)))
    twin["reference_distance"] = {k: 3 * v for k, v in python["autocast"]["reference_distance"].items()}
    judged = compare_cells(python["autocast"], twin)
    assert judged.details["further_from_float64"] == "r"
    assert "r is further from float64 (3x python's weight error)" in judged.explain()


def test_compare_result_orders_python_first_and_ignores_lone_cells(result: dict[str, Any], tmp_path: Path) -> None:
    """Pairs come out python-then-r whatever the cell order; a pair with one cell only is left out."""
    twins = {c["pair"]: twin_cell(c, tmp_path) for c in result["cells"] if c["mode"] in ("default", "autocast")}
    combined = pair_result(result, twins)
    combined["cells"].reverse()
    verdicts = compare_result(combined)
    assert {v.pair for v in verdicts} == {"with_autocast-default-cpu", "with_autocast-autocast-cpu"}
    assert all(v.frontends == ("python", "r") and v.verdict == "identical" for v in verdicts)
    assert all(v.details["tolerance"]["expected_identical"] is True for v in verdicts)


def test_compare_result_judges_as_the_run_did_unless_told_otherwise(result: dict[str, Any], tmp_path: Path) -> None:
    """A result run under tolerance_only is judged so by default; an explicit policy overrides the recorded one."""
    cell = next(c for c in result["cells"] if c["mode"] == "default")
    combined = pair_result(result, {cell["pair"]: twin_cell(cell, tmp_path, edit=nudge_one_ulp("layer2.bias", (0,)))})
    assert [v.verdict for v in compare_result(combined)] == ["diverged"]  # no field: strict
    combined["judging"] = "tolerance_only"
    assert [v.verdict for v in compare_result(combined)] == ["within_tolerance"]
    assert [v.verdict for v in compare_result(combined, "strict")] == ["diverged"]


def test_a_python_only_result_has_no_pairs(result: dict[str, Any]) -> None:
    """A result from one frontend gives no verdicts: there is nothing to compare."""
    assert compare_result(result) == []


def test_cells_of_different_pairs_are_refused(python: Cells, tmp_path: Path) -> None:
    """Comparing cells of two different pairs (or a cell with itself) is a programming error."""
    with pytest.raises(ValueError, match="are not two frontends of one pair"):
        compare_cells(python["default"], twin_cell(python["autocast"], tmp_path))
    with pytest.raises(ValueError, match="are not two frontends of one pair"):
        compare_cells(python["default"], python["default"])


def test_a_clean_rerun_is_never_diverged(python: Cells, tmp_path: Path) -> None:
    """Running the same spec again (as the fake second frontend) agrees with the first run in every mode."""
    rerun = {c["mode"]: c for c in build_python_result(tmp_path / "rerun")["cells"]}
    for mode in MODES:
        verdict = compare_cells(python[mode], twin_cell(rerun[mode], tmp_path / "twins"))
        assert verdict.verdict in ("identical", "within_tolerance"), verdict.explain()


def test_verdict_is_plain_data_and_explains_every_line(python: Cells, tmp_path: Path) -> None:
    """``to_dict`` survives JSON, and ``explain`` prints the summary then every finding, indented."""
    twin = twin_cell(python["default"], tmp_path, edit=nudge_one_ulp("layer0.weight", (0, 0)))
    verdict = compare_cells(python["default"], twin, judging="tolerance_only")
    data = json.loads(json.dumps(verdict.to_dict()))
    assert data["verdict"] == "within_tolerance" and data["frontends"] == ["python", "r"]
    assert data["details"]["weights"]["tensors"]["layer0.weight"]["worst_index"] == [0, 0]
    lines = verdict.explain().splitlines()
    assert lines[0] == verdict.summary and len(lines) == len(verdict.explanation)
    assert all(line.startswith("  ") for line in lines[1:])
    assert verdict.verdict in VERDICTS and isinstance(copy.copy(verdict), PairVerdict)


def test_ulp_distance_is_order_preserving_across_zero() -> None:
    """Neighbouring floats are 1 ULP apart, ±0 are equal, the two smallest subnormals of each sign are 2 apart."""
    tiny = np.float32(np.nextafter(np.float32(0), np.float32(1)))
    a = np.array([1.0, 0.0, -tiny, -0.0, np.nan, np.nan, -1.0], dtype=np.float32)
    b = np.array([np.nextafter(np.float32(1), np.float32(2)), tiny, tiny, 0.0, np.nan, 1.0, -2.0], dtype=np.float32)
    assert ulp_distance(a, b).tolist() == [1, 1, 2, 0, 0, np.iinfo(np.int64).max, 1 << 23]
