"""Staging folders that a killed run cannot leave behind for good.

A run stages the scripts' final weights in a folder of its own until they are published (or dropped).
A SIGKILL runs no clean-up, so each staging folder is locked (``flock`` on the folder itself) by the
process that owns it for as long as it lives; the kernel drops that lock when the process dies, however
it dies. The next run sweeps the folders with its prefix whose lock it can take: their owner is gone.

A folder is created under a ``.new`` name, locked, then renamed to its final name, so a sweeper never
sees a live folder before its lock is held (a folder killed inside that instant keeps its ``.new``
name and is left alone: the sweep only ever removes what it can prove is dead).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["StagingDir", "sweep_stale"]

log = logging.getLogger(__name__)

_NEW = ".new"


class StagingDir:
    """A folder ``<parent>/<prefix><random>`` owned (locked) by this process until :meth:`close`.

    Stale folders of dead owners with the same prefix are swept first.

    Raises:
        OSError: ``parent`` cannot hold a new folder (missing, read-only, name too long).
    """

    def __init__(self, parent: Path, prefix: str) -> None:
        sweep_stale(parent, prefix)
        fresh = Path(tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=_NEW))
        try:
            self._fd: int | None = os.open(fresh, os.O_RDONLY | os.O_DIRECTORY)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            self.path = fresh.with_name(fresh.name[: -len(_NEW)])
            fresh.rename(self.path)
        except BaseException:
            shutil.rmtree(fresh, ignore_errors=True)
            raise

    def __enter__(self) -> StagingDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def release(self) -> None:
        """Give up ownership without deleting: the folder was renamed into its final place."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        """Delete the folder (whatever is still staged in it) and give up ownership."""
        if self._fd is not None:
            shutil.rmtree(self.path, ignore_errors=True)
        self.release()


def sweep_stale(parent: Path, prefix: str) -> list[Path]:
    """Remove ``<parent>/<prefix>*`` folders whose owner has died; return what was removed.

    Only real folders (no symlinks) whose lock can be taken at once are removed; anything else (a live
    run's folder, a file, a folder still being created) is left alone.
    """
    removed: list[Path] = []
    try:
        candidates = [p for p in parent.iterdir() if p.name.startswith(prefix) and not p.name.endswith(_NEW)]
    except OSError:
        return removed
    for path in candidates:
        if path.is_symlink() or not path.is_dir():
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            with contextlib.suppress(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
                log.info("removed %s, left by a run that was killed", path)
        finally:
            os.close(fd)
    return removed
