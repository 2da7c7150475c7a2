"""Where a run's time goes: its phases, each with the seconds spent in it and in nothing nested inside it.

A matrix's wall time was one number, and most of it was neither start-up nor training (issue 29): the phases say where
the rest went. A :class:`PhaseClock` is started with the run; ``with clock.phase(name):`` charges the time inside to
``name``, and a phase entered inside another pauses the outer one (the float64 reference is computed inside the record
calls, and is charged to itself, not to them), so the phases add up to the wall time they cover, with nothing counted
twice. The result keeps them in the order they were first entered (:class:`Phases`); ``run -v`` prints them and the
report has them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.model.reported import PhaseEntry

__all__ = ["PHASE_NAMES", "PhaseClock", "Phases", "phase_entries", "phases_of"]

#: Every phase a run can have, in the order a run passes through them (one source: the runner, the CLI, the views and the
#: docs name them so). "writing" is the command's, after the result is made: the file cannot hold the time of its own
#: writing, so it is printed with ``-v`` and shown in the report, not stored.
PHASE_NAMES = (
    "probe", "fixtures", "provenance", "worker starts", "record calls", "reference", "reconciled runs", "timed rounds", "peaks",
    "profile", "trace measurements", "judging", "writing",
)


@dataclass(frozen=True)
class Phases:
    """The seconds of each phase a run went through, in order; ``total`` is their sum."""

    seconds: tuple[tuple[str, float], ...] = ()

    @property
    def total(self) -> float:
        """The seconds of every phase together (what they account for of the wall time)."""
        return sum(s for _, s in self.seconds)

    def get(self, name: str) -> float | None:
        """The seconds of phase ``name``, or ``None`` where the run did not pass through it."""
        return dict(self.seconds).get(name)

    def with_phase(self, name: str, seconds: float) -> Phases:
        """These phases with ``name`` (a phase measured after the result was made: writing) set to ``seconds``."""
        kept = tuple((n, s) for n, s in self.seconds if n != name)
        return Phases((*kept, (name, seconds)))



def phase_entries(phases: Phases) -> list[PhaseEntry]:
    """How a result stores its phases: a list of ``{"name", "seconds"}`` objects, so the order the run went through them is
    kept by any JSON reader (an object's keys would be, by Python's, but not by every reader)."""
    return [{"name": name, "seconds": seconds} for name, seconds in phases.seconds]


def phases_of(entries: Sequence[Mapping[str, Any]]) -> Phases:
    """The inverse of :func:`phase_entries`."""
    return Phases(tuple((str(p["name"]), float(p["seconds"])) for p in entries))


class PhaseClock:
    """Charges elapsed time to the phase that is running; a nested phase pauses the one around it."""

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        """``now``: the clock read (a test's own, stepped by hand, so what it checks does not depend on the machine's load)."""
        self._now = now
        self._seconds: dict[str, float] = {}
        self._stack: list[str] = []
        self._since = now()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the time inside the block to ``name`` (one of :data:`PHASE_NAMES`), and nothing of it to the outer phase.

        Raises:
            ValueError: a name that is not one of :data:`PHASE_NAMES` (a typo would add a phase no view knows).
        """
        if name not in PHASE_NAMES:
            raise ValueError(f"phase {name!r} is not one of {', '.join(PHASE_NAMES)}")
        self._charge()
        self._stack.append(name)
        self._seconds.setdefault(name, 0.0)
        try:
            yield
        finally:
            self._charge()
            self._stack.pop()

    def phases(self) -> Phases:
        """What each phase has been charged so far, in the order they were first entered."""
        self._charge()
        return Phases(tuple(self._seconds.items()))

    def _charge(self) -> None:
        now = self._now()
        if self._stack:
            self._seconds[self._stack[-1]] += now - self._since
        self._since = now
