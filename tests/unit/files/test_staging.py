"""Staging folders: a released folder outlives its close (a killed owner's is swept: ``tests/integration/test_staging.py``)."""

from __future__ import annotations

from pathlib import Path

from harness.files.staging import StagingDir


def test_released_folder_is_no_longer_deleted_on_close(tmp_path: Path) -> None:
    """A staging folder renamed into its final place and released survives the close."""
    staging = StagingDir(tmp_path, "stage-")
    staging.path.rename(tmp_path / "final")
    staging.release()
    staging.close()
    assert (tmp_path / "final").is_dir()
