"""``amp-parity`` (or ``python -m harness``): run, report, merge, trace, doctor, prepare. Assembles the parser from the
commands (:mod:`harness.cli.commands`, one module each) and turns what a command returns, raises or is interrupted by
into one line and an exit status.

The harness's own errors print ``error: <message>``, with no traceback unless ``--debug``. Every command ends with a
:class:`harness.errors.ExitCode`: one meaning per status (docs/cli.md).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from harness.cli import lines
from harness.cli.output import WRITTEN, quiet_stdout
from harness.errors import ExitCode, PatchesError

__all__ = ["BLAS_THREADS", "COMMANDS", "DEFAULT_PROG", "console_main", "main"]

#: How the commands are named in help and errors when run as ``python -m harness``; the console command names itself.
DEFAULT_PROG = "python -m harness"

#: NumPy's BLAS in this process (the float64 reference, the judging) on one thread, unless the user set it: its matrices
#: are tiny beside a thread's start, and the workers hold the cores. Two OpenBLAS threads spinning beside two busy workers
#: made tiny's 34 float64 references take 14-38 s, against 0.8-1.3 s on one (issue 38, measured one after the other on the
#: loaded 2-vCPU EPYC). Set before NumPy is first imported (OpenBLAS reads it once); the workers' torch does not read it.
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}

#: The commands, in the order ``--help`` lists them; each is a module of :mod:`harness.cli.commands`.
COMMANDS = ("run", "report", "merge", "trace", "search", "modules", "inits", "doctor", "prepare")


def _command_module(name: str) -> ModuleType:
    return importlib.import_module(f"harness.cli.commands.{name}")


def _parser(prog: str = DEFAULT_PROG) -> argparse.ArgumentParser:
    from harness.workload.flags import OneLineParser

    # --debug and -v are accepted before or after the command ("run with --debug" must work as printed):
    # every parser shares the two actions, which leave their name unset unless given (see main()), so the
    # command's parser never resets what the top level parsed.
    switches = OneLineParser(add_help=False)
    switches.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    switches.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                          help="log progress and R console output")
    parser = OneLineParser(prog=prog, description="AMP parity between PyTorch and R torch.", parents=[switches])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name in COMMANDS:
        _command_module(name).add_parser(commands, switches)
    return parser


def console_main() -> None:
    """The ``amp-parity`` console command: :func:`main`, its help and errors named as it was invoked."""
    main(prog=Path(sys.argv[0]).name or "amp-parity")


def main(argv: list[str] | None = None, prog: str = DEFAULT_PROG) -> None:
    """The command-line entry point; ``prog`` names the command in help and usage errors. Exits with an :class:`ExitCode`."""
    for name, value in BLAS_THREADS.items():
        os.environ.setdefault(name, value)
    try:
        parser = _parser(prog)
    except PatchesError as err:  # the harness's own patches table, read as the commands load: one line, its own status
        lines.exit_with_error(err, debug="--debug" in (sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    lines.set_debug(getattr(args, "debug", False))
    WRITTEN.clear()
    # A kill (SIGTERM) unwinds like Ctrl-C: workers stop, staged files go, no partial result stays.
    signal.signal(signal.SIGTERM, _terminate)
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    lines.show_warnings_as_lines()
    try:
        status = _command_module(args.command).command(args)
        if status is not None:  # prepare prints its run spec and returns nothing: exit 0 by falling off the end
            sys.exit(status)
    except KeyboardInterrupt as stop:
        _exit_interrupted(args, stop)
    except BrokenPipeError:
        quiet_stdout()  # `... | head` closed our output early: nothing to say, and nobody to say it to
        sys.exit(ExitCode.OUTPUT_CLOSED)
    except Exception as err:
        behind = _interruption_behind(err)
        if behind is not None:  # the interruption is what the user did; what broke while unwinding it is not news to them
            _exit_interrupted(args, behind)
        lines.exit_with_error(err)


def _exit_interrupted(args: argparse.Namespace, stop: KeyboardInterrupt) -> NoReturn:
    """One line for Ctrl-C or a kill, and the status a shell reports for it."""
    # A probe subprocess interrupted mid-way is killed but not yet reaped; its ResourceWarning
    # would land after this line as a second, misleading one.
    warnings.filterwarnings("ignore", category=ResourceWarning)
    print(f"error: {_interrupted_line(args, stop)}", file=sys.stderr)
    sys.exit(ExitCode.TERMINATED if getattr(stop, "signum", None) == signal.SIGTERM else ExitCode.INTERRUPTED)


def _interruption_behind(err: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or kill that ``err`` was raised while handling, if any.

    A signal can land inside ``threading``'s own lock handling (``Future.result`` waiting on a lane): its ``with`` then
    raises ``RuntimeError: cannot release un-acquired lock`` over the KeyboardInterrupt (CPython does not make a
    ``with`` atomic with respect to signals). The run was still interrupted, and says so, not "unexpected RuntimeError".
    """
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__context__
    return None


def _interrupted_line(args: argparse.Namespace, stop: KeyboardInterrupt) -> str:
    """What an interruption (Ctrl-C or SIGTERM) leaves: what the command had written, and what it had not."""
    how = "terminated (SIGTERM)" if getattr(stop, "signum", None) == signal.SIGTERM else "interrupted"
    missing = {"run": "no result was written", "report": "no report was written", "merge": "no report was written",
               "prepare": "no run spec was printed", "search": "no finding was written (the example database keeps what it saw)"}
    done = list(WRITTEN)
    if not done:
        return f"{how}; {missing.get(args.command, 'nothing was written')}."
    line = f"{how} after {' and '.join(done)}"
    if args.command == "run" and getattr(args, "report", None) is not None and not any("report" in d for d in done):
        line += "; no report was written"
    return line + "; the table was not printed." if args.command == "run" else line + "."


class _Terminated(KeyboardInterrupt):
    """SIGTERM, unwound like Ctrl-C; the exit status is 128 + its number (143), as a shell reports a kill."""

    signum = signal.SIGTERM


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated
