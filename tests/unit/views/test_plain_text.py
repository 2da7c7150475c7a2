"""What the terminal shows of a result, a run and a machine is plain text: names, paths, reasons and messages are printed as
they are, never read as rich's markup (issue 48: an installation's path holding ``[/b]`` crashed the progress bar).

Each test puts :data:`HOSTILE`, a text that is broken markup and valid markup at once, into every string the view shows,
renders it as a terminal does, and asks for it back verbatim: a value that went through markup would raise
``MarkupError`` (the closing tag) or lose its brackets (the valid tags)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from rich.console import Console

from harness.cli.commands.doctor import doctor
from harness.errors import ExitCode
from harness.model.result import MatrixResult, Status
from harness.run.availability import Availability
from harness.store.result_file import save_result
from harness.views.progress import TerminalProgress
from harness.views.table import print_result, print_trace
from tests.support import run_cli
from tests.twins import golden, replace_cells, with_status

#: Broken markup (a closing tag nothing opened), valid markup (a style, a link) and an escape, in one text.
HOSTILE = r"/opt/[/b]envs/[bold]r[/bold] [link=x]y[/link] \[z]"


def _terminal(width: int = 1000) -> Console:
    return Console(file=io.StringIO(), force_terminal=True, record=True, width=width, color_system="truecolor")


def _hostile_result() -> MatrixResult:
    """The golden result with HOSTILE in every text the terminal shows: a cell's reason, a pair's explanation, a warning,
    a ratio's note, the float64 reference's reason."""
    base = golden()
    first, second = base.cells[0], base.cells[1]
    failed = with_status(second, "error", f"r script failed: cannot open {HOSTILE}")
    noted = dataclasses.replace(first, time_vs_default=None, time_vs_default_note=f"no default cell at {HOSTILE}")
    result = replace_cells(base, {failed.id: failed, noted.id: noted})
    pair = result.pairs[0]
    pairs = (dataclasses.replace(pair, verdict="diverged", explanation=[f"{pair.pair}: diverged — {HOSTILE}", f"trace: {HOSTILE}"]),
             *result.pairs[1:])
    reference = dataclasses.replace(result.reference, available=False, reason=f"no reference: {HOSTILE}")
    return dataclasses.replace(result, pairs=pairs, warnings=(f"a warning naming {HOSTILE}",), reference=reference)


def test_the_result_table_prints_every_text_as_it_is() -> None:
    """``run``'s and ``report``'s terminal view: the reason, the pair's cause, the warning, the note and the reference's reason,
    each whole."""
    console = _terminal()
    result = _hostile_result()
    assert any(c.status is Status.ERROR for c in result.cells)
    print_result(result, console)
    shown = console.export_text()
    assert shown.count(HOSTILE) >= 5, shown


def test_the_trace_prints_every_text_as_it_is() -> None:
    """``trace``'s view: each cell's reason and each pair's explanation, whole."""
    console = _terminal()
    print_trace(_hostile_result(), console)
    shown = console.export_text()
    assert shown.count(HOSTILE) >= 4, shown


def test_the_progress_bar_shows_a_path_as_it_is() -> None:
    """The bar's phase and its last unit ("starting r28 (/opt/[/b]envs/...)") are plain text on a terminal."""
    console = _terminal()
    with TerminalProgress(console) as progress:
        progress.begin(f"phase {HOSTILE}", 2)
        progress.advance(f"starting r28 ({HOSTILE})"[:60])
        progress._bar.refresh()
        shown = console.export_text()
    assert f"phase {HOSTILE}" in shown and HOSTILE[:40] in shown, shown


def test_doctor_prints_paths_and_reasons_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """``doctor``'s table (R's path, a libtorch that does not load) and its verdict lines."""
    monkeypatch.setattr("harness.run.availability.python_cuda", lambda: "no")  # it asks torch in a process of its own
    found = Availability("3.11.7", "2.13.0+cpu", f"{HOSTILE}/Rscript", "3.5.17", None,
                         {"torch_installed": True, "libtorch_installed": True, "libtorch_loads": False, "cli": True,
                          "jsonlite": True, "r_version": HOSTILE, "libtorch_error": f"cannot load {HOSTILE}"})
    console = _terminal()
    doctor(console, found)
    shown = console.export_text()
    assert shown.count(HOSTILE) >= 2, shown


def test_merge_names_a_report_folder_with_brackets_as_it_is(tmp_path: Path) -> None:
    """``merge``'s closing line names where the report went: a folder called ``[/b]`` is named, not parsed (it ended the
    command in a MarkupError after the report was written)."""
    slices = []
    for frontend in ("python", "r"):
        cells = tuple(c for c in golden().cells if c.frontend == frontend)
        part = dataclasses.replace(golden(), cells=cells, frontends=(frontend,), baseline=frontend, pairs=(), traces=())
        slices.append(tmp_path / f"{frontend}.json")
        save_result(part, slices[-1])
    out = tmp_path / "out[/b][bold]"
    done = run_cli("merge", *map(str, slices), "--out", str(out))
    assert done.returncode == ExitCode.OK and "unexpected" not in done.stderr, done.stderr
    assert f"report written to {out}" in done.stdout.replace("\n", ""), done.stdout
