"""Fixtures: the spec's data, targets and initial weights, drawn once from a seeded NumPy generator.

Both frontends load exactly these tensors, so parity never depends on either frontend's RNG or init
code. Files are keyed by the hash of the fields that decide them (``FIXTURE_FIELDS``), written
atomically under a lock, and verified against their manifest on every load: a truncated, corrupted or
mismatching file is rebuilt with a warning.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from harness.errors import FixtureError
from harness.files.atomic import atomic_path, temporaries_of, write_json_atomic
from harness.files.bounded_read import read_json_file
from harness.files.paths import fixtures_dir
from harness.workload.spec import FIXTURE_FIELDS, WorkloadSpec

__all__ = [
    "FIXTURE_SCHEMA_VERSION", "FixtureFile", "FixtureWarning", "draw_fixture_arrays", "ensure_fixtures", "iter_fixture_arrays",
    "load_fixture_arrays", "tensor_sha256",
]

log = logging.getLogger(__name__)

FIXTURE_SCHEMA_VERSION = 1
_DATA_FILE = "fixtures.safetensors"
_MANIFEST_FILE = "manifest.json"
#: A manifest holds a digest, the spec's fields and one checksum per tensor: a few kB. A larger one is not a manifest.
_MANIFEST_MAX_BYTES = 2**20
_CHUNK = 1 << 24
#: The temporary file safetensors' ``save_file`` writes beside its target (Rust's tempfile crate: ``.tmp`` + 6 characters).
_SAFETENSORS_TEMP = re.compile(r"\.tmp[A-Za-z0-9]{6}")


class FixtureWarning(UserWarning):
    """A cached fixture was unusable and has been rebuilt."""


@dataclass(frozen=True)
class FixtureFile:
    """A verified fixture file and its manifest's checksum."""

    path: Path
    sha256: str
    digest: str


def ensure_fixtures(spec: WorkloadSpec, cache: Path | None = None) -> FixtureFile:
    """The spec's fixture file, built if absent and rebuilt (with a warning) if unusable.

    Concurrent callers (pytest-xdist workers, parallel runs) serialise on a lock file, and the data
    file is renamed into place before its manifest, so no caller ever reads a partial file.

    Raises:
        FixtureError: the cache directory cannot be created or written.
    """
    digest = spec.digest(FIXTURE_FIELDS)
    folder = (cache or fixtures_dir()) / digest
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with _locked(folder / ".lock") as writable:
            if writable:
                _sweep_dead_writers(folder)
            problem = _verify(folder, spec, digest)
            if problem is None:
                return _read_file(folder, digest)
            if not writable:
                raise FixtureError(
                    f"the fixture cache {folder} is read-only and its fixture cannot be used ({problem}). "
                    "Make it writable or point AMP_PARITY_FIXTURES at a writable directory."
                )
            if problem != "absent":
                warnings.warn(f"fixture cache {folder}: {problem}; rebuilding it.", FixtureWarning, stacklevel=2)
            return _build(folder, spec, digest)
    except OSError as err:
        raise FixtureError(
            f"cannot write the fixture cache {folder}: {err.strerror or err}. "
            "Make it writable or point AMP_PARITY_FIXTURES at a writable directory."
        ) from err


def load_fixture_arrays(fixture: FixtureFile) -> dict[str, np.ndarray]:
    """The fixture tensors as float32 NumPy arrays (for the float64 reference and tests)."""
    return load_file(str(fixture.path))


def draw_fixture_arrays(spec: WorkloadSpec) -> dict[str, np.ndarray]:
    """Draw the tensors from ``numpy.random.default_rng(seed)`` in a fixed order (:func:`iter_fixture_arrays`)."""
    return dict(iter_fixture_arrays(spec))


def iter_fixture_arrays(spec: WorkloadSpec) -> Iterator[tuple[str, np.ndarray]]:
    """The tensors one by one, in the order they are drawn, each drawn only when asked for.

    The model's parameters (:data:`harness.contract.models.MODELS`) follow torch's default init distribution for a
    Linear layer, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), so the workload trains like the recipe's; the values themselves
    come from NumPy.
    Lazy so that a check can stop after the first tensors of a large fixture (``recipe``'s data alone
    is 800 MB): every tensor depends on all drawn before it, so only a prefix can be had cheaply.
    """
    rng = np.random.default_rng(spec.seed)
    for param in spec.parameters:  # the model's (harness/contract/models.py), in its order
        yield param.name, (param.center + rng.uniform(-param.bound, param.bound, param.shape)).astype(np.float32)
    model = spec.model_row
    for name, shape, draw in (("data", model.inputs(spec.sizes), model.draw_inputs),
                              ("targets", model.targets(spec.sizes), model.draw_targets)):
        shape = (spec.num_batches, *shape)
        yield name, rng.standard_normal(shape, dtype=np.float32) if draw is None else draw(rng, shape)


