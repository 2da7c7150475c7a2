"""Claiming a result path: nothing a user owns is replaced, a result and its weights are published together or not at all."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from harness.errors import ResultError, UsageError
from harness.judge.assess import assess_result
from harness.model.result import MatrixResult
from harness.store.report_claim import ReportClaim, check_report_folder
from harness.store.result_claim import ResultClaim, publish_or_rescue, rescue_result
from harness.store.result_file import WEIGHTS_MARKER, load_result
from harness.views.report import REPORT_FILES, write_report
from tests.model_results import committed, with_weights


def _staged_result(claim: ResultClaim, tag: str = "new", names: tuple[str, ...] = ("a", "b")) -> MatrixResult:
    """A real result whose cells' weights files sit in the claim's staging folder, as the workers leave them; a third cell has none."""
    paths: list[Path | None] = []
    for name in names:
        weights = claim.staging / f"{name}.safetensors"
        weights.write_text(f"{tag}-{name}")
        weights.chmod(0o600)  # as mkstemp-made files are: the publish must give them the umask's mode
        paths.append(weights)
    return with_weights(committed(), [*paths, None])


def _publish(path: Path, tag: str = "new", overwrite: bool = False) -> MatrixResult:
    with ResultClaim(path, overwrite) as claim:
        return claim.publish(_staged_result(claim, tag))


def _weights(result: MatrixResult, k: int) -> str | None:
    record = result.cells[k].record
    return None if record is None else record.weights_path


def test_publish_writes_the_result_and_its_weights_and_nothing_else(tmp_path: Path) -> None:
    """After a publish the folder holds the result and its weights folder only, with the modes a plain write gives."""
    result = _publish(tmp_path / "run.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json", "run.weights"]
    assert sorted(p.name for p in (tmp_path / "run.weights").iterdir()) == [WEIGHTS_MARKER, "a.safetensors", "b.safetensors"]
    assert _weights(result, 0) == str(tmp_path / "run.weights" / "a.safetensors")
    stored = json.loads((tmp_path / "run.json").read_text())
    paths = [c["record"] and c["record"]["weights_path"] for c in stored["cells"]]
    assert paths == ["run.weights/a.safetensors", "run.weights/b.safetensors", None]
    mode = stat.S_IMODE((tmp_path / "run.json").stat().st_mode)
    assert stat.S_IMODE((tmp_path / "run.weights" / "a.safetensors").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "run.weights").stat().st_mode) == mode | ((mode & 0o444) >> 2)  # r → x on folders


def test_an_existing_weights_folder_is_kept_without_overwrite(tmp_path: Path) -> None:
    """``--json X.json`` no longer deletes an existing ``X.weights/``: it is refused before the run, the user's file stays."""
    (tmp_path / "X.weights").mkdir()
    (tmp_path / "X.weights" / "mine.txt").write_text("precious")
    with pytest.raises(ResultError, match=r"X\.weights was not written by amp-parity .*never replaces it"):
        ResultClaim(tmp_path / "X.json")
    with pytest.raises(ResultError, match="never replaces it"):
        ResultClaim(tmp_path / "X.json", overwrite=True)
    assert (tmp_path / "X.weights" / "mine.txt").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.weights"]  # no lock or staging folder left


def test_own_weights_folder_needs_overwrite_and_a_users_file_in_it_stops_even_that(tmp_path: Path) -> None:
    """A weights folder the harness wrote is replaced only with --overwrite, and not once a user put a file into it."""
    _publish(tmp_path / "X.json", "old")
    with pytest.raises(UsageError, match="does not exist yet"):
        ResultClaim(tmp_path / "X.json")
    (tmp_path / "X.json").unlink()  # a result deleted by hand: its weights folder is still guarded
    with pytest.raises(ResultError, match=r"already exists \(the weights of an earlier run for X\.json\); pass --overwrite"):
        ResultClaim(tmp_path / "X.json")
    (tmp_path / "X.weights" / "notes.md").write_text("mine")
    with pytest.raises(ResultError, match="holds notes.md, which amp-parity did not write"):
        ResultClaim(tmp_path / "X.json", overwrite=True)
    assert (tmp_path / "X.weights" / "a.safetensors").read_text() == "old-a"


