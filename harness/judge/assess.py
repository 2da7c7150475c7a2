"""A result's verdicts, all judged from what it stores: each cell on its own, every pair, every performance target.

One source of truth. A result file holds facts (cells and their run records, timings, traces, the float64
reference's losses, each cell's measured distance from float64); every verdict is a function of those facts,
the judging policy and the known-differences list, and is computed here: at the end of a run
(:class:`harness.run.runner.MatrixRunner`) and again every time a result is loaded
(:func:`harness.store.result_file.load_result`). The verdicts a file holds are what its run printed, kept for
readers of the file; the harness never reads them back. Views only read a result this function returned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence, Set
from typing import Any

from harness.judge.cells import judge_cell
from harness.judge.known_differences import KnownDifference, load_known_differences
from harness.judge.pairs import compare_result
from harness.judge.resumed import resume_mismatches
from harness.judge.targets import check_targets
from harness.judge.tolerances import DEFAULT_JUDGING, check_judging
from harness.model.result import CellResult, MatrixResult
from harness.model.verdicts import CellVerdict, Outcome

__all__ = ["assess_result"]


def assess_result(result: MatrixResult, judging: str | None = None, known: Sequence[KnownDifference] | None = None) -> MatrixResult:
    """``result`` with every verdict judged again from its facts: cell verdicts, pair verdicts, performance targets.

    ``judging`` (``strict`` or ``tolerance_only``) defaults to the policy the result records, and becomes the one
    it records; ``known`` defaults to the committed known differences.

    Raises:
        UsageError: an unknown judging policy.
        KnownDifferencesError: the committed list cannot be read.
    """
    judging = check_judging(judging or result.judging or DEFAULT_JUDGING)
    # Each cell under the spec it ran (a merged GPU input's float16, a CPU input's bfloat16).
    # ... and against its own run's float64 reference (each merged input keeps its own).
    # The run's whole-matrix check (a resumed cell is bitwise its uninterrupted cell), wherever the two cells meet: in a
    # merge of the slices that ran them apart, a result loaded again. It fails the resumed cell's own verdict.
    resumed = resume_mismatches(result.cells)
    cells = tuple(dataclasses.replace(c, verdict=_resumed(judge_cell(c, result.run_of(c).spec, result.run_of(c).reference
                                                                     or result.reference), resumed.get(c.id)))
                  for c in result.cells)
    judged = dataclasses.replace(result, cells=cells, judging=judging)
    judged = dataclasses.replace(judged, pairs=tuple(compare_result(judged, judging, known)))
    judged = dataclasses.replace(judged, cells=_excused(judged, load_known_differences() if known is None else known, set(resumed)))
    return dataclasses.replace(judged, targets=tuple(check_targets(judged)))


#: The traced point of GradScaler's skip decision (what ``unscale_`` or the step's check found): a bug whose signature
#: begins there is a bug of the scaler itself, the one kind that may break GradScaler's rule (``_unexplained``).
SCALER_DECISION_POINT = "scaler.found_inf"


def _resumed(verdict: CellVerdict, mismatch: str | None) -> CellVerdict:
    """``verdict``, failed where the cell is a resumed run that is not its uninterrupted run (``mismatch`` says where)."""
    if mismatch is None:
        return verdict
    reason = mismatch if verdict.outcome != Outcome.FAIL else f"{mismatch}; {verdict.reason}"
    return dataclasses.replace(verdict, outcome=Outcome.FAIL, reason=reason)


def _excused(result: MatrixResult, known: Sequence[KnownDifference], resumed: Set[str] = frozenset()) -> tuple[CellResult, ...]:
    """The cells, with each failed own verdict that a pair's proven R torch bug explains marked ``excused`` (naming the
    pair and its entries): the bug is on record, with its reproducers; a new difference in the same cell would not be
    proven, so its pair would not be ``known_difference``. Only the bug's signature is excused (:func:`_unexplained`):
    any other failure of the cell still fails the run, and says why the bug does not cover it."""
    why = result.excused()
    entries = {k.id: k for k in known}
    cells = []
    for cell in result.cells:
        pair, verdict = why.get(cell.id), cell.verdict
        # A resumed run that is not its uninterrupted run is one binding against itself: no bug between bindings excuses it.
        if pair is not None and verdict is not None and verdict.outcome == Outcome.FAIL and cell.id not in resumed:
            bugs = list(pair.details.get("excused_by") or pair.details.get("known_difference") or ())
            unexplained = _unexplained(cell, pair.details, [entries[b] for b in bugs if b in entries])
            if unexplained is None:
                reason = f"{verdict.reason} (excused: R torch bug {', '.join(bugs)}, proven in pair {pair.pair}; docs/bugs/)"
                cell = dataclasses.replace(cell, verdict=dataclasses.replace(verdict, outcome=Outcome.EXCUSED, reason=reason))
            else:
                reason = f"{verdict.reason} (not excused by R torch bug {', '.join(bugs)}: {unexplained})"
                cell = dataclasses.replace(cell, verdict=dataclasses.replace(verdict, reason=reason))
        cells.append(cell)
    return tuple(cells)


def _unexplained(cell: CellResult, details: Mapping[str, Any], bugs: Sequence[KnownDifference]) -> str | None:
    """Why the cell's failure is more than its bugs' signature, or ``None`` where they explain all of it.

    An R torch bug in an optimizer's step or the clipping moves the losses (from the first step where it acts) and the
    final weights away from float64, never GradScaler's rule, which the scale history follows whatever the gradients
    are; only a bug of the scaler's own decision (its signature's first point is the scaler's found-inf) breaks that
    rule, and then only from the step where it acts. Any other broken scale history, or losses that part from float64
    before the bug acts, are another failure: not excused.
    """
    assert cell.verdict is not None
    scaler, float64 = cell.verdict.scaler, cell.verdict.float64
    triggers = (details.get("trace") or {}).get("triggers") or {}
    if scaler is not None and not scaler.passed:
        deciders = [k for k in bugs if k.signature.point_pattern.match(SCALER_DECISION_POINT)]
        if not deciders:
            return f"its scale history breaks GradScaler's rule at step {scaler.first_step}, which no R torch bug here touches"
        acts = [int(s) for k in deciders for s in triggers.get(k.trigger) or ()]
        if scaler.first_step is None or not acts or scaler.first_step < min(acts):
            return f"its scale history breaks GradScaler's rule at step {scaler.first_step}, before its scaler bug acts"
    if not bugs:
        return "the pair names no entry of the list that explains it"
    if float64 is not None and not float64.passed and float64.first_step_beyond is not None:
        acts = [int(s) for k in bugs for s in triggers.get(k.trigger) or ()]
        if not acts:
            return "the trace shows none of its bugs acting"
        if float64.first_step_beyond < min(acts):
            return f"its losses leave the float64 bound at step {float64.first_step_beyond}, before the bug acts (step {min(acts)})"
    return None
