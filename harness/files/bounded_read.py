"""Reading a file a user names (a result, ``--spec-file``, ``--installations``, ``--known-differences``, a weights
folder's marker, a weights file): a regular file, bounded, parsed safely. Every file the harness reads goes through here.

``Path.read_text`` reads whatever the path is: ``/dev/zero`` until the OOM killer ends the process, a FIFO
never (the open blocks until a writer comes), a 100 000-deep ``[[[...]]]`` into a ``RecursionError``. The
file is opened without blocking, refused unless it is a regular file, and read up to a limit; what is
wrong comes back as one :class:`FileFormatError` clause for the caller's own error line (an ``OSError`` when it
cannot be opened at all).
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Callable
from typing import Any

__all__ = ["FileFormatError", "FileSyntaxError", "check_regular_file", "read_bytes", "read_json_file", "read_text", "read_toml_file"]


class FileFormatError(ValueError):
    """Why a file cannot be read, as a clause (``not a regular file: it is a FIFO``); callers wrap it in their error."""


class FileSyntaxError(FileFormatError):
    """The file is text but not JSON (or TOML); the message is the parser's (``Expecting value: line 1 column 1 (char 0)``)."""


def check_regular_file(path: str | os.PathLike[str], limit_bytes: int) -> int:
    """The size of the regular file ``path``, which must be at most ``limit_bytes``: for a reader that maps the file
    itself (safetensors), the same checks :func:`read_bytes` makes.

    Raises:
        OSError: it cannot be opened (``strerror`` says why).
        FileFormatError: not a regular file, or longer than ``limit_bytes``.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once instead of waiting for a writer
    try:
        return _checked_size(fd, limit_bytes)
    finally:
        os.close(fd)


def read_bytes(path: str | os.PathLike[str], limit_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit_bytes`` of them.

    Raises:
        OSError: the file cannot be opened or read (``strerror`` says why).
        FileFormatError: not a regular file, or longer than ``limit_bytes``.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once instead of waiting for a writer
    try:
        _checked_size(fd, limit_bytes)  # before fdopen, which refuses a folder with its own error
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as file:
        data = file.read(limit_bytes + 1)  # the size may have grown since fstat
    if len(data) > limit_bytes:
        raise FileFormatError(_too_large(limit_bytes))
    return data


def read_text(path: str | os.PathLike[str], limit_bytes: int) -> str:
    """The UTF-8 text of the regular file ``path`` (:func:`read_bytes`).

    Raises:
        OSError: as :func:`read_bytes`.
        FileFormatError: as :func:`read_bytes`, or not UTF-8.
    """
    data = read_bytes(path, limit_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FileFormatError(f"not UTF-8 text ({err.reason} at byte {err.start})") from err


def read_json_file(path: str | os.PathLike[str], limit_bytes: int) -> Any:
    """The JSON value in the regular file ``path``, at most ``limit_bytes`` long.

    Raises:
        OSError: the file cannot be opened or read (``strerror`` says why).
        FileFormatError: not a regular file, longer than ``limit_bytes``, not UTF-8, or nested too deeply to parse.
        FileSyntaxError: not JSON.
    """
    return _parsed(read_text(path, limit_bytes), json.loads, ValueError)


def read_toml_file(path: str | os.PathLike[str], limit_bytes: int) -> dict[str, Any]:
    """The TOML document in the regular file ``path``, at most ``limit_bytes`` long.

    Raises:
        OSError: the file cannot be opened or read (``strerror`` says why).
        FileFormatError: not a regular file, longer than ``limit_bytes``, not UTF-8, or nested too deeply to parse.
        FileSyntaxError: not TOML.
    """
    parsed: dict[str, Any] = _parsed(read_text(path, limit_bytes), tomllib.loads, tomllib.TOMLDecodeError)
    return parsed


def _parsed(text: str, parse: Callable[[str], Any], syntax: type[Exception]) -> Any:
    """``text`` parsed; a syntax error or a nesting too deep for the parser's recursion, said in one line."""
    try:
        return parse(text)
    except RecursionError as err:
        raise FileFormatError("nested too deeply to be read: thousands of levels of [ or {") from err
    except syntax as err:
        raise FileSyntaxError(str(err)) from err


def _checked_size(fd: int, limit_bytes: int) -> int:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise FileFormatError(f"not a regular file: it is {_kind(info.st_mode)}")
    if info.st_size > limit_bytes:
        raise FileFormatError(_too_large(limit_bytes))
    return info.st_size


def _too_large(limit_bytes: int) -> str:
    size = f"{limit_bytes // 2**20} MiB" if limit_bytes >= 2**20 else f"{limit_bytes} bytes"
    return f"larger than {size}, more than any file of this kind holds"


def _kind(mode: int) -> str:
    kinds = [(stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")]
    return next((name for test, name in kinds if test(mode)), "not a file")