def test_overwrite_replaces_the_result_and_its_own_weights(tmp_path: Path) -> None:
    """With --overwrite a result and the weights folder the harness wrote for it are replaced together."""
    _publish(tmp_path / "X.json", "old")
    _publish(tmp_path / "X.json", "new", overwrite=True)
    assert (tmp_path / "X.weights" / "a.safetensors").read_text() == "new-a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.json", "X.weights"]


def test_a_result_never_takes_the_weights_folder_of_another(tmp_path: Path) -> None:
    """``B.txt`` beside ``B.json`` gets its own folder; ``B.txt`` vs ``B.txt.json`` (one folder) is refused, even with --overwrite."""
    _publish(tmp_path / "B.json", "json")
    _publish(tmp_path / "B.txt", "txt")
    assert _weights(load_result(tmp_path / "B.json"), 0) == str(tmp_path / "B.weights" / "a.safetensors")
    assert (tmp_path / "B.weights" / "a.safetensors").read_text() == "json-a"
    with pytest.raises(ResultError, match=r"B\.txt\.weights holds the weights of 'B\.txt'"):
        ResultClaim(tmp_path / "B.txt.json", overwrite=True)
    assert (tmp_path / "B.txt.weights" / "a.safetensors").read_text() == "txt-a"


@pytest.mark.parametrize("kind", ["fifo", "symlink to a result", "user's file"])
def test_overwrite_refuses_what_is_not_a_result_it_wrote(tmp_path: Path, kind: str) -> None:
    """``--overwrite`` replaces a result file only: a device-like special file, a link or a user's file is refused."""
    path = tmp_path / "X.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink to a result":
        _publish(tmp_path / "real.json")
        path.symlink_to(tmp_path / "real.json")
    else:
        path.write_text("my notes")
    expected = {"fifo": "a device or special file", "symlink to a result": "a symbolic link", "user's file": "a file"}[kind]
    with pytest.raises(ResultError, match=f"X.json is {expected}, not an amp-parity result; --overwrite replaces only those"):
        ResultClaim(path, overwrite=True)
    assert os.path.lexists(path) and not (tmp_path / "X.weights").exists()


def test_a_second_claim_of_the_same_path_is_refused_while_the_first_holds_it(tmp_path: Path) -> None:
    """Two runs with the same new --json: the second is refused at once, and the first still publishes."""
    with ResultClaim(tmp_path / "X.json") as first:
        with pytest.raises(ResultError, match=r"another run is writing .*X\.json .*wait for it to end or choose another --json path"):
            ResultClaim(tmp_path / "X.json")
        with pytest.raises(ResultError, match="another run is writing"):
            ResultClaim(tmp_path / "X")  # another name, the same weights folder
        first.publish(_staged_result(first))
    assert _weights(load_result(tmp_path / "X.json"), 1) == str(tmp_path / "X.weights" / "b.safetensors")


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("z.weights", "--json must be a file name that does not end in .weights"),
        ("folder", "--json must be a file, but it is a folder"),
        ("missing/run.json", "it does not exist. Create it (mkdir -p"),
        ("x" * 240 + ".json", "a name is too long for the file system"),
    ],
)
def test_paths_that_cannot_hold_a_result_are_refused_up_front(tmp_path: Path, name: str, error: str) -> None:
    """A result path that would fail only after the run is refused when claimed, and leaves nothing behind."""
    (tmp_path / "folder").mkdir()
    with pytest.raises((ResultError, UsageError), match=error.replace("(", r"\(").replace(".", r"\.")):
        ResultClaim(tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


def test_a_result_under_proc_is_refused_up_front() -> None:
    """``--json /proc/x.json`` (a folder no file can be made in) is refused when claimed."""
    with pytest.raises(ResultError, match="cannot write a result in /proc: .*Choose another --json path"):
        ResultClaim(Path("/proc/x.json"))


def test_a_failed_publish_keeps_the_old_result_and_weights_and_the_result_can_be_rescued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the result cannot be renamed into place the old pair stays whole, and the new one is saved elsewhere."""
    _publish(tmp_path / "X.json", "old")
    old_result = (tmp_path / "X.json").read_text()
    rescue_dir = tmp_path / "tmp"
    rescue_dir.mkdir()
    monkeypatch.setenv("TMPDIR", str(rescue_dir))
    monkeypatch.setattr("tempfile.tempdir", None)
    _fill_disk_for("X.json", monkeypatch)
    with ResultClaim(tmp_path / "X.json", overwrite=True) as claim:
        result = _staged_result(claim, "new")
        with pytest.raises(ResultError, match=r"cannot write .*X\.json: No space left on device"):
            claim.publish(result)
        assert (tmp_path / "X.json").read_text() == old_result
        assert (tmp_path / "X.weights" / "a.safetensors").read_text() == "old-a"
        published, saved = rescue_result(result)
    assert saved.parent.parent == rescue_dir
    rescued = load_result(saved)
    # Loading judges again (its fake weights cannot be read: error pairs), exactly as judging what was published does.
    assert rescued == assess_result(published) and Path(str(_weights(rescued, 0))).read_text() == "new-a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.json", "X.weights", "tmp"]


def test_publish_or_rescue_hands_back_the_result_where_it_was_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a failed publish the rescued result's records point at its weights in the rescue folder, and the line says where."""
    rescue_dir = tmp_path / "tmp"
    rescue_dir.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(rescue_dir))
    _fill_disk_for("X.json", monkeypatch)
    with ResultClaim(tmp_path / "X.json") as claim:
        published, line, saved = publish_or_rescue(_staged_result(claim, "new"), claim)
    assert line.startswith("error: cannot write") and f"The result was saved to {saved} instead" in line
    where = Path(str(_weights(published, 1)))
    assert where.read_text() == "new-b" and rescue_dir in where.parents and str(where.parent.parent / "result.json") in line
    assert not (tmp_path / "X.json").exists()


