"""The spread target judged against the noise floor measured beside each cell: max(CV_MAX, FLOOR_FACTOR × the floor's CV)."""

from __future__ import annotations

import dataclasses

import pytest

from harness.judge.targets import (
    CV_MAX,
    CV_MIN_LOOP_SECONDS,
    FAULTS_MIN_EXCESS,
    FLOOR_FACTOR,
    OTHER_CPU_MIN_SECONDS,
    check_targets,
    spread_checked,
)
from harness.model.verdicts import TargetCheck
from tests.twins import by_mode, golden, replace_cells, steady_timing


def _spread(cv: float, floor: float | None, loads: list[tuple[float, int]] | None = None) -> TargetCheck:
    """The spread check of the golden Python default cell with a 0.6 s loop whose CV is ``cv`` and floor CV ``floor``
    (``loads``: each round's other processes' CPU seconds and page faults; its second round is the slowest)."""
    cell = by_mode(golden())["default"]
    timed = dataclasses.replace(cell, timing=steady_timing(0.6, spread=cv, floor=floor, loads=loads))
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


@pytest.mark.parametrize(("loads", "named"), [
    # other processes took 0.3 s of CPU during the slow round: the machine's
    ([(0.0, 100), (0.3, 100), (0.01, 100)], "while other processes took 0.30 s of CPU (the machine's, not the cell's)"),
    # just under the CPU threshold, but far more page faults than the median round: the allocator's
    ([(0.0, 100), (OTHER_CPU_MIN_SECONDS / 2, 100 + 2 * FAULTS_MIN_EXCESS), (0.0, 120)],
     f"with {100 + 2 * FAULTS_MIN_EXCESS} page faults (the median round 120): its allocator gave memory back"),
    # faults over twice the median round's, but under FAULTS_MIN_EXCESS (about 1 % of a bench round): neither
    ([(0.0, 100), (0.0, FAULTS_MIN_EXCESS), (0.0, 120)],
     f"too few page faults to matter ({FAULTS_MIN_EXCESS}, the median round 120): nothing the guest"),
])
def test_a_miss_names_what_ran_beside_its_slowest_round(loads: list[tuple[float, int]], named: str) -> None:
    """A missed spread says what the guest saw during the slowest round: other processes' CPU, the worker's page faults,
    or neither (then the host's, or the cell's own); the floor, timed after each round, cannot see a single slow round."""
    missed = _spread(0.04, floor=0.01, loads=loads)
    assert not missed.met and missed.why is not None
    assert "its slowest round (2 of 3) ran 4.0% over the median " in missed.why and named in missed.why
    assert _spread(0.04, floor=0.01).why is not None and "slowest round" not in (_spread(0.04, floor=0.01).why or "")  # older result


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
