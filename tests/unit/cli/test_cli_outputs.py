"""The command line's output places, refused before the first cell: checked through ``harness.cli.main.main`` in this process
(:func:`tests.support.run_cli`), which prints the same lines and returns the same status as ``python -m harness``.

What is about the process (concurrent runs, kills, a full disk planted into the real command, ``$TMPDIR``) and what
runs cells is in ``tests/integration/test_cli_outputs.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ExitCode
from harness.views.report import REPORT_FILES
from tests.support import run_cli

#: A Python-only run (refused here before its first cell).
_QUICK = ("run", "--frontend", "python", "--mode", "default", "--rounds", "1", "--warmup-rounds", "1")


def test_run_keeps_a_users_weights_folder(tmp_path: Path) -> None:
    """``run --json X.json`` with a user's ``X.weights/`` is refused before any cell runs (it used to delete it)."""
    (tmp_path / "X.weights").mkdir()
    (tmp_path / "X.weights" / "mine.txt").write_text("precious")
    done = run_cli(*_QUICK, "--json", str(tmp_path / "X.json"))
    assert done.returncode == ExitCode.USAGE_ERROR and "amp-parity · preset" not in done.stdout
    assert done.stderr.strip() == (
        f"error: {tmp_path / 'X.weights'} was not written by amp-parity (it has no .amp-parity-weights.json); "
        "amp-parity never replaces it. Move it away or choose another --json path."
    )
    assert (tmp_path / "X.weights" / "mine.txt").read_text() == "precious"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--json", "/proc/x.json"), "error: cannot write a result in /proc: "),
        (("--json", "{tmp}/" + "y" * 240 + ".json"), "a name is too long for the file system"),
        (("--json", "{tmp}/out/z.weights"), "error: --json must be a file name that does not end in .weights"),
        (("--report", "{tmp}/file"), "error: --report must be a folder (or one to create), but it is a file, got"),
        (("--report", "/proc/report"), "error: cannot write the report in /proc/report: "),
    ],
    ids=["proc", "long-name", "dot-weights", "report-at-a-file", "report-under-proc"],
)
def test_output_places_that_cannot_work_are_refused_before_the_first_cell(tmp_path: Path, args: tuple[str, str], message: str) -> None:
    """Places that used to fail after the whole matrix ran (result lost) are refused at once, in one line."""
    (tmp_path / "out").mkdir()
    (tmp_path / "file").write_text("")
    done = run_cli(*_QUICK, args[0], args[1].format(tmp=tmp_path))
    assert done.returncode == ExitCode.USAGE_ERROR
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr
    assert "amp-parity · preset" not in done.stdout  # no cell ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "out"] and list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [("run", "--json", ""), ("run", "--report", ""), ("report", "x.json", "--out", ""), ("report", "", "--out", "o"),
     ("prepare", "--weights-out", "")],
    ids=["json", "report", "report-out", "report-result", "weights-out"],
)
def test_an_empty_path_is_refused_not_taken_for_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  args: tuple[str, ...]) -> None:
    """``--report ""`` wrote into the current folder and ``--json ""`` was an unexpected ValueError: now one line, a usage error."""
    monkeypatch.chdir(tmp_path)
    done = run_cli(*args)
    flag = next(a for a in args if a.startswith("--")) if args[-1] == "" else "result"
    assert done.returncode == ExitCode.USAGE_ERROR
    assert done.stderr.strip() == (
        f"error: argument {flag}: expected a path, got an empty string ''; name a file or folder (see python -m harness {args[0]} --help)."
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("report", ["X.json", "X.weights/r"])
def test_a_report_folder_at_the_result_or_in_its_weights_is_refused_before_the_first_cell(tmp_path: Path, report: str) -> None:
    """``--report`` equal to ``--json`` (or in its weights folder) is one ``--report`` line before any cell, not an error after the run."""
    allowed = "a folder apart from the result"
    done = run_cli(*_QUICK, "--json", str(tmp_path / "X.json"), "--report", str(tmp_path / report))
    assert done.returncode == ExitCode.USAGE_ERROR and "amp-parity · preset" not in done.stdout
    assert done.stderr.strip() == (
        f"error: --report must be {allowed} (--json {tmp_path / 'X.json'}) and its weights folder {tmp_path / 'X.weights'}, "
        f"got '{tmp_path / report}'."
    )
    assert list(tmp_path.iterdir()) == []


def test_a_second_run_with_the_same_report_folder_is_refused_before_the_first_cell(tmp_path: Path) -> None:
    """Two runs with one ``--report`` both said "report written" (one report lost): the second is refused at once."""
    from harness.store.report_claim import ReportClaim

    with ReportClaim(tmp_path / "rep", REPORT_FILES):  # the first run's claim
        done = run_cli(*_QUICK, "--report", str(tmp_path / "rep"), "--overwrite")
    assert done.returncode == ExitCode.USAGE_ERROR and "amp-parity · preset" not in done.stdout
    assert done.stderr.strip().startswith(f"error: another run is writing the report in {tmp_path / 'rep'} (it holds ")


@pytest.mark.parametrize(
    ("args", "target", "line"),
    [(("report", "{tmp}/r.json", "--out", "{tmp}/out"), "harness.store.result_file.load_result",
      "error: interrupted; no report was written."),
     (("prepare", "--preset", "tiny"), "harness.run.prepare.prepare_shell_run_spec", "error: interrupted; no run spec was printed.")],
    ids=["report", "prepare"],
)
def test_ctrl_c_in_report_and_prepare_says_what_they_did_not_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   args: tuple[str, ...], target: str, line: str) -> None:
    """``report`` and ``prepare`` interrupted said "no result was written"; now each names its own output, and no folder is left."""
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(target, interrupted)
    done = run_cli(*(a.format(tmp=tmp_path) for a in args))
    assert (done.returncode, done.stderr.strip(), done.stdout) == (130, line, "")
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_that_breaks_a_lock_on_its_way_out_is_still_an_interruption(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI saw exit 3: a Ctrl-C landing inside ``threading``'s lock handling surfaces as ``RuntimeError: cannot release
    un-acquired lock`` over the KeyboardInterrupt. The run was interrupted, and says so (130, one line), not "unexpected"."""
    def interrupted_then_broken(*args: object, **kwargs: object) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("cannot release un-acquired lock") from None  # `from None` hides it from the traceback, not __context__

    monkeypatch.setattr("harness.store.result_file.load_result", interrupted_then_broken)
    done = run_cli("report", str(tmp_path / "r.json"), "--out", str(tmp_path / "out"))
    assert (done.returncode, done.stderr.strip(), done.stdout) == (130, "error: interrupted; no report was written.", "")
    assert list(tmp_path.iterdir()) == []


def test_an_unexpected_error_that_no_interruption_caused_is_still_a_bug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interruption's lookup goes by the error's context only: a plain RuntimeError stays "unexpected", exit 3."""
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("cannot release un-acquired lock")

    monkeypatch.setattr("harness.store.result_file.load_result", broken)
    done = run_cli("report", str(tmp_path / "r.json"), "--out", str(tmp_path / "out"))
    assert done.returncode == ExitCode.INTERNAL_ERROR and done.stderr.strip().startswith("error: unexpected RuntimeError")
