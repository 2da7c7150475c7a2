"""What a run tells whoever watches it while it runs: the phase it is in, how many of its units (cells, rounds) are done.

The runner reports to a :class:`RunProgress`; the command line shows it (:mod:`harness.views.progress`: a bar on a
terminal, a line per phase in a log), and a caller that passes a plain function of one string (tests, benchmarks) gets
each unit's text as before (:func:`as_progress`).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["RunProgress", "TextProgress", "as_progress"]


class RunProgress:
    """Says nothing: the base of what a run reports to (every method a no-op)."""

    def begin(self, phase: str, total: int) -> None:
        """Phase ``phase`` (one of :data:`harness.model.phases.PHASE_NAMES`) begins, with ``total`` units (0: not counted)."""

    def advance(self, text: str) -> None:
        """One unit of the phase is done (or begins: a timed round); ``text`` says which."""

    def end(self, phase: str, seconds: float) -> None:
        """Phase ``phase`` ended after ``seconds``."""

    def __call__(self, text: str) -> None:
        """What a function of one string is handed (:func:`as_progress`): a unit."""
        self.advance(text)


class TextProgress(RunProgress):
    """Hands each unit's text to a function of one string (what the runner took before there were phases)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say

    def advance(self, text: str) -> None:
        self._say(text)


def as_progress(on_progress: RunProgress | Callable[[str], None] | None) -> RunProgress:
    """``on_progress`` as a :class:`RunProgress` (``None``: one that says nothing)."""
    if isinstance(on_progress, RunProgress):
        return on_progress
    return RunProgress() if on_progress is None else TextProgress(on_progress)
