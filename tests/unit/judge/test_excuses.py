"""An excuse covers only what its bug explains (issue 37): a failure outside the bug's signature fails, and an excuse never
depends on which cell is the baseline."""

from __future__ import annotations

import dataclasses

from harness.judge.assess import _excused
from harness.judge.known_differences import load_known_differences
from harness.model.result import CellResult, MatrixResult
from harness.model.verdicts import CellVerdict, Outcome, PairVerdict, ScalerCheck
from tests.twins import golden

BUG = "sgd-weight-decay-index"


def _scaler_cell() -> CellResult:
    return next(c for c in golden().cells if c.frontend == "python" and c.mode == "autocast_scaler")


def _failed(cell: CellResult, scaler_ok: bool, float64_from: int | None) -> CellResult:
    """``cell`` failing its own check: its scale history (``scaler_ok`` False) and/or its float64 check from a step."""
    verdict = cell.verdict
    assert verdict is not None and verdict.float64 is not None
    float64 = verdict.float64
    if float64_from is not None:
        float64 = dataclasses.replace(float64, passed=False, first_step_beyond=float64_from)
    scaler = ScalerCheck(scaler_ok, 20, (), None if scaler_ok else 19, None if scaler_ok else 1.0, None if scaler_ok else 2.0,
                         "follows" if scaler_ok else "breaks GradScaler's rule at step 19")
    return dataclasses.replace(cell, verdict=CellVerdict(cell.id, Outcome.FAIL, float64, scaler, reason="failed"))


def _result(cells: list[CellResult], excused_in: CellResult, acts_from: int = 0, extra: tuple[PairVerdict, ...] = ()) -> MatrixResult:
    pair = PairVerdict(excused_in.pair, excused_in.script, excused_in.mode, excused_in.device, ("r", excused_in.frontend),
                       "known_difference", ["known"], {"excused": [excused_in.id], "excused_by": [BUG], "known_difference": [BUG],
                                                       "trace": {"triggers": {"always": list(range(acts_from, 20))}}})
    return dataclasses.replace(golden(), cells=tuple(cells), pairs=(pair, *extra))


def _outcome(result: MatrixResult, cell_id: str) -> CellVerdict:
    verdict = next(c for c in _excused(result, load_known_differences()) if c.id == cell_id).verdict
    assert verdict is not None
    return verdict


def test_a_broken_scale_history_is_not_excused_by_an_optimizer_bug() -> None:
    """Defect 2: an R scale history that breaks GradScaler's rule at step 19 is not excused by SGD's weight-decay bug."""
    cell = _failed(_scaler_cell(), scaler_ok=False, float64_from=None)
    verdict = _outcome(_result([cell], cell), cell.id)
    assert verdict.outcome == "fail" and "not excused by R torch bug sgd-weight-decay-index" in verdict.reason
    assert "scale history breaks GradScaler's rule at step 19" in verdict.reason


def test_a_float64_failure_from_where_the_bug_acts_is_excused_and_one_before_it_is_not() -> None:
    """The bug's signature is the losses leaving float64 from the step it acts at; earlier, something else moved them."""
    cell = _failed(_scaler_cell(), scaler_ok=True, float64_from=5)
    assert _outcome(_result([cell], cell, acts_from=3), cell.id).outcome == "excused"
    early = _outcome(_result([cell], cell, acts_from=8), cell.id)
    assert early.outcome == "fail" and "before the bug acts (step 8)" in early.reason


def test_an_excuse_follows_an_identical_cell_whatever_the_baseline() -> None:
    """Defect 10: with `r,r2=r,python`, r2 is identical to r (the baseline): r2's failure is r's, and is excused alike."""
    r = _failed(_scaler_cell(), scaler_ok=True, float64_from=5)
    r2 = dataclasses.replace(r, cell=dataclasses.replace(r.cell, frontend="r2"), verdict=dataclasses.replace(r.verdict, cell="r2"))  # type: ignore[arg-type]
    same = PairVerdict(r.pair, r.script, r.mode, r.device, ("python", "r2"), "identical", ["identical"], {})
    result = _result([r, r2], r, extra=(same,))
    assert r2.id in result.excused() and r2.id != r.id
    assert _outcome(result, r2.id).outcome == "excused"



def test_an_excuse_follows_the_same_crash_in_the_same_language_only() -> None:
    """Defect 10, crashes: with `r,r2=r,python` both R cells stop with the same R error, a known bug's; the pair r-r2 is
    `error` (no run to compare), yet r2's crash is r's and is excused alike. Another error, or another language, is not."""
    from harness.model.result import Status

    crashed = dataclasses.replace(_scaler_cell(), cell=dataclasses.replace(_scaler_cell().cell, frontend="r"), status=Status.ERROR,
                                  reason="r: Error in if (...) : missing value where TRUE/FALSE needed", record=None,
                                  installation={"language": "r"})

    def twin(reason: str, frontend: str = "r2", language: str = "r") -> MatrixResult:
        other = dataclasses.replace(crashed, cell=dataclasses.replace(crashed.cell, frontend=frontend), reason=reason,
                                    installation={"language": language})
        both = PairVerdict(crashed.pair, crashed.script, crashed.mode, crashed.device, ("r", frontend), "error", ["error"], {})
        return _result([crashed, other], crashed, extra=(both,))

    same = twin("r2: Error in if (...) : missing value where TRUE/FALSE needed")
    assert len(same.excused()) == 2
    assert len(twin("r2: Error: another failure").excused()) == 1
    assert len(twin("py2: Error in if (...) : missing value where TRUE/FALSE needed", frontend="py2", language="python").excused()) == 1


def test_a_first_difference_in_the_record_is_not_sent_to_the_second_pass() -> None:
    """A pair that first parts at a record point (weights changed after the loop) has nothing a worker could keep: the
    second pass is not asked for it (it would wait for a point no script records)."""
    from harness.judge.pairs import needs_detail

    def verdict(point: str) -> PairVerdict:
        first = {"step": 19, "point": point, "kind": "bytes", "max_distance": None}
        return PairVerdict("p", "s", "default", "cpu", ("python", "r"), "diverged", [], {"trace": {"first_difference": first}})

    assert needs_detail(verdict("record.weights.layer0.weight")) is None
    assert needs_detail(verdict("optim.exp_avg.layer0.weight")) == (19, "optim.exp_avg.layer0.weight")


def test_a_scaler_bug_excuses_a_scale_history_only_from_where_it_acts() -> None:
    """A bug of the scaler's own decision (scaler-step-rechecks-grads: its first point is the scaler's found-inf) breaks
    GradScaler's rule where it acts: a scale history broken from that step is its signature, one broken before is not."""
    cell = _failed(_scaler_cell(), scaler_ok=False, float64_from=None)  # the rule broken at step 19
    bug = "scaler-step-rechecks-grads"

    def result(skipped_at: int) -> MatrixResult:
        pair = PairVerdict(cell.pair, cell.script, cell.mode, cell.device, ("python", cell.frontend), "known_difference",
                           ["known"], {"excused": [cell.id], "excused_by": [bug], "known_difference": [bug],
                                       "trace": {"triggers": {"step_skipped": [skipped_at]}}})
        return dataclasses.replace(golden(), cells=(cell,), pairs=(pair,))

    assert _outcome(result(9), cell.id).outcome == "excused"
    late = _outcome(result(20), cell.id)
    assert late.outcome == "fail" and "before its scaler bug acts" in late.reason
