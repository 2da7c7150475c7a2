"""What ``report`` and ``merge`` read is never what they write: no report file replaces an input, ``merge --json`` is
checked as ``run --json`` is and is never an input or a report file, the report and the merged result are published
together or not at all, a path is never blank, and a merge that compared nothing fails.

In this process (:func:`tests.support.run_cli`), on copies of the golden result split into a Python and an R slice.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.model.result import MatrixResult
from harness.store.report_claim import ReportClaim, publish_report_with_result
from harness.store.result_file import WEIGHTS_MARKER, save_result
from harness.views.report import REPORT_FILES, write_report
from tests.support import GOLDEN_RESULT, run_cli
from tests.twins import golden


def _slice(result: MatrixResult, frontend: str) -> MatrixResult:
    cells = tuple(c for c in result.cells if c.frontend == frontend)
    return dataclasses.replace(result, cells=cells, frontends=(frontend,), baseline=frontend, pairs=(), traces=())


@pytest.fixture
def slices(tmp_path: Path) -> tuple[Path, Path]:
    """The golden run as a Python job's result and an R job's, each with its own weights folder beside it."""
    paths = []
    for frontend in ("python", "r"):
        folder = tmp_path / f"{frontend}.weights"
        folder.mkdir()
        part = _slice(golden(), frontend)
        for cell in part.cells:
            if cell.record is not None and cell.record.weights_path is not None:
                shutil.copyfile(cell.record.weights_path, folder / Path(cell.record.weights_path).name)
        path = tmp_path / f"{frontend}.json"
        save_result(part.map_weights_paths(lambda p, f=folder: str(f / Path(p).name)), path)  # type: ignore[misc]
        files = sorted(p.name for p in folder.iterdir())
        (folder / WEIGHTS_MARKER).write_text(json.dumps({"result": path.name, "files": files}))  # as a run's publish writes it
        paths.append(path)
    return paths[0], paths[1]


def _refused(done: subprocess.CompletedProcess[str]) -> str:
    """The one ``error:`` line of a command that failed (any non-zero status)."""
    assert done.returncode != 0, done.stdout[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "unexpected" not in lines[0], done.stderr
    return lines[0]


@pytest.mark.parametrize("overwrite", [False, True])
def test_report_never_replaces_the_result_it_reads(tmp_path: Path, overwrite: bool) -> None:
    """``report DIR/report.md --out DIR [--overwrite]``: the input would have been replaced by the report (its weights folder
    orphaned); without ``--overwrite`` the refusal suggested passing it. Now both are refused for what they are."""
    folder = tmp_path / "d"
    folder.mkdir()
    shutil.copyfile(GOLDEN_RESULT, folder / "report.md")
    before = (folder / "report.md").read_bytes()
    line = _refused(run_cli("report", str(folder / "report.md"), "--out", str(folder), *(["--overwrite"] if overwrite else [])))
    assert line.startswith(f"error: --out must be a folder where no report file replaces {folder / 'report.md'}, which this command "
                           "reads or writes")
    assert "--overwrite" not in line
    assert (folder / "report.md").read_bytes() == before and sorted(p.name for p in folder.iterdir()) == ["report.md"]


@pytest.mark.parametrize("name", ["report.md", "losses.png"])
def test_merge_never_replaces_an_input_with_a_report_file(slices: tuple[Path, Path], tmp_path: Path, name: str) -> None:
    """``merge DIR/report.md b.json --out DIR --overwrite`` (or an input named like a plot) is refused before anything is read."""
    inside = tmp_path / "out" / name
    inside.parent.mkdir()
    shutil.copyfile(slices[0], inside)
    line = _refused(run_cli("merge", str(inside), str(slices[1]), "--out", str(inside.parent), "--overwrite"))
    assert f"--out must be a folder where no report file replaces {inside}" in line
    assert inside.read_bytes() == slices[0].read_bytes() and [p.name for p in inside.parent.iterdir()] == [name]


def test_merge_json_onto_an_input_is_refused_even_with_overwrite(slices: tuple[Path, Path], tmp_path: Path) -> None:
    """``merge a.json b.json --json a.json --overwrite`` replaced an input with the merge: refused, nothing written."""
    before = slices[0].read_bytes()
    line = _refused(run_cli("merge", *map(str, slices), "--out", str(tmp_path / "rep"), "--json", str(slices[0]), "--overwrite"))
    assert line == (f"error: --json must be a file apart from the results it merges (it is the input {slices[0]}), even with "
                    f"--overwrite, got '{slices[0]}'.")
    assert slices[0].read_bytes() == before and not (tmp_path / "rep").exists()


def test_merge_json_onto_its_own_report_is_refused_for_what_it_is(slices: tuple[Path, Path], tmp_path: Path) -> None:
    """``--json OUT/report.md``: refused first as the report's own file, not after the report was written as "already exists"."""
    out = tmp_path / "rep"
    out.mkdir()
    line = _refused(run_cli("merge", *map(str, slices), "--out", str(out), "--json", str(out / "report.md")))
    assert line == (f"error: --json must be a file apart from the report written to --out {out} (it is the report's report.md), "
                    f"got '{out / 'report.md'}'.")
    assert list(out.iterdir()) == []


