"""Atomic file writes: a reader sees the old file or the whole new one, never a half-written one.

Every file the harness writes (fixtures, results, weights, reports) goes through here, so an
interrupted run (Ctrl-C, kill, a full disk) leaves nothing partial behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "write_json_atomic"]


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target``; renamed onto ``target`` only if the block succeeds.

    The temporary file lives in the same directory, so the final ``os.replace`` is a rename on one
    file system (atomic on POSIX). On any exception, KeyboardInterrupt included, it is removed. The
    file gets the permissions a plain ``open()`` would give (``mkstemp`` makes it owner-only), so a
    result or report can be read by the user's group as any other file they write.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(target: Path, data: Any) -> None:
    """Write ``data`` as indented JSON to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(data, indent=2, allow_nan=True) + "\n", encoding="utf-8")
