"""One meaning per exit status, the same for every command (:class:`harness.errors.ExitCode`): a usage error, a failed check
and an internal error give three different statuses from ``report``, ``merge`` and ``doctor``, and ``run``, ``trace`` and
``prepare`` tell a usage error from an internal one before any worker starts.

The failed checks of ``run`` and ``trace`` (a planted diverged pair) and the scripts' shell modes in both languages are in
``tests/integration/test_exit_statuses.py``. An internal error is planted as a monkeypatched failure.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.errors import ExitCode
from harness.run.availability import Availability
from harness.store.result_file import save_result
from tests.support import run_cli
from tests.twins import by_mode, golden, nudge_one_ulp, replace_cells, twin_cell


def _planted_bug(*args: object, **kwargs: object) -> None:
    raise RuntimeError("planted bug")


def _internal(done: object) -> None:
    """The status and the one line of a harness bug."""
    assert getattr(done, "returncode") == ExitCode.INTERNAL_ERROR  # noqa: B009 (a CompletedProcess)
    assert getattr(done, "stderr").strip() == "error: unexpected RuntimeError: planted bug (run with --debug for the traceback)"  # noqa: B009


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The golden result (it passes), one whose default pair is one ULP apart (strict: diverged), and its two slices."""
    folder = tmp_path_factory.mktemp("results")
    passing, failing = folder / "passing.json", folder / "failing.json"
    save_result(golden(), passing)
    twin = twin_cell(by_mode(golden())["default"], folder / "twin", edit=nudge_one_ulp("layer0.bias", (1,)))
    diverged = replace_cells(golden(), {twin.id: twin})
    save_result(diverged, failing)
    for frontend in ("python", "r"):
        cells = tuple(c for c in diverged.cells if c.frontend == frontend)
        part = dataclasses.replace(diverged, cells=cells, frontends=(frontend,), baseline=frontend, pairs=(), traces=())
        save_result(part, folder / f"{frontend}.json")
    return {"passing": passing, "failing": failing, "python": folder / "python.json", "r": folder / "r.json"}