def test_merge_json_in_a_missing_folder_is_refused_as_run_refuses_it(slices: tuple[Path, Path], tmp_path: Path) -> None:
    """``--json nodir/m.json`` created the folder; ``run --json`` refuses it: now both refuse, and nothing is written."""
    line = _refused(run_cli("merge", *map(str, slices), "--out", str(tmp_path / "rep"), "--json", str(tmp_path / "nodir" / "m.json")))
    assert line == (f"error: cannot write a result in {tmp_path / 'nodir'}: it does not exist. Create it (mkdir -p {tmp_path / 'nodir'}) "
                    "or choose another --json path.")
    assert not (tmp_path / "nodir").exists() and not (tmp_path / "rep").exists()


@pytest.mark.parametrize("command", ["merge", "run"])
def test_a_result_inside_a_weights_folder_is_refused(slices: tuple[Path, Path], tmp_path: Path, command: str) -> None:
    """``--json INPUT.weights/m.json`` was accepted, and then ``run --overwrite`` refused the weights folder it sat in."""
    inside = tmp_path / "python.weights" / "m.json"
    args = ["merge", *map(str, slices), "--out", str(tmp_path / "rep")] if command == "merge" else ["run", "--frontend", "python"]
    line = _refused(run_cli(*args, "--json", str(inside)))
    assert line == (f"error: --json must be a path outside amp-parity's weights folder {tmp_path / 'python.weights'} (a result there "
                    f"makes --overwrite refuse that folder), got '{inside}'.")
    assert not inside.exists() and not (tmp_path / "rep").exists()


