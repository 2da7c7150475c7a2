"""What every claim of an output place shares: a lock, a staging folder beside the place, and a ``with`` block that gives
them up; and the checks of a place that both claims make (:mod:`harness.store.result_claim` for ``--json``,
:mod:`harness.store.report_claim` for a report folder).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Self

from harness.files.staging import StagingDir
from harness.store.lock import Lock
from harness.store.result_file import WEIGHTS_MARKER

__all__ = ["STAGING_PREFIX", "Claim", "inside_weights_folder", "path_kind", "same_place"]

#: Staging folders beside a result (swept when their run is dead, see :mod:`harness.files.staging`).
STAGING_PREFIX = ".amp-parity-staging-"



class Claim:
    """What every claim of an output place shares: a staging folder beside it, and a ``with`` block that gives it up."""

    _staging: StagingDir | None
    _lock: Lock | None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop what is still staged and give up the claim (idempotent)."""
        if self._staging is not None:
            self._staging.close()
            self._staging = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @property
    def staging(self) -> Path:
        """The folder the output is written into until it is published."""
        assert self._staging is not None, "the claim is closed"
        return self._staging.path


def inside_weights_folder(path: Path) -> Path | None:
    """The amp-parity weights folder (one holding its marker) that ``path`` is, or is inside; ``None`` if none."""
    real = Path(os.path.realpath(path))
    return next((part for part in (real, *real.parents) if os.path.lexists(part / WEIGHTS_MARKER)), None)


def same_place(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through links and ``..``), existing or not."""
    return os.path.realpath(a) == os.path.realpath(b)


def path_kind(path: Path) -> str:
    """What ``path`` is, in the words an error line uses (``a folder``, ``a symbolic link``)."""
    if path.is_symlink():
        return "a symbolic link"
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    return "a device or special file"
