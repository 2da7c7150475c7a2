"""What the command line prints when it stops: one ``error:`` line per error, one ``warning:`` line per warning.

Shared by ``python -m harness`` and the scripts run by hand (:mod:`py_scripts.shell`), so every refusal reads the
same in both; it imports nothing but the errors, so a script's interpreter needs nothing more to print one.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from typing import NoReturn

from harness.errors import AmpParityError, ExitCode

__all__ = ["debugging", "exit_with_error", "set_debug", "show_warnings_as_lines"]

#: ``--debug``: tracebacks and the warnings' source lines are shown too.
_DEBUG = False


def set_debug(debug: bool) -> None:
    """Show tracebacks (``--debug``) or not, for the rest of this process."""
    global _DEBUG
    _DEBUG = debug


def debugging() -> bool:
    """Whether ``--debug`` was given."""
    return _DEBUG


def exit_with_error(err: BaseException, debug: bool | None = None) -> NoReturn:
    """Print one line for ``err`` (the traceback too under ``--debug``, or when ``debug`` says so) and exit with its status.

    The harness's own errors exit ``USAGE_ERROR`` (what was given, or where it runs, must change); anything else is a
    bug of the harness, ``error: unexpected ...`` and ``INTERNAL_ERROR`` (:class:`harness.errors.ExitCode`).
    """
    if _DEBUG if debug is None else debug:
        traceback.print_exception(err)
    if isinstance(err, AmpParityError):
        print(f"error: {err}", file=sys.stderr)
    else:
        print(f"error: unexpected {type(err).__name__}: {err} (run with --debug for the traceback)", file=sys.stderr)
    sys.exit(ExitCode.for_error(err))


def show_warnings_as_lines() -> None:
    """Print each warning as one ``warning: <message>`` line on stderr (the file and line only under --debug)."""
    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: object = None, line: object = None) -> None:
        where = f" ({filename}:{lineno})" if _DEBUG else ""
        print(f"warning: {message}{where}", file=sys.stderr)

    warnings.showwarning = show
    warnings.simplefilter("default")
