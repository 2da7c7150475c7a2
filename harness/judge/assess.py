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
from collections.abc import Sequence

from harness.judge.cells import judge_cell
from harness.judge.known_differences import KnownDifference
from harness.judge.pairs import compare_result
from harness.judge.targets import check_targets
from harness.judge.tolerances import DEFAULT_JUDGING, check_judging
from harness.model.result import CellResult, MatrixResult

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
    cells = tuple(dataclasses.replace(c, verdict=judge_cell(c, result.run_of(c).spec, result.reference)) for c in result.cells)
    judged = dataclasses.replace(result, cells=cells, judging=judging)
    judged = dataclasses.replace(judged, pairs=tuple(compare_result(judged, judging, known)))
    judged = dataclasses.replace(judged, cells=_excused(judged))
    return dataclasses.replace(judged, targets=tuple(check_targets(judged)))


def _excused(result: MatrixResult) -> tuple[CellResult, ...]:
    """The cells, with each failed own verdict that a pair's proven R torch bug explains marked ``excused`` (naming the
    pair and its entries): the bug is on record, with its reproducers; a new difference in the same cell would not be
    proven, so its pair would not be ``known_difference``."""
    why = result.excused()
    cells = []
    for cell in result.cells:
        pair = why.get(cell.id)
        if pair is not None and cell.verdict is not None and cell.verdict.outcome == "fail":
            entries = ", ".join(pair.details.get("excused_by") or pair.details.get("known_difference") or ())
            reason = f"{cell.verdict.reason} (excused: R torch bug {entries}, proven in pair {pair.pair}; docs/bugs/)"
            cell = dataclasses.replace(cell, verdict=dataclasses.replace(cell.verdict, outcome="excused", reason=reason))
        cells.append(cell)
    return tuple(cells)