def tensor_sha256(array: np.ndarray) -> str:
    """The SHA-256 of one tensor's values (C order, little-endian float32), whatever file holds it.

    The manifest keeps one per tensor, so a changed fixture names the tensor that changed, and a file
    rewritten with the same values (another safetensors version) is told apart from changed values.
    """
    return hashlib.sha256(np.ascontiguousarray(array, dtype="<f4").tobytes()).hexdigest()


def _build(folder: Path, spec: WorkloadSpec, digest: str) -> FixtureFile:
    log.info("building fixtures %s (%.1f MiB)", digest, spec.fixture_bytes / 2**20)
    arrays = draw_fixture_arrays(spec)
    target = folder / _DATA_FILE
    try:
        with atomic_path(target) as tmp:
            save_file(arrays, str(tmp), metadata={"fixture_digest": digest})
    except SafetensorError as err:  # safetensors reports a full disk (ENOSPC) as its own error, not an OSError
        raise FixtureError(
            f"cannot write the fixture cache {folder}: {err}. This spec's fixtures take {spec.fixture_bytes / 2**20:.1f} MiB: "
            "free that much space there, or point AMP_PARITY_FIXTURES at a folder with room."
        ) from err
    sha = _sha256(target)
    manifest = {
        "schema_version": FIXTURE_SCHEMA_VERSION,
        "digest": digest,
        "fields": spec.fixture_fields(),
        "file": _DATA_FILE,
        "bytes": target.stat().st_size,
        "sha256": sha,
        "tensors": {name: list(a.shape) for name, a in sorted(arrays.items())},
        "tensor_sha256": {name: tensor_sha256(a) for name, a in sorted(arrays.items())},
        "numpy_version": np.__version__,
    }
    write_json_atomic(folder / _MANIFEST_FILE, manifest)
    return FixtureFile(target, sha, digest)


def _sweep_dead_writers(folder: Path) -> None:
    """Remove temporary files a killed writer left (a SIGKILL during a build runs no clean-up).

    Only called under the lock, and every writer writes under it: any temporary file found then
    belongs to a process that died while holding the lock (at ``recipe`` size, a gigabyte and more).
    Two kinds: :func:`harness.files.atomic.atomic_path`'s, and safetensors' own, which ``save_file`` writes
    beside its target (``.tmp`` and six letters) before renaming it onto the name it was given.
    """
    found = [tmp for name in (_DATA_FILE, _MANIFEST_FILE) for tmp in temporaries_of(folder / name)]
    found += [p for p in folder.iterdir() if _SAFETENSORS_TEMP.fullmatch(p.name) and p.is_file() and not p.is_symlink()]
    for tmp in found:
        log.info("removing %s, left by a fixture build that was killed", tmp)
        tmp.unlink(missing_ok=True)


def _verify(folder: Path, spec: WorkloadSpec, digest: str) -> str | None:
    """``None`` if the cached file is usable, else why not (``"absent"`` when never built)."""
    manifest_path, data_path = folder / _MANIFEST_FILE, folder / _DATA_FILE
    if not manifest_path.exists() and not data_path.exists():
        return "absent"
    try:
        manifest = read_json_file(manifest_path, _MANIFEST_MAX_BYTES)
    except (OSError, ValueError) as err:
        return f"manifest unreadable ({err})"
    if not isinstance(manifest, dict) or manifest.get("schema_version") != FIXTURE_SCHEMA_VERSION:
        return "manifest from another fixture schema"
    expected = spec.fixture_fields()
    if manifest.get("digest") != digest or manifest.get("fields") != expected:
        return f"manifest is for another spec ({manifest.get('fields')})"
    if not data_path.exists():
        return "data file missing"
    if not data_path.is_file():  # a FIFO or a device would be read forever by the checksum
        return "data file is not a regular file"
    if data_path.stat().st_size != manifest.get("bytes"):
        return f"data file has {data_path.stat().st_size} bytes, manifest says {manifest.get('bytes')} (truncated?)"
    if _sha256(data_path) != manifest.get("sha256"):
        return "data file checksum differs from the manifest (corrupted)"
    return None


def _read_file(folder: Path, digest: str) -> FixtureFile:
    manifest = read_json_file(folder / _MANIFEST_FILE, _MANIFEST_MAX_BYTES)  # verified just before, under the lock
    return FixtureFile(folder / _DATA_FILE, str(manifest["sha256"]), digest)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[bool]:
    """Hold the cache folder's lock; yields whether the folder can be written.

    A read-only cache (a shared, read-only mount; a folder without write permission) cannot be rebuilt, but
    its valid fixtures can still be read: then the lock is taken shared where the lock file exists (a reader
    never sees a build in progress), and not at all where it does not (nobody can write there either).
    """
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        writable = True
    except OSError as err:
        if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        writable = False
        try:
            fd = os.open(lock_path, os.O_RDONLY)
        except OSError:
            yield False
            return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if writable else fcntl.LOCK_SH)
        yield writable
    finally:
        os.close(fd)  # closing drops the lock
