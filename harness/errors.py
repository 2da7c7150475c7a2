"""The harness's own errors (every one says what was expected, what was got, and what to do), and the exit status
each command ends with (:class:`ExitCode`, the one place the numbers live).

Hierarchy (each also subclasses the builtin a caller would naturally catch)::

    AmpParityError                      base: the CLI prints ``error: <message>`` and exits ExitCode.USAGE_ERROR (4)
    ├── SpecError(ValueError)           an invalid workload spec value (field, value, allowed)
    ├── UsageError(ValueError)          an invalid option that is not a spec field: a flag, a path, a choice
    ├── FixtureError(RuntimeError)      a fixture file that cannot be built or read
    ├── ResultError(ValueError)         a result file of another schema version, or unreadable
    ├── KnownDifferencesError(ValueError) a known-differences list with a missing or wrong field
    ├── PatchesError(ValueError)        harness/workload/patches.toml, the harness's own patches, malformed: ExitCode.BROKEN_PATCHES
    └── WorkerError(RuntimeError)       a frontend worker did not return a record
        ├── ScriptError                 the script raised: carries the frontend's own message
        ├── WorkerCrashed               the worker process died (signal, segfault, exit)
        ├── WorkerTimeout               the worker did not answer within its timeout
        └── WorkerCannotStart           its start failed twice with one error: it is not started again
"""

from __future__ import annotations

import re
import signal
from enum import IntEnum

__all__ = [
    "AmpParityError",
    "ExitCode",
    "FixtureError",
    "KnownDifferencesError",
    "PatchesError",
    "ResultError",
    "ScriptError",
    "SpecError",
    "UsageError",
    "WorkerCannotStart",
    "WorkerCrashed",
    "WorkerError",
    "WorkerTimeout",
    "shown_value",
    "without_cpp_frames",
]


class ExitCode(IntEnum):
    """What a command's exit status means: one meaning per number, the same for every command.

    Modelled on pytest's ``ExitCode`` (``OK`` 0, ``TESTS_FAILED`` 1, ``INTERNAL_ERROR`` 3, ``USAGE_ERROR`` 4), so CI
    scripts tell a parity regression from a mistyped flag and from a bug of the harness; ``BROKEN_PATCHES`` (6, a number
    pytest does not use) is the harness's own; interruptions keep the shell's 128 + signal. ``run``, ``trace``,
    ``report``, ``merge``, ``doctor``, ``prepare`` and both languages' scripts run by hand exit with these (R's through
    the harness, which hands them over: ``r_scripts/shell.R``); docs/cli.md lists them.
    """

    #: Everything that ran passed its checks.
    OK = 0
    #: A check failed: a pair ``diverged`` (or names a stale known difference), a cell failed its own check or ended
    #: in ``error`` or ``numerical_failure``; ``doctor``: Python cells (or R cells, under ``AMP_PARITY_REQUIRE_R=1``) cannot run.
    FAILED = 1
    #: An error the harness did not foresee: a bug of the harness, or of what it runs (``error: unexpected <type>: ...`` in
    #: Python; in R, an error that is not the scripts' own refusal). ``--debug`` shows the traceback.
    INTERNAL_ERROR = 3
    #: The command was refused, or could not do what it was asked, because of what it was given or where it runs: a
    #: flag, a spec, an input file, an output place, a frontend that cannot start, no cell that could run. The
    #: ``error:`` line says what to fix.
    USAGE_ERROR = 4
    #: ``harness/workload/patches.toml``, the table of patches the harness applies to the bindings' functions (part of the
    #: harness, read as it loads), is malformed: an entry with a field missing or of another kind, a switch that is not one
    #: statement for one. Not the user's input (4) nor a failed check (1): the checkout was edited, and the ``error:`` line
    #: names the file and the entry to fix (or restore it: ``git checkout harness/workload/patches.toml``).
    BROKEN_PATCHES = 6
    #: Ctrl-C (SIGINT), as a shell reports it.
    INTERRUPTED = 128 + signal.SIGINT
    #: A kill (SIGTERM), as a shell reports it.
    TERMINATED = 128 + signal.SIGTERM
    #: The reader of the output went away (SIGPIPE, as a shell reports it), where the command could not go quiet first.
    OUTPUT_CLOSED = 128 + signal.SIGPIPE

    @classmethod
    def for_error(cls, err: BaseException) -> ExitCode:
        """The status an error ends a command with: a malformed patches table its own, the harness's other errors usage errors,
        anything else a bug."""
        if isinstance(err, PatchesError):
            return cls.BROKEN_PATCHES
        return cls.USAGE_ERROR if isinstance(err, AmpParityError) else cls.INTERNAL_ERROR


