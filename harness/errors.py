"""The harness's own errors: every one says what was expected, what was got, and what to do.

Hierarchy (each also subclasses the builtin a caller would naturally catch)::

    AmpParityError                      base: the CLI prints ``error: <message>`` and exits 1
    ├── SpecError(ValueError)           an invalid workload spec value (field, value, allowed)
    ├── UsageError(ValueError)          an invalid option that is not a spec field: a flag, a path, a choice
    ├── FixtureError(RuntimeError)      a fixture file that cannot be built or read
    ├── ResultError(ValueError)         a result file of another schema version, or unreadable
    ├── KnownDifferencesError(ValueError) a known-differences list with a missing or wrong field
    └── WorkerError(RuntimeError)       a frontend worker did not return a record
        ├── ScriptError                 the script raised: carries the frontend's own message
        ├── WorkerCrashed               the worker process died (signal, segfault, exit)
        └── WorkerTimeout               the worker did not answer within its timeout
"""

from __future__ import annotations

__all__ = [
    "AmpParityError",
    "FixtureError",
    "KnownDifferencesError",
    "ResultError",
    "ScriptError",
    "SpecError",
    "UsageError",
    "WorkerCrashed",
    "WorkerError",
    "WorkerTimeout",
]


class AmpParityError(Exception):
    """Base of every error the harness raises on purpose; its message is meant for a user."""


class SpecError(AmpParityError, ValueError):
    """A spec field has a value outside what is allowed."""

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field} must be {allowed}, got {value!r}.")


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
        self.frontend_message = frontend_message
        self.refused = refused
        super().__init__(f"{frontend} script {script} (mode {mode}, {spec_summary}) failed: {frontend_message}")


class WorkerCrashed(WorkerError):
    """The worker process died while running a call (a segfault in native code, a kill)."""


class WorkerTimeout(WorkerError):
    """The worker did not answer within its timeout and was stopped."""
