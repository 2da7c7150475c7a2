"""Fixtures: deterministic bytes, verified on load, rebuilt when damaged, safe under concurrency."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.errors import FixtureError
from harness.workload.fixtures import FixtureWarning, ensure_fixtures, load_fixture_arrays
from harness.workload.spec import WorkloadSpec


def _spec(**overrides: object) -> WorkloadSpec:
    return WorkloadSpec.from_preset("tiny", **overrides)


def test_same_spec_gives_the_same_bytes(tmp_path: Path) -> None:
    """Two caches built independently from one spec hold byte-identical files."""
    a = ensure_fixtures(_spec(), tmp_path / "a")
    b = ensure_fixtures(_spec(), tmp_path / "b")
    assert a.path.read_bytes() == b.path.read_bytes()
    assert a.sha256 == b.sha256


def test_different_seed_gives_different_tensors(tmp_path: Path) -> None:
    """Another seed draws other data and weights (and lives under another key)."""
    a = load_fixture_arrays(ensure_fixtures(_spec(seed=0), tmp_path))
    b = load_fixture_arrays(ensure_fixtures(_spec(seed=1), tmp_path))
    assert not np.array_equal(a["data"], b["data"])
    assert not np.array_equal(a["layer0.weight"], b["layer0.weight"])


def test_tensors_have_the_contract_shapes_and_init_range(tmp_path: Path) -> None:
    """Data, targets and each layer's weight/bias have the contract's shapes; weights lie in ±1/sqrt(in)."""
    spec = _spec(num_layers=2, out_size=64)
    arrays = load_fixture_arrays(ensure_fixtures(spec, tmp_path))
    assert arrays["data"].shape == (10, 32, 128) and arrays["targets"].shape == (10, 32, 64)
    assert arrays["layer0.weight"].shape == (128, 128) and arrays["layer1.weight"].shape == (64, 128)
    assert arrays["layer1.bias"].shape == (64,)
    assert all(a.dtype == np.float32 for a in arrays.values())
    assert np.abs(arrays["layer0.weight"]).max() <= 1 / np.sqrt(128)


def test_lr_and_epochs_reuse_the_same_fixture(tmp_path: Path) -> None:
    """Fields that do not change the tensors do not change the cache key."""
    assert ensure_fixtures(_spec(lr=0.01, epochs=5), tmp_path).path == ensure_fixtures(_spec(), tmp_path).path


@pytest.mark.parametrize("damage", ["truncate", "corrupt", "other_spec", "no_manifest"])
def test_damaged_cache_is_detected_and_rebuilt(tmp_path: Path, damage: str) -> None:
    """A truncated, corrupted, mismatching or manifest-less file is rebuilt with a warning, same bytes."""
    good = ensure_fixtures(_spec(), tmp_path)
    original = good.path.read_bytes()
    manifest = good.path.parent / "manifest.json"
    if damage == "truncate":
        good.path.write_bytes(original[: len(original) // 2])
    elif damage == "corrupt":
        good.path.write_bytes(original[:-8] + b"\x00" * 8)
    elif damage == "other_spec":
        data = json.loads(manifest.read_text())
        data["fields"]["seed"] = 99
        manifest.write_text(json.dumps(data))
    else:
        manifest.unlink()
    with pytest.warns(FixtureWarning, match="rebuilding"):
        rebuilt = ensure_fixtures(_spec(), tmp_path)
    assert rebuilt.path.read_bytes() == original


def test_unwritable_cache_is_a_clear_error(tmp_path: Path) -> None:
    """A cache folder that cannot be created gives a FixtureError naming the fix."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(FixtureError, match="AMP_PARITY_FIXTURES"):
        ensure_fixtures(_spec(), blocker / "cache")


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


def test_a_read_only_cache_with_valid_fixtures_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache on a read-only file system is read when its fixture is valid, and refused in one line (not rebuilt) when it is not."""
    import errno

    spec = WorkloadSpec.from_preset("tiny", num_batches=40)
    built = ensure_fixtures(spec, tmp_path)
    real_open = os.open

    def read_only(path: object, flags: int, *args: object) -> int:  # EROFS for any write under the cache (root ignores chmod)
        if str(path).startswith(str(tmp_path)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr("harness.workload.fixtures.os.open", read_only)
    assert ensure_fixtures(spec, tmp_path) == built
    (built.path.parent / ".lock").unlink()
    assert ensure_fixtures(spec, tmp_path) == built  # no lock file either: nobody can write there, nothing to wait for
    built.path.write_bytes(b"corrupt")
    with pytest.raises(FixtureError, match=r"is read-only and its fixture cannot be used \(data file has 7 bytes"):
        ensure_fixtures(spec, tmp_path)


def test_a_full_fixture_cache_is_one_fixture_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """safetensors reports a full disk as a SafetensorError (not an OSError): ``prepare`` says so in one line, leaves no file."""
    from safetensors import SafetensorError

    import harness.workload.fixtures
    from tests.support import run_cli

    def full_disk(*args: object, **kwargs: object) -> None:
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(harness.workload.fixtures, "save_file", full_disk)
    monkeypatch.setenv("AMP_PARITY_FIXTURES", str(tmp_path))
    done = run_cli("prepare", "--preset", "tiny")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: cannot write the fixture cache {next(tmp_path.iterdir())}: Error while serializing: I/O error: No space left on "
        "device (os error 28). This spec's fixtures take 0.5 MiB: free that much space there, or point AMP_PARITY_FIXTURES at "
        "a folder with room."
    ]
    assert [p.name for p in next(tmp_path.iterdir()).iterdir()] == [".lock"]