class AmpParityError(Exception):
    """Base of every error the harness raises on purpose; its message is meant for a user."""


class SpecError(AmpParityError, ValueError):
    """A spec field has a value outside what is allowed."""

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field} must be {allowed}, got {shown_value(value)}.")


#: The most digits a refusal shows of a whole number: past them it is written in scientific notation (a spec file's
#: ``10**300`` was shown as its 301 digits).
_MAX_DIGITS = 16


def shown_value(value: object) -> str:
    """``value`` as a refusal names it: its ``repr``, a whole number too long to read in scientific notation."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**_MAX_DIGITS:
        return f"{value:.3e}"
    return repr(value)


class UsageError(AmpParityError, ValueError):
    """An option the harness was given has a value outside what is allowed (a flag, a path, a choice; not a spec field).

    The same one line as :class:`SpecError`: what was given, what is allowed.
    """

    def __init__(self, option: str, value: object, allowed: str) -> None:
        self.option = option
        self.value = value
        self.allowed = allowed
        super().__init__(f"{option} must be {allowed}, got {value!r}.")


class FixtureError(AmpParityError, RuntimeError):
    """A fixture file could not be built or read."""


class ResultError(AmpParityError, ValueError):
    """A result file that this version of the harness cannot read."""


class KnownDifferencesError(AmpParityError, ValueError):
    """A known-differences list (``harness/judge/known_differences.toml`` or ``--known-differences FILE``) that cannot be used."""


class PatchesError(AmpParityError, ValueError):
    """``harness/workload/patches.toml`` (or a patches file a test loads) is malformed: one line naming the file, the entry
    (the switch or point) and what is wrong with it."""


class WorkerError(AmpParityError, RuntimeError):
    """A frontend worker did not return a run record."""


class ScriptError(WorkerError):
    """The script raised an error; the message keeps the frontend's own words.

    ``frontend_message`` is the original (R's ``conditionMessage`` or Python's ``str(exc)``), and the
    message adds the script, the mode and the spec that caused it. ``refused``: the script said it cannot run the cell
    on this binding at all (R's scaler on CPU where the lift was refused or is off), rather than failing while it ran.
    """

    def __init__(self, frontend: str, script: str, mode: str, spec_summary: str, frontend_message: str, refused: bool = False) -> None:
        self.frontend = frontend
        self.script = script
        self.mode = mode
        self.frontend_message = without_cpp_frames(frontend_message)
        self.refused = refused
        super().__init__(f"{frontend} script {script} (mode {mode}, {spec_summary}) failed: {self.frontend_message}")


#: A frame of libtorch's C++ backtrace, a line each after "Exception raised from ... (most recent call first):" in a
#: c10::Error's message: R torch passes them on (60-odd lines of addresses in libc10, lantern and libR, other ones at
#: every run), PyTorch does not unless TORCH_SHOW_CPP_STACKTRACES is set.
_CPP_FRAME = re.compile(r"^frame #\d+: ")


def without_cpp_frames(message: str) -> str:
    """``message`` without the frames of a libtorch C++ backtrace: what libtorch said and where it raised it stay, then
    how many frames were left out. A cell's reason is read in a table cell of the report and the run's summary, where
    6 kB of addresses (R torch's error for an undefined gradient, issue 39's frozen cells) buried the message."""
    lines = message.splitlines()
    kept = [line for line in lines if not _CPP_FRAME.match(line)]
    if len(kept) == len(lines):
        return message
    return "\n".join([*kept, f"[{len(lines) - len(kept)} frames of the C++ backtrace left out]"])


class WorkerCrashed(WorkerError):
    """The worker process died while running a call (a segfault in native code, a kill)."""


class WorkerTimeout(WorkerError):
    """The worker did not answer within its timeout and was stopped."""


class WorkerCannotStart(WorkerError):
    """The worker's start failed twice in a row with the same error (a module its interpreter lacks, an R that does not
    load): it is not started again, and every later call fails at once with that error's own message (so the cells it
    fails are told by one reason, not restarted one by one: :class:`harness.run.worker.Worker`)."""
