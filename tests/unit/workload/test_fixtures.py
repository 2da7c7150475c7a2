"""Fixtures: deterministic bytes, verified on load, rebuilt when damaged (concurrency and kills: ``tests/integration/test_fixtures.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from harness.errors import ExitCode, FixtureError
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
    assert done.returncode == ExitCode.USAGE_ERROR and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: cannot write the fixture cache {next(tmp_path.iterdir())}: Error while serializing: I/O error: No space left on "
        "device (os error 28). This spec's fixtures take 0.5 MiB: free that much space there, or point AMP_PARITY_FIXTURES at "
        "a folder with room."
    ]
    assert [p.name for p in next(tmp_path.iterdir()).iterdir()] == [".lock"]
