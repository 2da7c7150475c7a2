"""What a command prints and writes beside its result: lines that survive a closed pipe, the report files' line, and
what has been written so far (the line an interruption prints names it)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import AmpParityError

if TYPE_CHECKING:
    from rich.console import Console

    from harness.files.staging import StagingDir
    from harness.model.result import MatrixResult
    from harness.store.report_claim import ReportClaim
    from harness.views.page import EntryText

__all__ = ["WRITTEN", "go_quiet_on_broken_pipe", "print_or_go_quiet", "quiet_stdout", "report_files_line", "temporary_staging",
           "write_report_or_say_why"]

#: What the command has written so far, for the line an interruption prints ("say what exists").
WRITTEN: list[str] = []


def print_or_go_quiet(line: str) -> None:
    """Print ``line``; a closed stdout (``| head``) is not an error of the command."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        quiet_stdout()


def go_quiet_on_broken_pipe(console: Console) -> None:
    """rich exits 1 when stdout's reader is gone (``run ... | head``); the run's outcome stands, so it goes quiet instead."""
    def quiet() -> None:
        console.quiet = True
        quiet_stdout()

    setattr(console, "on_broken_pipe", quiet)  # noqa: B010 (mypy refuses assigning to a method)


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again on the closed pipe."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def write_report_or_say_why(result: MatrixResult, claim: ReportClaim, entries: Mapping[str, EntryText] | None = None) -> str:
    """Write the report after the run; a failure is one ``error:`` line, not the loss of the table or the result."""
    from harness.views.report import write_report

    try:
        write_report(result, claim.staging, entries, page_dir=claim.folder)
        written = claim.publish()
        return f"report written to {written[0]}; {report_files_line(written)}"
    except AmpParityError as err:
        return f"error: {err}"


def report_files_line(written: list[Path]) -> str:
    """What a report folder holds beside report.md, the page first: what a person opens, and what CI publishes."""
    from harness.views.page import PAGE_FILE
    from harness.views.summary import SUMMARY_FILE

    folder = written[0].parent
    plots = sum(1 for p in written if p.suffix == ".png")
    return f"open {folder / PAGE_FILE} (one page, offline); {folder / SUMMARY_FILE} is for a CI job summary; {plots} plots beside them"


def temporary_staging() -> StagingDir:
    """A staging folder for final weights that nothing keeps (``run`` without ``--json``, ``trace``), removed when it closes
    (a killed run's is swept by the next run: :mod:`harness.files.staging`)."""
    import tempfile

    from harness.files.staging import StagingDir
    from harness.run.pool import TEMPORARY_WEIGHTS_PREFIX

    return StagingDir(Path(tempfile.gettempdir()), TEMPORARY_WEIGHTS_PREFIX)