def test_merge_publishes_the_report_and_the_result_together(slices: tuple[Path, Path], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """If the merged result cannot be renamed into place after the report was published, the report is taken back: the
    folder holds neither (it kept the report, and said the merge failed)."""
    from harness.files import atomic
    from harness.store.merge import merge_results

    result = merge_results(slices)
    out, target = tmp_path / "rep", tmp_path / "m.json"
    real_replace = os.replace

    def failing(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst) == target:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", failing)
    with ReportClaim(out, REPORT_FILES, flag="--out") as claim:
        write_report(result, claim.staging)
        with pytest.raises(Exception, match=f"cannot write {target}: No space left on device; no report was written either"):
            publish_report_with_result(claim, result, target, overwrite=False)
    assert not target.exists() and not out.exists()


@pytest.mark.parametrize("value", [" ", "  ", "dir/ ", " run.json", "run.json "])
def test_a_blank_path_or_name_is_refused(tmp_path: Path, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --json ' '`` wrote a file named by a blank and exited 0: a path that is blank, or a name beginning or ending with
    a blank, is refused in one line by every path flag."""
    monkeypatch.chdir(tmp_path)
    for args in (["run", "--json", value], ["run", "--report", value], ["report", value, "--out", "x"], ["report", "x", "--out", value],
                 ["run", "--installations", value], ["run", "--known-differences", value], ["run", "--spec-file", value]):
        line = _refused(run_cli(*args))
        assert "expected a path" in line and repr(value) in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("item", ["", " ", "x="])
def test_a_blank_merge_input_is_one_line_naming_it(slices: tuple[Path, Path], tmp_path: Path, item: str) -> None:
    """``merge a.json ''`` said "cannot read ." (the current folder): a blank input is refused as a blank path."""
    line = _refused(run_cli("merge", str(slices[0]), item, "--out", str(tmp_path / "rep")))
    assert line.startswith("error: merge must be a result file ([LABEL=]RESULT): expected a path, got ") and "cannot read" not in line
    assert not (tmp_path / "rep").exists()


def test_a_merge_that_compared_no_pair_fails(slices: tuple[Path, Path], tmp_path: Path) -> None:
    """The CI case of an input whose weights were not uploaded and that kept nothing of them (a result written before
    results kept their weights' digests): every pair of cells that ran is an ``error``; the merge (and ``report`` of the
    merged result) exits non-zero with one line saying so, the report still written."""
    shutil.rmtree(tmp_path / "r.weights")
    for name in ("python.json", "r.json"):  # the golden slices kept their comparisons with each other: a real slice could not
        data = json.loads((tmp_path / name).read_text())
        for cell in data["cells"]:
            cell["weights"] = None
        (tmp_path / name).write_text(json.dumps(data))
    out = tmp_path / "rep"
    done = run_cli("merge", *map(str, slices), "--out", str(out), "--json", str(tmp_path / "m.json"))
    assert done.returncode != 0 and (out / "report.md").is_file()
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: 2 of 4 pairs could not be compared (with_autocast-default-sgd-cpu: cannot "
                                                     "read r's final weights: the file is not present)")
    assert errors[0].endswith("restore each result's weights folder beside it (a CI job must upload it with the result), then run again.")
    again = run_cli("report", str(tmp_path / "m.json"), "--out", str(tmp_path / "rep2"))
    assert again.returncode != 0 and (tmp_path / "rep2" / "report.md").is_file()
    assert "the result fails its checks" not in again.stdout and "2 of 4 pairs could not be compared" in again.stdout


def test_a_merge_of_a_result_whose_weights_folder_is_a_truncated_file_fails(slices: tuple[Path, Path], tmp_path: Path) -> None:
    """A truncated weights file (a half upload) is a pair that could not be compared: the merge fails."""
    victim = next((tmp_path / "r.weights").glob("with_autocast-default-*.safetensors"))
    victim.write_bytes(victim.read_bytes()[:100])
    done = run_cli("merge", *map(str, slices), "--out", str(tmp_path / "rep"))
    assert done.returncode != 0
    assert "error: 1 of 4 pairs could not be compared (with_autocast-default-sgd-cpu: cannot read r's" in done.stderr


def test_trace_with_one_frontend_is_refused_before_it_runs() -> None:
    """``trace --frontend python`` ran its cells, traced nothing and said nothing: a trace needs a pair."""
    line = _refused(run_cli("trace", "--frontend", "python"))
    assert line == "error: --frontend must be two frontends or more for trace (it traces pairs), got 'python'."


def test_the_report_names_the_rounds_a_spread_needs() -> None:
    """The CV note said "(from 3 rounds)" whatever the rounds were: it says a spread needs 3 rounds or more."""
    from tests.support import report_text

    text = report_text(golden())
    assert "(from 3 rounds)" not in text and "CV: standard deviation ÷ mean of the loop times (— below 3 timed rounds: too few for a " \
                                              "spread)." in text
