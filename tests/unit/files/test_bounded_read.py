"""Every file the harness reads is read as one kind: a regular file, bounded, never a device read forever or a FIFO
waited on. Each user-named file (a result, a spec file, ``--installations``, ``--known-differences``, a weights folder's
marker, a fixture manifest, a weights file) is refused in one line when it is not one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness.files.bounded_read import FileFormatError, FileSyntaxError, check_regular_file, read_bytes, read_json_file, read_toml_file
from harness.judge.weight_findings import load_weights
from harness.store.result_file import WEIGHTS_MARKER
from tests.support import GOLDEN_RESULT, run_cli


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(("kind", "says"), [("fifo", "a FIFO"), ("device", "a character device"), ("folder", "a folder")])
def test_what_is_not_a_regular_file_is_refused_unread(tmp_path: Path, kind: str, says: str) -> None:
    """A FIFO (opened without waiting for a writer), ``/dev/zero`` and a folder are refused before a byte is read."""
    path = {"fifo": _fifo(tmp_path) if kind == "fifo" else None, "device": Path("/dev/zero"), "folder": tmp_path}[kind]
    assert path is not None
    for read in (lambda p: read_bytes(p, 10), lambda p: check_regular_file(p, 10), lambda p: read_json_file(p, 10)):
        with pytest.raises(FileFormatError, match=f"^not a regular file: it is {says}$"):
            read(path)


def test_a_file_over_its_bound_is_refused_by_its_size(tmp_path: Path) -> None:
    """A sparse file larger than the bound is refused from its size, not read into memory."""
    path = tmp_path / "big"
    with open(path, "wb") as file:
        file.truncate(2**21)
    with pytest.raises(FileFormatError, match="larger than 1 MiB"):
        read_bytes(path, 2**20)
    with pytest.raises(FileFormatError, match="larger than 1000 bytes"):
        check_regular_file(path, 1000)


def test_json_and_toml_are_parsed_and_their_errors_are_syntax_errors(tmp_path: Path) -> None:
    """Text that is not JSON or TOML is a :class:`FileSyntaxError` carrying the parser's words."""
    path = tmp_path / "f"
    path.write_text('a = 1\n[b]\nc = "d"\n')
    assert read_toml_file(path, 100) == {"a": 1, "b": {"c": "d"}}
    with pytest.raises(FileSyntaxError, match="Expecting value"):
        read_json_file(path, 100)
    path.write_text("[a\n")
    with pytest.raises(FileSyntaxError):
        read_toml_file(path, 100)


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_known_differences_that_is_not_a_file_is_one_line(tmp_path: Path, kind: str) -> None:
    """``--known-differences /dev/zero`` or a FIFO: one line, nothing read (a FIFO hung)."""
    path = Path("/dev/zero") if kind == "device" else _fifo(tmp_path)
    done = run_cli("report", str(GOLDEN_RESULT), "--out", str(tmp_path / "out"), "--known-differences", str(path))
    assert done.returncode != 0 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"error: {path} is not a file holding a known-differences list (not a regular file: it is ")
    assert not (tmp_path / "out").exists()


def _golden_copy(folder: Path) -> Path:
    """The golden result and its weights folder, copied into ``folder``."""
    shutil.copyfile(GOLDEN_RESULT, folder / "golden.json")
    shutil.copytree(GOLDEN_RESULT.parent / "golden.weights", folder / "golden.weights")
    return folder / "golden.json"


def test_a_marker_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A weights folder's marker replaced by a FIFO: ``report`` says so in one line; it waited for a writer forever."""
    path = _golden_copy(tmp_path)
    (tmp_path / "golden.weights" / WEIGHTS_MARKER).unlink()
    os.mkfifo(tmp_path / "golden.weights" / WEIGHTS_MARKER)
    done = run_cli("report", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode != 0 and len(done.stderr.splitlines()) == 1
    assert "cannot be read (not a regular file: it is a FIFO)" in done.stderr


def test_a_weights_folder_with_a_fifo_marker_is_not_replaced(tmp_path: Path) -> None:
    """``run --json --overwrite`` looks at the marker of the weights folder it would replace: a FIFO there is refused at once
    as a folder amp-parity did not write (the look used to wait for a writer)."""
    path = _golden_copy(tmp_path)
    (tmp_path / "golden.weights" / WEIGHTS_MARKER).unlink()
    os.mkfifo(tmp_path / "golden.weights" / WEIGHTS_MARKER)
    done = run_cli("run", "--frontend", "python", "--mode", "default", "--json", str(path), "--overwrite")
    assert done.returncode != 0
    assert f"{tmp_path / 'golden.weights'} was not written by amp-parity" in done.stderr


def test_a_weights_file_that_is_a_fifo_is_unreadable_not_waited_on(tmp_path: Path) -> None:
    """A weights file replaced by a FIFO is an unreadable file, named, never a hang."""
    fifo = _fifo(tmp_path)
    with pytest.raises(ValueError, match=f"^cannot read the weights in {fifo}: not a regular file: it is a FIFO$"):
        load_weights(fifo)


def test_a_fixture_manifest_that_is_a_fifo_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixture cache whose manifest is a FIFO is rebuilt with a warning; reading it waited forever."""
    from harness.workload.fixtures import ensure_fixtures
    from harness.workload.spec import WorkloadSpec

    spec = WorkloadSpec.from_preset("tiny")
    monkeypatch.setenv("AMP_PARITY_FIXTURES", str(tmp_path))
    fixture = ensure_fixtures(spec)
    manifest = fixture.path.parent / "manifest.json"
    kept = json.loads(manifest.read_text())
    manifest.unlink()
    os.mkfifo(manifest)
    with pytest.warns(UserWarning, match="manifest unreadable \\(not a regular file: it is a FIFO\\); rebuilding it"):
        again = ensure_fixtures(spec)
    assert again.sha256 == fixture.sha256 and json.loads(manifest.read_text()) == kept
