"""A lock file that names its holder: one run at a time per result or report folder.

``fcntl`` locks die with their process, so a killed run (``kill -9``) never leaves a folder locked; the
file holds the holder's pid and command line, so the refusal names the run that holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from harness.errors import ResultError
from harness.files.atomic import os_error_text

__all__ = ["Lock"]

#: The first line of every lock file the harness writes: a file at a lock's name without it is not the harness's.
_LOCK_TAG = "amp-parity lock"


class Lock:
    """A lock file ``path`` held (``flock``) by this process for ``what``; it names ``what``, for the run it refuses.

    Only a lock file the harness wrote is removed when released: one it created, or one a killed run left
    (it starts with :data:`_LOCK_TAG`). An empty file found there (a killed run's before it wrote, or an
    older version's) is used and left as it was found; any other file at that name is a user's, and the claim
    is refused rather than the file deleted.

    Raises:
        ResultError: another run holds it (naming that run's ``what``), or the name is taken by something else.
    """

    def __init__(self, path: Path, what: str, place: str, flag: str) -> None:
        self.path = path
        self._fd: int | None = None
        for _ in range(5):
            created = True
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            except FileExistsError:
                created = False
                try:
                    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
                except FileNotFoundError:
                    continue  # a finishing run removed it meanwhile
                except OSError as err:
                    raise ResultError(f"{path} is in the way ({os_error_text(err)}): amp-parity claims {what} with that name. "
                                      f"Move it away or choose another {flag}.") from err
            except OSError as err:
                raise ResultError(f"cannot write {place} in {path.parent}: {os_error_text(err)}. Choose another {flag}.") from err
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _lock_holder(fd) or what
                os.close(fd)
                raise ResultError(
                    f"another run is writing {holder} (it holds {path}); wait for it to end or choose another {flag}."
                ) from None
            try:
                same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except OSError:
                same = False
            if not same:
                os.close(fd)
                continue
            text = _read_fd(fd)
            if not created and text and not text.startswith(_LOCK_TAG):
                os.close(fd)
                raise ResultError(f"{path} is not an amp-parity lock file, and amp-parity claims {what} with that name; "
                                  f"it was left as it is. Move it away or choose another {flag}.")
            self._fd, self._ours = fd, created or bool(text)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{_LOCK_TAG}\npid {os.getpid()}\n{what}\n".encode(), 0)
            return
        raise ResultError(f"cannot claim {what}: its lock {path} keeps changing. Choose another {flag}.")

    def release(self) -> None:
        """Give the lock up: remove the file if it is the harness's (while still held: a waiting run then sees a fresh
        file), else empty it again as it was found (idempotent)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            if self._ours:
                os.unlink(self.path)
            else:
                os.ftruncate(self._fd, 0)
        os.close(self._fd)
        self._fd = None


def _lock_holder(fd: int) -> str | None:
    """What the run holding a lock file said it writes (its third line), if it is the harness's and says it."""
    lines = _read_fd(fd).splitlines()
    return lines[2] if len(lines) >= 3 and lines[0] == _LOCK_TAG else None


def _read_fd(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        return ""
