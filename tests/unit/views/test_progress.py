"""What a run shows while it runs (harness.views.progress, harness.model.progress), its header's bf16 note and its limit
line (harness.views.timing_sections)."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from harness.model.progress import RunProgress, TextProgress, as_progress
from harness.views.progress import LineProgress, QuietProgress, TerminalProgress, progress_for
from harness.views.table import print_result
from harness.views.timing_sections import NO_BF16_NOTE, bf16_note, limit_line, timing_section
from tests.twins import golden


def test_without_a_terminal_nothing_is_printed_as_it_goes_but_under_verbose() -> None:
    """Issue 47: in a log without -v, no line per phase (``-v`` prints them, and the run's ``phases:`` line), so a run where
    no cell needs a look stays within 60 lines."""
    stream = io.StringIO()
    progress = progress_for(Console(file=stream, force_terminal=False, width=40))
    assert isinstance(progress, QuietProgress)
    with progress:
        progress.begin("record calls", 1)
        progress.advance("a: ok")
        progress.end("record calls", 1.0)
    assert stream.getvalue() == ""


def test_without_a_terminal_under_verbose_each_phase_is_one_line_as_it_ends() -> None:
    """In a log (CI) with -v: nothing per cell, one line per phase with its units and seconds."""
    stream = io.StringIO()
    progress = progress_for(Console(file=stream, force_terminal=False, width=40), verbose=True)
    assert isinstance(progress, LineProgress)
    with progress:
        progress.begin("record calls", 3)
        for text in ("a: ok", "b: ok", "c: ok"):
            progress.advance(text)
        progress.end("record calls", 12.34)
        progress.begin("judging", 0)
        progress.end("judging", 0.5)
    assert stream.getvalue().splitlines() == ["amp-parity: record calls done in 12.3 s, 3 of 3", "amp-parity: judging done in 0.5 s"]


def test_on_a_terminal_a_bar_counts_the_phase_units() -> None:
    """On a terminal: rich's bar, the phase its description, its units done of the total."""
    console = Console(file=io.StringIO(), force_terminal=True)
    progress = progress_for(console)
    assert isinstance(progress, TerminalProgress)
    with progress:
        progress.begin("record calls", 4)
        progress.advance("a: ok")
        progress.advance("b: ok")
        task = progress._bar.tasks[0]
        assert (task.description, task.completed, task.total) == ("record calls", 2, 4)
        progress.begin("timed rounds", 2)
        assert [t.description for t in progress._bar.tasks] == ["timed rounds"]


def test_a_function_of_one_string_still_gets_each_unit() -> None:
    """Tests and benchmarks pass a function: it gets each unit's text, and the phases say nothing to it."""
    said: list[str] = []
    progress = as_progress(said.append)
    assert isinstance(progress, TextProgress)
    progress.begin("record calls", 2)
    progress.advance("a: ok")
    progress("b: ok")
    progress.end("record calls", 1.0)
    assert said == ["a: ok", "b: ok"]
    assert type(as_progress(None)) is RunProgress


def test_the_bf16_note_only_where_the_cpu_is_known_to_lack_them() -> None:
    """The note where the flags were read and lack bfloat16; none where it has them or nothing is known."""
    assert bf16_note(False) == NO_BF16_NOTE and bf16_note(True) is None and bf16_note(None) is None
    lacking = dataclasses.replace(golden(), environment={**golden().environment, "bf16_instructions": False})
    console = Console(file=io.StringIO(), width=300)
    print_result(lacking, console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert text.count("this CPU lacks bfloat16 instructions") == 1
    assert f"Note: {NO_BF16_NOTE}." in timing_section(lacking)
    having = dataclasses.replace(golden(), environment={**golden().environment, "bf16_instructions": True})
    console = Console(file=io.StringIO(), width=300)
    print_result(having, console)
    assert "lacks bfloat16" not in console.file.getvalue()  # type: ignore[attr-defined]
    assert not any("lacks bfloat16" in line for line in timing_section(having))


def test_the_run_states_how_far_it_is_from_its_limit() -> None:
    """``matrix:`` wall, how many times its limit, and the limit's two parts; the rounds spread over the cores it records."""
    result = dataclasses.replace(golden(), environment={**golden().environment, "cpus": 2}, wall_seconds=30.0,
                                 workers={"python": {"ready_seconds": 1.0}, "r": {"ready_seconds": 2.0}})
    limit, start, rounds = result.limit()
    assert result.lanes == 2 and start == 2.0
    assert rounds == sum(c.own_run_seconds or 0.0 for c in result.cells if c.record is not None) / 2
    line = limit_line(result)
    assert line == (f"matrix: 30.0 s wall, {30.0 / limit:.1f}× its limit here of {limit:.1f} s (the slowest worker's start 2.0 s "
                    f"+ one untraced run of every cell and reconciled run over 2 cores {rounds:.1f} s)")
    one_core = dataclasses.replace(result, environment={**result.environment, "cpus": 1})
    assert one_core.lanes == 1 and "over" not in str(limit_line(one_core))
    assert limit_line(dataclasses.replace(result, sources=({"file": "a.json"},))) is None


def test_the_run_header_says_once_what_a_cpu_without_bf16_cannot_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """The header names the run and, on a CPU without bfloat16 instructions (planted: this one has them), the note once."""
    import types

    import harness.run.cpu_features as cpu_features
    from harness.cli.commands.run import print_header
    from harness.workload.spec import WorkloadSpec

    runner = types.SimpleNamespace(frontends=("python", "r"))
    spec = WorkloadSpec.from_preset("tiny")
    for has, count in ((False, 1), (True, 0), (None, 0)):
        monkeypatch.setattr(cpu_features, "cpu_has_bf16", lambda has=has: has)
        console = Console(file=io.StringIO(), width=400)
        print_header(console, spec, runner, ("default", "autocast"), ("sgd",))  # type: ignore[arg-type]  # two scripts: 3 modes
        text = console.file.getvalue()  # type: ignore[attr-defined]
        assert text.startswith("amp-parity run: preset tiny, 6 cells (python, r), cpu, ")
        assert text.count("this CPU lacks bfloat16 instructions") == count


def test_the_limit_counts_each_reconciled_run_the_matrix_needed() -> None:
    """Issue 47: a cell whose pair needed a reconciled run (a second run with the known difference's switches) adds one
    more untraced run of the cell to the limit; the others one each."""
    from harness.model.cell_trace import TraceFile

    result = dataclasses.replace(golden(), environment={**golden().environment, "cpus": 1}, wall_seconds=30.0,
                                 workers={"python": {"ready_seconds": 1.0}})
    ran = [c for c in result.cells if c.record is not None]
    first = ran[0]
    reconciled = TraceFile("c.reconciled.trace.safetensors", "0" * 64, 1, ("switch",))
    cells = tuple(dataclasses.replace(c, reconciled=reconciled) if c is first else c for c in result.cells)
    before, after = result.limit(), dataclasses.replace(result, cells=cells).limit()
    assert after[2] == pytest.approx(before[2] + (first.own_run_seconds or 0.0)) and (first.own_run_seconds or 0.0) > 0
    assert after[1] == before[1] == 1.0
