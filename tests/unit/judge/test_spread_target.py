"""The spread target judged against the noise floor measured beside each cell: max(CV_MAX, FLOOR_FACTOR × the floor's CV)."""

from __future__ import annotations

import dataclasses

import pytest

from harness.judge.targets import CV_MAX, CV_MIN_LOOP_SECONDS, FLOOR_FACTOR, check_targets, spread_checked
from harness.model.verdicts import TargetCheck
from tests.twins import by_mode, golden, replace_cells, steady_timing


def _spread(cv: float, floor: float | None) -> TargetCheck:
    """The spread check of the golden Python default cell with a 0.6 s loop whose CV is ``cv`` and floor CV ``floor``."""
    cell = by_mode(golden())["default"]
    timed = dataclasses.replace(cell, timing=steady_timing(0.6, spread=cv, floor=floor))
    return next(c for c in check_targets(replace_cells(golden(), {cell.id: timed}))
                if c.name == "round-to-round spread" and c.subject == cell.id)


def test_a_quiet_floor_leaves_the_plain_bound() -> None:
    """A floor below CV_MAX / FLOOR_FACTOR (1 % → 1.5 %) keeps the bound at CV_MAX: 2.5 % is met, 4 % missed beyond it."""
    met = _spread(0.025, floor=0.01)
    assert met.met and met.measured == f"CV 2.50% over 3 rounds; floor 1.00% → bound {CV_MAX:.2%}"
    missed = _spread(0.04, floor=0.01)
    assert not missed.met and missed.why is not None
    assert missed.why.startswith("missed by 1.00 points beyond the 3% bound: rounds ranged")
    assert "the machine's own noise was 1.00%" in missed.why


def test_a_noisy_floor_raises_the_bound_by_the_factor() -> None:
    """A floor above CV_MAX / FLOOR_FACTOR (4 % → 6 %) raises the bound: 5 % is met, which a bound of CV_MAX or of the floor
    alone would miss; 7 % is missed by one point beyond the floor-based bound."""
    assert FLOOR_FACTOR * 0.04 > 0.05 > max(CV_MAX, 0.04)  # the case tells the factor apart from no factor, and from a factor of 1
    met = _spread(0.05, floor=0.04)
    assert met.met and met.measured == f"CV 5.00% over 3 rounds; floor 4.00% → bound {FLOOR_FACTOR * 0.04:.2%}"
    missed = _spread(0.07, floor=0.04)
    assert not missed.met and missed.why is not None
    assert missed.why.startswith("missed by 1.00 points beyond the floor-based bound")


def test_a_floor_exactly_at_the_crossover_gives_cv_max() -> None:
    """At a floor of CV_MAX / FLOOR_FACTOR both bounds agree: a CV just over CV_MAX misses."""
    check = _spread(CV_MAX + 0.002, floor=CV_MAX / FLOOR_FACTOR)
    assert not check.met and check.measured.endswith(f"→ bound {CV_MAX:.2%}")


def test_without_a_floor_the_plain_bound_applies_and_says_so() -> None:
    """A timing without a floor (an older result) is judged against CV_MAX, saying the floor was not measured."""
    met = _spread(0.025, floor=None)
    assert met.met and met.measured == f"CV 2.50% over 3 rounds; floor not measured → bound {CV_MAX:.2%}"
    missed = _spread(0.05, floor=None)
    assert not missed.met and missed.why is not None
    assert missed.why.startswith("missed by 2.00 points beyond the 3% bound")
    assert "the floor was not measured" in missed.why


@pytest.mark.parametrize(
    ("device", "preset", "loop_seconds", "checked"),
    [
        ("cpu", "bench", 0.1, True),
        ("cpu", "tiny", CV_MIN_LOOP_SECONDS, True),
        ("cpu", "tiny", CV_MIN_LOOP_SECONDS * 0.99, False),
        ("cuda", "bench", 2.0, False),
    ],
)
def test_the_cells_the_spread_target_checks(device: str, preset: str, loop_seconds: float, checked: bool) -> None:
    """CPU cells of ``bench``, or of any preset with a loop of at least CV_MIN_LOOP_SECONDS; never CUDA cells."""
    assert spread_checked(device, preset, loop_seconds) is checked
