"""A run's progress as the command line shows it: a bar on a terminal, one line per phase in a log (CI).

On a terminal, rich's bar: the phase, its units done out of its total (cells, rounds), the time it has taken and an
estimate of the time it has left, and what just ended. Without one, nothing is redrawn, and nothing is printed as it goes
(issue 47: a log of a run where no cell needs a look is at most 60 lines; its ``matrix:`` line and the report say where
the time went); under ``-v`` each phase prints one line as it ends (its name, its units, its seconds), and the run one
``phases:`` line at its end.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from harness.model.progress import RunProgress

__all__ = ["LineProgress", "QuietProgress", "TerminalProgress", "progress_for"]


class TerminalProgress(RunProgress):
    """rich's bar (on ``console``, a terminal): the phase, its units done of its total, time taken and left, the last unit."""

    def __init__(self, console: Console) -> None:
        self._bar = Progress(
            # the phase and the last unit as plain text, never markup: a unit names installations by their paths
            TextColumn("{task.description}", style="bold", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[last]}", style="dim", markup=False),
            console=console, transient=True,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> TerminalProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def begin(self, phase: str, total: int) -> None:
        if self._task is not None:
            self._bar.remove_task(self._task)
        self._task = self._bar.add_task(phase, total=total or None, last="")

    def advance(self, text: str) -> None:
        if self._task is not None:
            self._bar.update(self._task, advance=1, last=text[:60])


class LineProgress(RunProgress):
    """One line per phase as it ends, on ``console`` (the run's: its output, before the table; a reader gone, ``| head``,
    quiets it as it quiets the table)."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._units = 0
        self._total = 0

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        """Nothing to take down."""

    def begin(self, phase: str, total: int) -> None:
        self._units, self._total = 0, total

    def advance(self, text: str) -> None:
        self._units += 1

    def end(self, phase: str, seconds: float) -> None:
        counted = f", {min(self._units, self._total)} of {self._total}" if self._total else ""
        self._console.print(f"amp-parity: {phase} done in {seconds:.1f} s{counted}", soft_wrap=True, markup=False, highlight=False)


class QuietProgress(RunProgress):
    """Nothing as the run goes (a log without ``-v``): the ``matrix:`` line and the report say where the time went."""

    def __enter__(self) -> QuietProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        """Nothing to take down."""


def progress_for(console: Console, verbose: bool = False) -> TerminalProgress | LineProgress | QuietProgress:
    """The bar where ``console`` is a terminal, else a line per phase under ``verbose`` (``-v``), else nothing as it goes."""
    if console.is_terminal:
        return TerminalProgress(console)
    return LineProgress(console) if verbose else QuietProgress()