def test_report_folder_checks(tmp_path: Path) -> None:
    """``--report`` at a file is refused naming it; missing parents are fine and are not left behind by the check."""
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match=r"--report must be a folder \(or one to create\), but it is a file"):
        check_report_folder(tmp_path / "file", REPORT_FILES)
    with pytest.raises(UsageError, match=r"but .*file is a file"):
        check_report_folder(tmp_path / "file" / "sub", REPORT_FILES)
    check_report_folder(tmp_path / "a" / "b" / "c", REPORT_FILES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    with pytest.raises(ResultError, match="cannot write the report in /proc/r: .*Choose another --report folder"):
        check_report_folder(Path("/proc/r"), REPORT_FILES)


def test_an_existing_report_is_replaced_only_with_overwrite_and_only_as_a_file(tmp_path: Path) -> None:
    """A report already in the folder needs --overwrite; a folder or link where a report file goes is refused even then."""
    (tmp_path / "report.md").write_text("# amp-parity report\n\nan earlier one")
    with pytest.raises(ResultError, match=r"report\.md already exists; pass --overwrite to replace the report in .*another --out folder"):
        check_report_folder(tmp_path, REPORT_FILES, flag="--out")
    check_report_folder(tmp_path, REPORT_FILES, overwrite=True)
    (tmp_path / "losses.png").mkdir()
    with pytest.raises(ResultError, match=r"losses\.png is a folder; --overwrite replaces only report files"):
        check_report_folder(tmp_path, REPORT_FILES, overwrite=True)
    assert (tmp_path / "report.md").read_text() == "# amp-parity report\n\nan earlier one"


@pytest.mark.parametrize("name", ["report.md", "summary.md", "report.html", "losses.png"])
def test_overwrite_replaces_only_report_files_amp_parity_wrote(tmp_path: Path, name: str) -> None:
    """Issue 37 (14): a ``report.md`` of a user's own notes (or a picture of theirs named like a plot) is never replaced, even
    with --overwrite, before the run or when the report is published; a report the harness wrote is."""
    (tmp_path / name).write_text("my notes")
    with pytest.raises(ResultError, match=rf"{name.replace('.', '[.]')} was not written by amp-parity .*--overwrite replaces only"):
        check_report_folder(tmp_path, REPORT_FILES, overwrite=True, flag="--out")
    (tmp_path / name).unlink()
    with ReportClaim(tmp_path, REPORT_FILES, overwrite=True, flag="--out") as claim:
        write_report(committed(), claim.staging)
        (tmp_path / name).write_text("my notes")  # written by the user while the report was drawn
        with pytest.raises(ResultError, match="was not written by amp-parity"):
            claim.publish()
    assert (tmp_path / name).read_text() == "my notes"


def test_a_page_of_another_tool_is_never_replaced(tmp_path: Path) -> None:
    """An HTML page that begins as every page does, but that amp-parity did not write, is refused like a user's notes."""
    (tmp_path / "report.html").write_text("<!DOCTYPE html>\n<html><head><title>my dashboard</title></head></html>\n")
    with pytest.raises(ResultError, match="report[.]html was not written by amp-parity"):
        check_report_folder(tmp_path, REPORT_FILES, overwrite=True, flag="--out")


def test_the_report_begins_as_the_overwrite_check_expects(tmp_path: Path) -> None:
    """The check and the view agree: a report the harness writes is one --overwrite may replace."""
    write_report(committed(), tmp_path)
    check_report_folder(tmp_path, REPORT_FILES, overwrite=True)


def _fill_disk_for(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the atomic writer's final rename onto ``name`` fail as a full disk does (ENOSPC); other renames go through."""
    real_replace = os.replace

    def full_disk(src: str, dst: str) -> None:
        if Path(dst).name == name:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr("harness.files.atomic.os.replace", full_disk)


def test_a_users_safetensors_file_in_a_marked_weights_folder_is_never_deleted(tmp_path: Path) -> None:
    """``--overwrite`` is refused once a user put a ``.safetensors`` of their own into the weights folder (it deleted it)."""
    _publish(tmp_path / "X.json", "old")
    marker = json.loads((tmp_path / "X.weights" / WEIGHTS_MARKER).read_text())
    assert marker == {"result": "X.json", "files": ["a.safetensors", "b.safetensors"]}
    (tmp_path / "X.weights" / "mine.safetensors").write_text("precious")
    with pytest.raises(ResultError, match=r"X\.weights holds mine\.safetensors, which amp-parity did not write"):
        ResultClaim(tmp_path / "X.json", overwrite=True)
    assert (tmp_path / "X.weights" / "mine.safetensors").read_text() == "precious"
    assert (tmp_path / "X.weights" / "a.safetensors").read_text() == "old-a"


def test_a_marker_without_its_file_list_trusts_only_the_files_its_result_names(tmp_path: Path) -> None:
    """A folder marked before markers listed their files: the result's named files are the harness's, nothing else."""
    _publish(tmp_path / "X.json", "old")
    (tmp_path / "X.weights" / WEIGHTS_MARKER).write_text(json.dumps({"result": "X.json"}))
    _publish(tmp_path / "X.json", "new", overwrite=True)  # the result names a and b: the folder is replaced
    assert (tmp_path / "X.weights" / "a.safetensors").read_text() == "new-a"
    (tmp_path / "X.weights" / WEIGHTS_MARKER).write_text(json.dumps({"result": "X.json"}))
    (tmp_path / "X.weights" / "c.safetensors").write_text("mine")
    with pytest.raises(ResultError, match=r"holds c\.safetensors, which amp-parity did not write"):
        ResultClaim(tmp_path / "X.json", overwrite=True)
    (tmp_path / "X.weights" / "c.safetensors").unlink()
    (tmp_path / "X.json").unlink()  # no result to say which files are its own: nothing can be proven ours
    with pytest.raises(ResultError, match=r"does not list its files; amp-parity cannot tell them from a user's"):
        ResultClaim(tmp_path / "X.json", overwrite=True)
    assert (tmp_path / "X.weights" / "b.safetensors").read_text() == "new-b"


def test_a_refused_claim_names_the_run_that_holds_the_weights_folder(tmp_path: Path) -> None:
    """``B.txt.json`` refused while ``B.txt`` runs (one weights folder) names ``B.txt``, the holder, not itself."""
    with ResultClaim(tmp_path / "B.txt"):
        with pytest.raises(ResultError) as refused:
            ResultClaim(tmp_path / "B.txt.json")
    assert str(refused.value) == (
        f"another run is writing {tmp_path / 'B.txt'} (it holds {tmp_path / '.B.txt.weights.lock'}); "
        "wait for it to end or choose another --json path."
    )


def test_a_users_file_at_the_lock_name_is_never_deleted(tmp_path: Path) -> None:
    """A user's ``.b.weights.lock`` is refused and kept (a run deleted it); an empty one is left empty; a killed run's is reused."""
    lock = tmp_path / ".b.weights.lock"
    lock.write_text("my notes")
    with pytest.raises(ResultError, match=r"\.b\.weights\.lock is not an amp-parity lock file, .* Move it away or choose another --json"):
        ResultClaim(tmp_path / "b.json")
    assert lock.read_text() == "my notes" and sorted(p.name for p in tmp_path.iterdir()) == [".b.weights.lock"]
    lock.write_text("")
    _publish(tmp_path / "b.json")
    assert lock.read_text() == ""
    lock.unlink()
    lock.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ResultError, match=r"\.b\.weights\.lock is in the way"):
        ResultClaim(tmp_path / "b.json", overwrite=True)
    assert lock.is_symlink() and not (tmp_path / "elsewhere").exists()
    lock.unlink()
    lock.write_text("amp-parity lock\npid 1\n/old/b.json\n")  # a killed run's: taken over, and removed at the end
    _publish(tmp_path / "b.json", overwrite=True)
    assert not os.path.lexists(lock)


def _stage_report(claim: ReportClaim, tag: str = "new") -> None:
    for name in ("report.md", "losses.png", "loss_diff.png", "timing.png"):
        (claim.staging / name).write_text(f"{tag} {name}")


def test_a_report_written_into_the_folder_during_the_run_is_not_replaced(tmp_path: Path) -> None:
    """The report folder is checked again when written: a user's ``report.md`` from during the run stays, nothing is half-written."""
    with ReportClaim(tmp_path / "rep", REPORT_FILES) as claim:
        (tmp_path / "rep" / "report.md").write_text("written by hand during the run")
        _stage_report(claim)
        with pytest.raises(ResultError, match=r"rep/report\.md appeared during the run; it is replaced only with --overwrite"):
            claim.publish()
    assert (tmp_path / "rep" / "report.md").read_text() == "written by hand during the run"
    assert sorted(p.name for p in (tmp_path / "rep").iterdir()) == ["report.md"]
    (tmp_path / "rep" / "report.md").write_text("# amp-parity report\n\nan earlier one")  # --overwrite replaces only its own
    with ReportClaim(tmp_path / "rep", REPORT_FILES, overwrite=True) as claim:
        _stage_report(claim)
        assert [p.name for p in claim.publish()] == ["report.md", "losses.png", "loss_diff.png", "timing.png"]
    assert (tmp_path / "rep" / "report.md").read_text() == "new report.md"
    assert sorted(p.name for p in (tmp_path / "rep").iterdir()) == ["loss_diff.png", "losses.png", "report.md", "timing.png"]


def test_a_second_claim_of_a_report_folder_is_refused_and_an_unused_folder_is_not_left(tmp_path: Path) -> None:
    """Two runs with one ``--report``: the second is refused at once; an unpublished claim removes the folders it created."""
    with ReportClaim(tmp_path / "a" / "rep", REPORT_FILES):
        with pytest.raises(ResultError) as refused:
            ReportClaim(tmp_path / "a" / "rep", REPORT_FILES, overwrite=True)
        lock = tmp_path / "a" / "rep" / ".amp-parity-report.lock"
        assert str(refused.value) == (
            f"another run is writing the report in {tmp_path / 'a' / 'rep'} (it holds {lock}); "
            "wait for it to end or choose another --report folder."
        )
    assert list(tmp_path.iterdir()) == []  # created for the run, removed when it wrote nothing
    (tmp_path / "mine").mkdir()
    with ReportClaim(tmp_path / "mine", REPORT_FILES):
        pass
    assert list(tmp_path.iterdir()) == [tmp_path / "mine"]  # the user's folder stays


@pytest.mark.parametrize(
    ("report", "allowed"),
    [
        ("X.json", "a folder apart from the result"),
        ("X.weights", "a folder apart from the result"),
        ("X.weights/sub", "a folder apart from the result"),
        ("Y.weights", "a folder outside amp-parity's weights folder"),
        ("Y.weights/sub", "a folder outside amp-parity's weights folder"),
    ],
)
def test_a_report_folder_is_never_the_result_or_a_weights_folder(tmp_path: Path, report: str, allowed: str) -> None:
    """``--report`` at the result, in its weights folder or in another's is refused (it made every later --overwrite refuse)."""
    _publish(tmp_path / "X.json", "old")
    _publish(tmp_path / "Y.json", "old")
    (tmp_path / "X.json").unlink()  # so --report X.json would otherwise be a folder to create
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with ResultClaim(tmp_path / "X.json", overwrite=True) as claim:
        with pytest.raises(UsageError, match=f"--report must be {allowed}"):
            ReportClaim(tmp_path / report, REPORT_FILES, result=claim)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_a_result_named_like_a_report_file_in_the_report_folder_is_refused(tmp_path: Path) -> None:
    """``--json DIR/report.md --report DIR``: the report would replace the result; refused before the run."""
    with ResultClaim(tmp_path / "report.md") as claim:
        with pytest.raises(UsageError, match=r"--report must be a folder where no report file is the result"):
            ReportClaim(tmp_path, REPORT_FILES, result=claim)


def _failed_for_space(claim: ResultClaim, reason: str) -> MatrixResult:
    """A result whose first cell ended in ``error`` with ``reason`` (its weights never written), the second still staged."""
    import dataclasses

    from harness.model.result import Status

    result = _staged_result(claim, "new")
    (claim.staging / "a.safetensors").unlink()
    first = dataclasses.replace(result.cells[0], status=Status.ERROR, reason=reason, record=None)
    return dataclasses.replace(result, cells=(first, *result.cells[1:]))


@pytest.mark.parametrize(
    ("reason", "free"),
    [("python script with_autocast failed: SafetensorError: Error while serializing: I/O error: No space left on device (os error 28)",
      None),
     ("r script with_autocast failed: Could not write the final weights: problem writing to connection.", 100)],
    ids=["python", "r"],
)
def test_overwrite_by_a_run_that_ran_out_of_space_keeps_the_old_result_and_rescues_the_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reason: str, free: int | None
) -> None:
    """Weights hit ENOSPC and the error-only result replaced the good one: now the old pair stays, the new is saved elsewhere."""
    import shutil

    _publish(tmp_path / "X.json", "old")
    old_result = (tmp_path / "X.json").read_text()
    rescue_dir = tmp_path / "tmp"
    rescue_dir.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(rescue_dir))
    if free is not None:  # R says only "problem writing to connection": the file system's free space tells
        real = shutil.disk_usage
        monkeypatch.setattr("harness.store.result_claim.shutil.disk_usage",
                            lambda p: real(p)._replace(free=free) if Path(p) == tmp_path else real(p))
    with ResultClaim(tmp_path / "X.json", overwrite=True) as claim:
        published, line, saved = publish_or_rescue(_failed_for_space(claim, reason), claim)
    assert line.startswith(f"error: {published.cells[0].id} failed")
    assert f"; {tmp_path / 'X.json'} and its weights were kept: a run that failed for lack of space does not replace them." in line
    assert line.endswith(f"The result was saved to {saved} instead (weights beside it).")
    assert (tmp_path / "X.json").read_text() == old_result
    assert sorted(p.name for p in (tmp_path / "X.weights").iterdir()) == [WEIGHTS_MARKER, "a.safetensors", "b.safetensors"]
    assert saved is not None and rescue_dir in saved.parents and Path(str(_weights(published, 1))).read_text() == "new-b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.json", "X.weights", "tmp"]


