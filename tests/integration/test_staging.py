"""Staging folders under a real kill: a killed owner's folder is swept by the next one, a live owner's is not.

The rest of the staging folders' life is in ``tests/unit/files/test_staging.py``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from harness.files.staging import StagingDir, sweep_stale

_KILLED_OWNER = """
import os, signal, sys
from pathlib import Path
from harness.files.staging import StagingDir
staging = StagingDir(Path(sys.argv[1]), "stage-")
(staging.path / "weights.safetensors").write_bytes(b"w")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_owners_folder_is_swept_and_a_live_ones_is_not(tmp_path: Path) -> None:
    """After SIGKILL the owner's lock is gone and the next staging folder sweeps it; the live one and strangers stay."""
    done = subprocess.run([sys.executable, "-c", _KILLED_OWNER, str(tmp_path)], capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    (dead,) = tmp_path.iterdir()
    (tmp_path / "stage-user-file").write_text("not a folder")
    (tmp_path / "other").mkdir()
    with StagingDir(tmp_path, "stage-") as live:
        assert not dead.exists() and live.path.is_dir()
        assert sweep_stale(tmp_path, "stage-") == []  # the live folder is locked by its owner
        assert live.path.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "stage-user-file"]
