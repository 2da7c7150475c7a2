"""Atomic file writes: a reader sees the old file or the whole new one, never a half-written one.

Every file the harness writes (fixtures, results, weights, reports) goes through here, so an
interrupted run (Ctrl-C, kill, a full disk) leaves nothing partial behind.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

__all__ = ["TEMP_SUFFIX", "atomic_path", "file_mode", "folder_mode", "probe_atomic", "temporaries_of", "write_json_atomic"]

#: How :func:`atomic_path`'s temporary files end (a later writer under a lock may sweep its dead peers').
TEMP_SUFFIX = ".tmp"


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target``; renamed onto ``target`` only if the block succeeds.

    The temporary file lives in the same directory, so the final ``os.replace`` is a rename on one
    file system (atomic on POSIX). On any exception, KeyboardInterrupt included, it is removed. The
    file gets the permissions a plain ``open()`` would give (``mkstemp`` makes it owner-only), so a
    result or report can be read by the user's group as any other file they write.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(target)
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, file_mode())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def probe_atomic(target: Path) -> None:
    """Create and remove the temporary file :func:`atomic_path` would use for ``target``.

    Proves, before minutes of work, that the folder exists and is writable and that the temporary
    name (longer than ``target``'s) fits the file system.

    Raises:
        OSError: it cannot be created (the ``strerror`` says why).
    """
    _temporary(target).unlink()


def temporaries_of(target: Path) -> list[Path]:
    """The temporary files :func:`atomic_path` made for ``target`` that are still there (a killed writer's)."""
    return sorted(target.parent.glob(f".{glob_escape(target.name)}.*{TEMP_SUFFIX}"))


def _temporary(target: Path) -> Path:
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX)
    os.close(fd)
    return Path(tmp_name)


def file_mode() -> int:
    """The mode a plain ``open()`` gives a new file under this process's umask (0644 under umask 022)."""
    return 0o666 & ~_umask()


def folder_mode() -> int:
    """The mode a plain ``mkdir`` gives a new folder under this process's umask (0755 under umask 022)."""
    return 0o777 & ~_umask()


def _umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(target: Path, data: Any) -> None:
    """Write ``data`` as indented JSON to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(data, indent=2, allow_nan=True) + "\n", encoding="utf-8")



def os_error_text(err: OSError) -> str:
    """What went wrong with a path, in words a user acts on (a name too long says that the harness adds to it)."""
    if err.errno == errno.ENAMETOOLONG:
        return "a name is too long for the file system (the harness adds up to 15 characters for its temporary files); use a shorter name"
    return err.strerror or str(err)
