"""What a judged result means for the command that made or read it: its exit status, and the one line that says why it
fails (docs/cli.md lists the statuses)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.errors import ExitCode

if TYPE_CHECKING:
    from harness.model.result import MatrixResult

__all__ = ["exit_status", "failing_line", "nothing_ran", "uncompared"]


def exit_status(result: MatrixResult) -> ExitCode:
    """``FAILED`` when a cell ended in ``error`` or ``numerical_failure`` (but one whose crash is a proven R torch bug: its
    pair says so), a pair ``diverged`` (or names a stale known difference), a pair of cells that both ran could not be
    compared (their weights are gone and nothing was kept), or a cell failed its own verdict (float64 bound, scaler rule:
    :mod:`harness.judge.cells`; one a proven bug explains is excused);
    ``USAGE_ERROR`` when no cell ran (each was skipped or unsupported: nothing was measured, and what was asked cannot
    run here); else ``OK``."""
    from harness.judge.pairs import FAILING_VERDICTS, excused_cells
    from harness.model.result import Status

    excused = excused_cells(result)
    failed = any(c.status in (Status.ERROR, Status.NUMERICAL_FAILURE) and c.id not in excused for c in result.cells)
    diverged = any(p.verdict in FAILING_VERDICTS for p in result.pairs) or uncompared(result) is not None
    own = any(c.verdict is not None and c.verdict.failed for c in result.cells)
    if failed or diverged or own:
        return ExitCode.FAILED
    return ExitCode.USAGE_ERROR if nothing_ran(result) else ExitCode.OK


def failing_line(result: MatrixResult) -> str:
    """Why a loaded result fails (``report``'s one line): its failing pairs and cells, counted."""
    from harness.judge.pairs import FAILING_VERDICTS, excused_cells
    from harness.model.result import Status

    if nothing_ran(result):
        return "the result fails: no cell of it ran"
    unread = uncompared(result)
    if unread is not None:
        return unread.removeprefix("error: ")
    pairs = [p.pair for p in result.pairs if p.verdict in FAILING_VERDICTS]
    excused = excused_cells(result)
    crashed = {c.id for c in result.cells if c.status in (Status.ERROR, Status.NUMERICAL_FAILURE)} - excused
    cells = [c.id for c in result.cells if c.id in crashed or (c.verdict is not None and c.verdict.failed)]
    parts = [f"{len(pairs)} pair(s) failed ({', '.join(pairs[:3])}{', ...' if len(pairs) > 3 else ''})" if pairs else "",
             f"{len(cells)} cell(s) failed ({', '.join(cells[:3])}{', ...' if len(cells) > 3 else ''})" if cells else ""]
    return "the result fails its checks: " + "; ".join(p for p in parts if p)


def uncompared(result: MatrixResult) -> str | None:
    """The ``error:`` line for pairs whose cells both ran but that could not be compared, or ``None``.

    A pair is ``error`` when a cell failed (that cell fails the run already) or when both ran and their weights cannot be
    read: a result whose weights folder was not uploaded with it, truncated, or left behind by a link. Such a report
    compared nothing; ``merge`` (and ``report``) said so in the table and exited 0, where CI must fail.
    """
    from harness.model.verdicts import Verdict

    pairs = [p for p in result.pairs if p.verdict == Verdict.ERROR and not p.details.get("statuses")]
    if not pairs:
        return None
    first = pairs[0]
    why = next(iter([*(first.details.get("problems") or ()), *first.explanation]), "no reason given")
    return (f"error: {len(pairs)} of {len(result.pairs)} pairs could not be compared ({first.pair}: {' '.join(why.split())}); "
            "restore each result's weights folder beside it (a CI job must upload it with the result), then run again.")


def nothing_ran(result: MatrixResult) -> str | None:
    """The ``error:`` line for a run in which no cell ran (every one skipped or unsupported), or ``None``.

    Such a run measured nothing: it is not a success, whatever else it printed. A cell that ran and failed (``error``,
    ``numerical_failure``) is a failure of the run, not of what was asked.
    """
    from harness.model.result import Status

    if not result.cells:  # ``run`` refuses such a matrix before it starts (cli/options.py); a result of none measured nothing
        return "error: the result holds no cell: nothing was measured. Choose --mode, --optimizer and --feature that share a cell."
    if any(c.status not in (Status.SKIPPED, Status.UNSUPPORTED) for c in result.cells):
        return None
    first = next((c for c in result.cells if c.reason), result.cells[0])
    return (f"error: no cell ran: all {len(result.cells)} were {' or '.join(sorted({str(c.status) for c in result.cells}))} "
            f"({first.id}: {first.reason}); nothing was measured. Fix what the reason says, or choose other --frontend/--mode.")
