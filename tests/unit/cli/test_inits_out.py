"""``inits --out DIR`` writes only into a new or empty folder, unless told ``--overwrite``: it touches nothing a user owns."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.cli.commands.inits import command
from harness.errors import UsageError


def test_a_folder_holding_files_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """One line naming --out, the folder and the fix; the user's file is left as it was."""
    (tmp_path / "mine.txt").write_text("keep", encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        command(argparse.Namespace(out=tmp_path, overwrite=False))
    assert "--out" in str(refused.value) and "--overwrite" in str(refused.value) and "\n" not in str(refused.value)
    assert (tmp_path / "mine.txt").read_text(encoding="utf-8") == "keep"
    file_instead = tmp_path / "mine.txt"
    with pytest.raises(UsageError):
        command(argparse.Namespace(out=file_instead, overwrite=True))
