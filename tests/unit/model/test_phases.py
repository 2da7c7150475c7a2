"""A run's phases: each charged the time inside it and nothing nested in it, in the order first entered."""

from __future__ import annotations

import pytest

from harness.model.phases import PHASE_NAMES, PhaseClock, Phases, phase_entries, phases_of


class _Clock:
    """A clock that moves only when told: the phases' arithmetic, checked exactly whatever the machine's load."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_nested_phase_pauses_the_one_around_it() -> None:
    """The reference computed inside the record calls is charged to itself: the two add up to the time of the outer block."""
    now = _Clock()
    clock = PhaseClock(now)
    with clock.phase("record calls"):
        now.sleep(0.02)
        with clock.phase("reference"):
            now.sleep(0.05)
        now.sleep(0.02)
    phases = clock.phases()
    assert [name for name, _ in phases.seconds] == ["record calls", "reference"]
    assert phases.get("reference") == pytest.approx(0.05) and phases.get("record calls") == pytest.approx(0.04)  # not 0.09
    assert phases.total == pytest.approx(0.09)


def test_a_phase_entered_again_adds_to_its_first_place() -> None:
    """Judging runs before and after the trace measurements: one entry, in the place it was first entered."""
    now = _Clock()
    clock = PhaseClock(now)
    for name in ("judging", "trace measurements", "judging"):
        with clock.phase(name):
            now.sleep(0.01)
    phases = clock.phases()
    assert [name for name, _ in phases.seconds] == ["judging", "trace measurements"]
    assert phases.get("judging") == pytest.approx(0.02)
    assert phases.get("peaks") is None


def test_an_unknown_phase_is_refused() -> None:
    """A typo would add a phase no view knows."""
    with pytest.raises(ValueError, match="phase 'record' is not one of probe, fixtures"), PhaseClock().phase("record"):
        pass


def test_phases_round_trip_and_writing_is_set_once() -> None:
    """Stored as a list (the order is the run's); writing, measured after the result is made, replaces what was there."""
    phases = Phases((("worker starts", 2.0), ("record calls", 1.5)))
    assert phases_of(phase_entries(phases)) == phases
    assert phase_entries(phases) == [{"name": "worker starts", "seconds": 2.0}, {"name": "record calls", "seconds": 1.5}]
    written = phases.with_phase("writing", 0.1).with_phase("writing", 0.3)
    assert written.seconds[-1] == ("writing", 0.3) and written.total == pytest.approx(3.8)
    assert set(PHASE_NAMES) >= {name for name, _ in written.seconds}