def test_a_run_that_ran_out_of_space_is_still_published_where_nothing_is_replaced(tmp_path: Path) -> None:
    """With nothing to overwrite the failed run's result goes where it was asked (its error cells say why)."""
    with ResultClaim(tmp_path / "X.json") as claim:
        _, line, saved = publish_or_rescue(_failed_for_space(claim, "No space left on device (os error 28)"), claim)
    assert (line, saved) == (f"result written to {tmp_path / 'X.json'}", tmp_path / "X.json")


def test_a_report_folder_reached_through_a_link_into_the_weights_is_refused(tmp_path: Path) -> None:
    """A link to the weights folder (or to the result's path) is the same place: refused, and nothing is written through it."""
    _publish(tmp_path / "X.json", "old")
    (tmp_path / "link").symlink_to(tmp_path / "X.weights")
    with ResultClaim(tmp_path / "X.json", overwrite=True) as claim:
        with pytest.raises(UsageError, match="--report must be a folder apart from the result"):
            ReportClaim(tmp_path / "link" / "r", REPORT_FILES, result=claim)
    with pytest.raises(UsageError, match="--out must be a folder outside amp-parity's weights folder"):
        ReportClaim(tmp_path / "link", REPORT_FILES, overwrite=True, flag="--out")  # `report --out`: no run, the marker tells
    assert sorted(p.name for p in (tmp_path / "X.weights").iterdir()) == [WEIGHTS_MARKER, "a.safetensors", "b.safetensors"]


