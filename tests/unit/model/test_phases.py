"""A run's phases: each charged the time inside it and nothing nested in it, in the order first entered."""

from __future__ import annotations

import time

import pytest

from harness.model.phases import PHASE_NAMES, PhaseClock, Phases


def test_a_nested_phase_pauses_the_one_around_it() -> None:
    """The reference computed inside the record calls is charged to itself: the two add up to the time of the outer block."""
    clock = PhaseClock()
    started = time.perf_counter()
    with clock.phase("record calls"):
        time.sleep(0.02)
        with clock.phase("reference"):
            time.sleep(0.05)
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    phases = clock.phases()
    assert [name for name, _ in phases.seconds] == ["record calls", "reference"]
    record, reference = phases.get("record calls"), phases.get("reference")
    assert record is not None and reference is not None
    assert 0.05 <= reference < 0.07 and 0.04 <= record < reference  # without the pause, record calls would hold 0.09 s
    assert phases.total == pytest.approx(elapsed, abs=0.005)


def test_a_phase_entered_again_adds_to_its_first_place() -> None:
    """Judging runs before and after the trace measurements: one entry, in the place it was first entered."""
    clock = PhaseClock()
    for name in ("judging", "trace measurements", "judging"):
        with clock.phase(name):
            time.sleep(0.01)
    phases = clock.phases()
    assert [name for name, _ in phases.seconds] == ["judging", "trace measurements"]
    judging = phases.get("judging")
    assert judging is not None and judging >= 0.02
    assert phases.get("peaks") is None


def test_an_unknown_phase_is_refused() -> None:
    """A typo would add a phase no view knows."""
    with pytest.raises(ValueError, match="phase 'record' is not one of probe, fixtures"), PhaseClock().phase("record"):
        pass


def test_phases_round_trip_and_writing_is_set_once() -> None:
    """Stored as a list (the order is the run's); writing, measured after the result is made, replaces what was there."""
    phases = Phases((("worker starts", 2.0), ("record calls", 1.5)))
    assert Phases.from_json(phases.to_json()) == phases
    assert phases.to_json() == [{"name": "worker starts", "seconds": 2.0}, {"name": "record calls", "seconds": 1.5}]
    written = phases.with_phase("writing", 0.1).with_phase("writing", 0.3)
    assert written.seconds[-1] == ("writing", 0.3) and written.total == pytest.approx(3.8)
    assert set(PHASE_NAMES) >= {name for name, _ in written.seconds}
