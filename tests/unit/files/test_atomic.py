"""Atomic writes: the target holds the old content or the whole new one, never a partial file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harness.files.atomic import atomic_path, write_json_atomic


def test_failure_inside_the_block_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    """An exception (Ctrl-C included) while writing leaves the old content and removes the temporary."""
    target = tmp_path / "result.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as tmp:
        tmp.write_text("half-writ")
        raise KeyboardInterrupt
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_success_replaces_the_file(tmp_path: Path) -> None:
    """A completed block renames the new content into place."""
    target = tmp_path / "deep" / "result.json"
    write_json_atomic(target, {"a": 1})
    assert target.read_text() == '{\n  "a": 1\n}\n'
    assert [p.name for p in target.parent.iterdir()] == ["result.json"]


def test_written_files_get_the_usual_permissions(tmp_path: Path) -> None:
    """A file written atomically has the mode a plain open() gives under the umask, not mkstemp's owner-only 0600."""
    old = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o644