def test_a_result_with_resume_checkpoints_in_its_weights_folder_can_be_replaced(tmp_path: Path) -> None:
    """Issue 48 (1): a resume cell leaves ``<cell>.checkpoint.safetensors`` and ``<cell>.checkpoint.json`` in staging (and its
    reconciled run ``<cell>.reconciled.checkpoint.*``); every file the run staged is listed, so ``--overwrite`` replaces them."""
    with ResultClaim(tmp_path / "X.json") as claim:
        result = _staged_result(claim, "old")
        for name in ("a.checkpoint.safetensors", "a.checkpoint.json", "a.reconciled.checkpoint.safetensors",
                     "a.reconciled.checkpoint.json", "a.trace.safetensors"):
            (claim.staging / name).write_text(name)
        claim.publish(result)
    marker = json.loads((tmp_path / "X.weights" / WEIGHTS_MARKER).read_text())
    assert "a.checkpoint.json" in marker["files"] and "a.reconciled.checkpoint.json" in marker["files"]
    _publish(tmp_path / "X.json", "new", overwrite=True)
    assert (tmp_path / "X.weights" / "a.safetensors").read_text() == "new-a"
    assert not (tmp_path / "X.weights" / "a.checkpoint.json").exists()


def test_a_marker_that_listed_only_tensors_owns_their_checkpoints_json(tmp_path: Path) -> None:
    """A folder marked before the marker listed every staged file (``.safetensors`` only): a checkpoint's ``.json`` beside its
    listed ``.checkpoint.safetensors`` is the harness's; any other ``.json`` is still a user's."""
    _publish(tmp_path / "X.json", "old")
    folder = tmp_path / "X.weights"
    (folder / "a.checkpoint.safetensors").write_text("tensors")
    (folder / "a.checkpoint.json").write_text("{}")
    (folder / WEIGHTS_MARKER).write_text(json.dumps({"result": "X.json", "files": ["a.checkpoint.safetensors", "a.safetensors",
                                                                                   "b.safetensors"]}))
    (folder / "notes.json").write_text("mine")
    with pytest.raises(ResultError, match=r"holds notes\.json, which amp-parity did not write"):
        ResultClaim(tmp_path / "X.json", overwrite=True)
    (folder / "notes.json").unlink()
    _publish(tmp_path / "X.json", "new", overwrite=True)
    assert (folder / "a.safetensors").read_text() == "new-a"


def test_a_marker_over_its_readers_limit_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness reads back what it writes: a weights folder whose marker would be over ``MARKER_MAX_BYTES`` is refused
    before anything is published (the old pair stays), not written for the next ``--overwrite`` to refuse."""
    _publish(tmp_path / "X.json", "old")
    monkeypatch.setattr("harness.store.result_claim.MARKER_MAX_BYTES", 60)
    with pytest.raises(ResultError, match=r"would list 2 files in \d+ bytes, over the 60 a marker may hold"):
        _publish(tmp_path / "X.json", "new", overwrite=True)
    assert (tmp_path / "X.weights" / "a.safetensors").read_text() == "old-a"