def test_report_passes_fails_and_refuses_with_three_statuses(results: dict[str, Path], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """``report`` of a passing result is OK, of a diverged one FAILED (saying why; ``--exit-zero`` views it with 0), of a
    missing file a usage error, and a bug inside it an internal error."""
    assert run_cli("report", str(results["passing"]), "--out", str(tmp_path / "a")).returncode == ExitCode.OK
    failing = run_cli("report", str(results["failing"]), "--out", str(tmp_path / "b"))
    assert failing.returncode == ExitCode.FAILED and (tmp_path / "b" / "report.md").is_file()
    assert "the result fails its checks: 1 pair(s) failed (with_autocast-default-sgd-cpu): exit status 1" in failing.stdout
    viewed = run_cli("report", str(results["failing"]), "--out", str(tmp_path / "c"), "--exit-zero")
    assert (viewed.returncode, viewed.stderr) == (ExitCode.OK, "") and "the result fails" not in viewed.stdout
    missing = run_cli("report", str(tmp_path / "none.json"), "--out", str(tmp_path / "d"))
    assert missing.returncode == ExitCode.USAGE_ERROR and missing.stderr.startswith("error: cannot read ")
    monkeypatch.setattr("harness.views.report.write_report", _planted_bug)
    _internal(run_cli("report", str(results["passing"]), "--out", str(tmp_path / "e")))


def test_merge_passes_fails_and_refuses_with_three_statuses(results: dict[str, Path], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``merge`` of slices whose pair diverged is FAILED, of one input a usage error, and a bug inside it an internal error."""
    assert run_cli("merge", str(results["python"]), str(results["r"]), "--out", str(tmp_path / "a")).returncode == ExitCode.FAILED
    refused = run_cli("merge", str(results["python"]), "--out", str(tmp_path / "b"))
    assert refused.returncode == ExitCode.USAGE_ERROR and refused.stderr.startswith("error: merge needs two results or more")
    monkeypatch.setattr("harness.store.merge.merge_results", _planted_bug)
    _internal(run_cli("merge", str(results["python"]), str(results["r"]), "--out", str(tmp_path / "c")))


def test_doctor_passes_fails_and_refuses_with_three_statuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """``doctor`` is OK where Python cells can run, FAILED where they cannot, a usage error for a bad flag, and a bug in its
    probe an internal error."""
    found = Availability("3.11.7", "2.13.0+cpu", "/usr/bin/Rscript", "3.5.17", None,
                         {"torch_installed": True, "libtorch_installed": True, "libtorch_loads": True, "cli": True, "jsonlite": True})
    monkeypatch.delenv("AMP_PARITY_REQUIRE_R", raising=False)
    monkeypatch.setattr("harness.run.availability.probe", lambda: found)
    monkeypatch.setattr("harness.run.availability.python_cuda", lambda: "no")  # it asks torch in a process of its own
    assert run_cli("doctor").returncode == ExitCode.OK
    monkeypatch.setattr("harness.run.availability.probe", lambda: dataclasses.replace(found, torch_version=None))
    failed = run_cli("doctor")
    assert failed.returncode == ExitCode.FAILED and "Python cells cannot run" in failed.stdout
    assert run_cli("doctor", "--bogus").returncode == ExitCode.USAGE_ERROR
    monkeypatch.setattr("harness.run.availability.probe", _planted_bug)
    _internal(run_cli("doctor"))


@pytest.mark.parametrize("command", ["run", "trace", "prepare"])
def test_run_trace_and_prepare_tell_a_usage_error_from_a_bug(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad flag value is a usage error and a bug before the first cell an internal error, for every command that runs."""
    refused = run_cli(command, "--lr", "inf")
    assert refused.returncode == ExitCode.USAGE_ERROR and refused.stderr.startswith("error: argument --lr: must be a finite number")
    monkeypatch.setattr("harness.workload.flags.spec_from_args", _planted_bug)
    monkeypatch.setattr("harness.run.prepare.prepare_shell_run_spec", _planted_bug)
    _internal(run_cli(command, "--preset", "tiny"))


def test_the_three_statuses_differ_and_follow_pytest() -> None:
    """OK, FAILED, INTERNAL_ERROR and USAGE_ERROR are pytest's numbers (0, 1, 3, 4); interruptions are the shell's."""
    assert [int(c) for c in (ExitCode.OK, ExitCode.FAILED, ExitCode.INTERNAL_ERROR, ExitCode.USAGE_ERROR)] == [
        int(c) for c in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR)
    ]
    assert (ExitCode.INTERRUPTED, ExitCode.TERMINATED) == (130, 143)
    assert ExitCode.for_error(RuntimeError()) is ExitCode.INTERNAL_ERROR


@pytest.mark.parametrize("flags", [("--optimizer", "sgd", "--feature", "resume"), ("--mode", "autocast", "--feature", "resume"),
                                   ("--optimizer", "sgd", "--feature", "none,resume")])
def test_a_matrix_a_named_feature_adds_no_cell_to_is_refused_before_it_starts(flags: tuple[str, ...], tmp_path: Path) -> None:
    """Issue 48 (5): ``--optimizer sgd --feature resume`` is a matrix of 0 cells (resume's covering design has no sgd). It
    wrote a result and a report of nothing and exited 0; now it is a usage error naming the feature and where it runs,
    before any worker starts or file is written (``none,resume`` too: resume, asked for, would add nothing)."""
    done = run_cli("run", "--preset", "tiny", *flags, "--json", str(tmp_path / "r.json"), "--report", str(tmp_path / "report"))
    assert done.returncode == ExitCode.USAGE_ERROR, (done.stdout, done.stderr)
    line = done.stderr.strip()
    assert line.startswith("error: --feature must be a loop feature that runs in at least one asked cell; resume's covering "
                           "design runs it in the modes "), line
    assert "\n" not in line and list(tmp_path.iterdir()) == []


def test_all_features_narrowed_to_cells_some_do_not_run_in_is_not_refused() -> None:
    """``--feature all`` asks for each feature where it runs: those without a cell of the asked ones are left out, not refused."""
    import argparse

    from harness.cli.options import matrix_of
    from harness.workload.flags import add_spec_arguments

    parser = argparse.ArgumentParser()
    add_spec_arguments(parser)
    matrix = matrix_of(parser.parse_args(["--preset", "tiny", "--optimizer", "sgd", "--feature", "all"]))
    assert "resume" in matrix.features


def test_a_result_of_no_cell_does_not_pass() -> None:
    """A result holding no cell measured nothing: its exit status is a usage error, as a run whose every cell was skipped."""
    from harness.cli.outcome import exit_status, nothing_ran

    empty = dataclasses.replace(golden(), cells=(), pairs=(), targets=())
    assert exit_status(empty) is ExitCode.USAGE_ERROR
    assert (nothing_ran(empty) or "").startswith("error: the result holds no cell")
