"""Parity of a pair of cells (same script, mode and device; two frontends): findings, then one judgement.

A final loss alone is a weak signal, so everything a run records is compared (:mod:`harness.findings`):
the loss at every step, every final-weights tensor (largest difference, relative L2 error, the worst
element, float32 ULPs), the loss-scale history and skipped steps, the dtypes inside the autocast region,
and each side's distance from the float64 reference (so a difference can be blamed on the side that moved).

Compare first, then judge once (:func:`judge`, from the findings' typed fields and the judging policy),
then say why (:mod:`harness.explain`): every mismatch goes into the explanation; nothing stops at the first.
"""

from __future__ import annotations

from typing import Any

from harness.errors import SpecError
from harness.explain import Judgement, explain_pair, headline
from harness.findings import PairFindings, StatusFindings, find_pair
from harness.matrix import FRONTEND_ORDER
from harness.model import CellResult, MatrixResult
from harness.tolerances import DEFAULT_JUDGING, Tolerance, check_judging, tolerance_for
from harness.verdicts import PairVerdict

__all__ = ["VERDICTS", "compare_cells", "compare_result", "judge", "judge_statuses"]

#: ``identical``: losses, weights and scales bitwise equal. ``within_tolerance``: not identical, every
#: difference inside the :mod:`harness.tolerances` policy, and identity not required. ``diverged``: a
#: real difference (the first step and the worst tensor are named): beyond tolerance, or, under the
#: ``strict`` policy, not bitwise identical where identity is expected (one libtorch, CPU).
#: ``unsupported`` / ``error`` / ``skipped``: a side did not give
#: a comparable run (its reason is carried); ``error`` also covers a numerical failure and unreadable weights.
VERDICTS = ("identical", "within_tolerance", "diverged", "unsupported", "error", "skipped")
#: Which non-ok status decides the verdict when a side did not run: the worst of the two sides first.
_STATUS_RANK = ("error", "numerical_failure", "unsupported", "skipped")
_STATUS_VERDICT = {"error": "error", "numerical_failure": "error", "unsupported": "unsupported", "skipped": "skipped"}


def compare_result(result: MatrixResult, judging: str | None = None) -> list[PairVerdict]:
    """A verdict for every pair of ``result`` (frontends in :data:`harness.matrix.FRONTEND_ORDER`: python, then r).

    ``judging`` (``strict`` or ``tolerance_only``) defaults to the policy the result was run under
    (its ``judging`` field), so a report judges a result as its run did.
    A pair with one cell (one frontend was not asked for) is left out: there is nothing to compare.

    Raises:
        UsageError: an unknown judging policy.
    """
    judging = check_judging(judging or result.judging or DEFAULT_JUDGING)
    pairs: dict[str, list[CellResult]] = {}
    for cell in result.cells:
        pairs.setdefault(cell.pair, []).append(cell)
    verdicts = []
    for cells in pairs.values():
        cells = sorted(cells, key=_frontend_rank)
        for other in cells[1:]:
            tolerance = None
            if cells[0].ok and other.ok and result.spec.amp_dtype:
                same = _same_libtorch(cells[0], other)
                tolerance = tolerance_for(cells[0].mode, cells[0].device, result.spec.amp_dtype, result.steps, same)
            verdicts.append(compare_cells(cells[0], other, tolerance, judging))
    return verdicts


def compare_cells(
    a: CellResult, b: CellResult, tolerance: Tolerance | None = None, judging: str = DEFAULT_JUDGING
) -> PairVerdict:
    """Judge frontend ``a`` against frontend ``b`` on one cell of the matrix.

    ``tolerance`` defaults to the policy for the cells' mode, device, AMP dtype and step count.
    ``judging``: ``strict`` fails a pair that is not bitwise identical where the tolerance expects
    identity; ``tolerance_only`` lets the tolerance decide (see :mod:`harness.tolerances`).

    Raises:
        ValueError: ``a`` and ``b`` are not two frontends of one pair.
        UsageError: an unknown judging policy.
    """
    check_judging(judging)
    if a.pair != b.pair or a.frontend == b.frontend:
        raise ValueError(f"cells {a.id!r} and {b.id!r} are not two frontends of one pair")
    names = (a.frontend, b.frontend)
    statuses = StatusFindings(
        (str(a.status), str(b.status)), (a.reason, b.reason), (not a.ok or a.record is None, not b.ok or b.record is None),
    )
    if any(statuses.failed):
        return _status_verdict(a, names, statuses)
    ra, rb = a.record, b.record
    assert ra is not None and rb is not None
    try:
        steps = max(len(ra.losses), len(rb.losses), 1)
        tol = tolerance or tolerance_for(a.mode, a.device, str(ra.amp_dtype), steps, _same_libtorch(a, b))
    except SpecError as err:
        return _verdict(a, names, "error", [headline(a.pair, names, "error", f"no tolerance for this record: {err}")], {})
    found = find_pair(names, a.mode, a.device, ra, rb, tol, (a.reference_distance, b.reference_distance))
    judged = judge(found, judging)
    return _verdict(a, names, judged.verdict, *explain_pair(a.pair, found, judged))


def judge(found: PairFindings, judging: str) -> Judgement:
    """The verdict on two ok runs, from the findings' typed fields and the judging policy.

    ``diverged``: a check failed outright (beyond tolerance, or a history, dtype or shape that must be
    equal is not), or ``strict`` requires bitwise identity here and the weights could be read and are
    not identical. ``error``: a weights file could not be read. ``identical`` / ``within_tolerance``
    otherwise.
    """
    identity_required = judging == "strict" and found.tolerance.expected_identical
    identity_missed = identity_required and not found.identical and found.weights.readable
    if found.beyond or identity_missed:
        verdict = "diverged"
    elif not found.weights.readable:
        verdict = "error"
    else:
        verdict = "identical" if found.identical else "within_tolerance"
    return Judgement(verdict, judging, identity_required, identity_missed)


def judge_statuses(statuses: StatusFindings) -> str:
    """The verdict of a pair a side of which gave no comparable run: the worse side's status decides."""
    failed = [s for s, f in zip(statuses.statuses, statuses.failed, strict=True) if f]
    worst = min(failed, key=lambda s: _STATUS_RANK.index(s) if s in _STATUS_RANK else 0)
    return _STATUS_VERDICT.get(worst, "error")


def _status_verdict(a: CellResult, names: tuple[str, str], statuses: StatusFindings) -> PairVerdict:
    verdict = judge_statuses(statuses)
    sides = [i for i in (0, 1) if statuses.failed[i]]
    lines = [f"{names[i]} {statuses.statuses[i]}: {statuses.reasons[i] or 'no run record'}" for i in sides]
    details = {
        "statuses": dict(zip(names, statuses.statuses, strict=True)),
        "reasons": {names[i]: statuses.reasons[i] for i in sides},
    }
    return _verdict(a, names, verdict, [headline(a.pair, names, verdict, lines[0]), *lines[1:]], details)


def _verdict(a: CellResult, names: tuple[str, str], verdict: str, explanation: list[str], details: dict[str, Any]) -> PairVerdict:
    return PairVerdict(a.pair, a.script, a.mode, a.device, names, verdict, explanation, details)


def _same_libtorch(a: CellResult, b: CellResult) -> bool:
    va, vb = (c.record.libtorch_version if c.record else None for c in (a, b))
    return va is not None and va == vb


def _frontend_rank(cell: CellResult) -> tuple[int, str]:
    name = cell.frontend
    return (FRONTEND_ORDER.index(name) if name in FRONTEND_ORDER else len(FRONTEND_ORDER), name)
