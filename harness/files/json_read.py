"""Reading a JSON file a user names (``--spec-file``, ``report RESULT.json``): a regular file, bounded, parsed safely.

``Path.read_text`` reads whatever the path is: ``/dev/zero`` until the OOM killer ends the process, a FIFO
never (the open blocks until a writer comes), a 100 000-deep ``[[[...]]]`` into a ``RecursionError``. The
file is opened without blocking, refused unless it is a regular file, and read up to a limit; what is
wrong comes back as one :class:`JsonFileError` clause for the caller's own error line.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

__all__ = ["JsonFileError", "JsonSyntaxError", "read_json_file"]


class JsonFileError(ValueError):
    """Why a JSON file cannot be read, as a clause (``not a regular file: a FIFO``); callers wrap it in their error."""


class JsonSyntaxError(JsonFileError):
    """The file is text but not JSON; the message is the parser's (``Expecting value: line 1 column 1 (char 0)``)."""


def read_json_file(path: Path, limit_bytes: int) -> Any:
    """The JSON value in the regular file ``path``, at most ``limit_bytes`` long.

    Raises:
        OSError: the file cannot be opened or read (``strerror`` says why).
        JsonFileError: not a regular file, longer than ``limit_bytes``, not UTF-8, or nested too deeply to parse.
        JsonSyntaxError: not JSON.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once instead of waiting for a writer
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise JsonFileError(f"not a regular file: it is {_kind(mode)}")
        data = file.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise JsonFileError(f"larger than {limit_bytes // 2**20} MiB, more than any file of this kind holds")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise JsonFileError(f"not UTF-8 text ({err.reason} at byte {err.start})") from err
    except RecursionError as err:
        raise JsonFileError("nested too deeply to be read: thousands of levels of [ or {") from err
    except ValueError as err:
        raise JsonSyntaxError(str(err)) from err


def _kind(mode: int) -> str:
    kinds = [(stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")]
    return next((name for test, name in kinds if test(mode)), "not a file")
