"""Fixtures under real processes: concurrent builders agree, and a writer killed mid-write leaves nothing the next build keeps.

Determinism, verification and rebuilding in one process are in ``tests/unit/workload/test_fixtures.py``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

from harness.workload.fixtures import ensure_fixtures
from harness.workload.spec import WorkloadSpec


def _build_in_child(cache: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue.put(ensure_fixtures(WorkloadSpec.from_preset("tiny", num_batches=40), Path(cache)).sha256)


def test_concurrent_builders_both_succeed_with_identical_bytes(tmp_path: Path) -> None:
    """Two processes building the same fixture at once both succeed, with one file and no leftovers."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    children = [ctx.Process(target=_build_in_child, args=(str(tmp_path), queue)) for _ in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0
    hashes = {queue.get(timeout=5) for _ in children}
    assert len(hashes) == 1
    folder = next(p for p in tmp_path.iterdir() if p.is_dir())
    assert sorted(os.listdir(folder)) == [".lock", "fixtures.safetensors", "manifest.json"]


_KILLED_MID_WRITE = """
import os, signal, sys
from pathlib import Path
import harness.workload.fixtures as fixtures
from harness.workload.spec import WorkloadSpec

def half_then_killed(arrays, path, metadata=None):
    Path(path).write_bytes(b"\\0" * 4_000_000)  # part of the file is on disk...
    os.kill(os.getpid(), signal.SIGKILL)         # ...when the writer is killed: no clean-up runs

fixtures.save_file = half_then_killed
fixtures.ensure_fixtures(WorkloadSpec.from_preset("tiny", num_batches=40), Path(sys.argv[1]))
"""


def test_a_writer_killed_mid_write_leaves_a_temporary_that_the_next_build_removes(tmp_path: Path) -> None:
    """SIGKILL during a fixture write leaves a big ``.tmp``; the next caller (under the lock) removes it and builds."""
    done = subprocess.run([sys.executable, "-c", _KILLED_MID_WRITE, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL
    folder = next(p for p in tmp_path.iterdir() if p.is_dir())
    left = [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1 and left[0].stat().st_size == 4_000_000
    fixture = ensure_fixtures(WorkloadSpec.from_preset("tiny", num_batches=40), tmp_path)
    assert sorted(os.listdir(folder)) == [".lock", "fixtures.safetensors", "manifest.json"]
    assert fixture.path.stat().st_size > 0


_KILLED_IN_SAFETENSORS = """
import os, signal, sys
from pathlib import Path
import harness.workload.fixtures as fixtures
from harness.workload.spec import WorkloadSpec

def killed_inside_save_file(arrays, path, metadata=None):
    # safetensors 0.8 writes beside its target, into ".tmp" and six characters, then renames: killed before that
    (Path(path).parent / ".tmpAb3dE9").write_bytes(b"\\\\0" * 4_000_000)
    os.kill(os.getpid(), signal.SIGKILL)

fixtures.save_file = killed_inside_save_file
fixtures.ensure_fixtures(WorkloadSpec.from_preset("tiny", num_batches=40), Path(sys.argv[1]))
"""


def test_safetensors_own_temporary_of_a_killed_build_is_removed_by_the_next(tmp_path: Path) -> None:
    """A build killed inside ``save_file`` leaves safetensors' ``.tmpXXXXXX`` (303 MB at ``recipe``); the next build sweeps it too."""
    done = subprocess.run([sys.executable, "-c", _KILLED_IN_SAFETENSORS, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    folder = next(p for p in tmp_path.iterdir() if p.is_dir())
    assert (folder / ".tmpAb3dE9").stat().st_size > 0
    (folder / ".tmp-mine").write_text("not safetensors' name: left alone")
    ensure_fixtures(WorkloadSpec.from_preset("tiny", num_batches=40), tmp_path)
    assert sorted(os.listdir(folder)) == [".lock", ".tmp-mine", "fixtures.safetensors", "manifest.json"]
