"""The timing protocol's pieces: statistics, the overhead split, ratios that refuse noisy data, validation."""

from __future__ import annotations

from typing import Any

import pytest

from harness.errors import UsageError
from harness.model.timing import (
    BENCH_ROUNDS,
    DEFAULT_MAX_SECONDS,
    DEFAULT_ROUNDS,
    DEFAULT_WARMUP_ROUNDS,
    MAX_CV_FOR_RATIO,
    RoundLog,
    Timing,
    TimingProtocol,
    ratio,
    summarize,
)
from harness.run.pool import ALLOCATOR_ENV, DETERMINISM_ENV, thread_env, worker_env


def test_summarize_gives_median_quartiles_and_cv() -> None:
    """Known samples give known statistics (numpy's linear percentiles, sample standard deviation)."""
    stats = summarize([1.0, 2.0, 3.0, 4.0, 10.0])
    assert stats.n == 5 and stats.median == 3.0 and stats.q1 == 2.0 and stats.q3 == 4.0
    assert stats.iqr == 2.0 and stats.min == 1.0 and stats.max == 10.0 and stats.mean == 4.0
    assert stats.cv == pytest.approx(3.5355339 / 4.0)


def test_fewer_than_three_samples_have_no_spread() -> None:
    """Two rounds give a median but no IQR or CV: a spread of two samples says nothing."""
    stats = summarize([1.0, 2.0])
    assert stats.median == 1.5 and stats.iqr is None and stats.cv is None
    with pytest.raises(ValueError, match="no samples"):
        summarize([])


def _record(loop: float, workload: float, gc: float = 0.0) -> dict[str, Any]:
    return {"seconds_total": loop, "seconds_workload": workload, "gc_seconds": gc}


def test_round_log_splits_the_overhead_into_setup_and_bridge() -> None:
    """The harness's overhead is the bridge (call − workload); the script's set-up (workload − loop) is kept apart; medians."""
    log = RoundLog()
    for call, loop, workload in [(0.110, 0.100, 0.104), (0.112, 0.101, 0.105), (0.111, 0.102, 0.106)]:
        log.add(call, _record(loop, workload, gc=0.001), 123, same_losses=True)
    log.add(0.113, _record(0.103, 0.107), 456, same_losses=False)
    t = log.summary()
    assert t.rounds == 4 and t.warmup_calls == 1
    assert t.overhead_seconds == pytest.approx(0.006) == t.bridge_seconds
    assert t.setup_seconds == pytest.approx(0.004) and t.setup_share == pytest.approx(0.004 / 0.1115)
    assert t.overhead_share == pytest.approx(0.006 / 0.1115)
    assert t.gc_seconds == 0.001 and t.loop.median == pytest.approx(0.1015)
    assert not t.reproducible and t.differing_rounds == 1
    assert t.samples.peak_rss_bytes == (123, 123, 123, 456)


def _timing(loops: list[float]) -> Timing:
    log = RoundLog()
    for loop in loops:
        log.add(loop + 0.001, _record(loop, loop), None, same_losses=True)
    return log.summary()


def test_ratio_of_steady_cells_is_the_ratio_of_medians() -> None:
    """Two cells with a 1 % spread give their ratio of medians, and say what it rests on."""
    value, note = ratio(_timing([2.0, 2.02, 1.98]), _timing([1.0, 1.01, 0.99]))
    assert value == pytest.approx(2.0) and note.startswith("ratio of medians")


def test_ratio_refuses_a_noisy_cell_or_too_few_rounds() -> None:
    """A cell with a CV over the limit, or fewer than 3 rounds, gives no ratio and says why."""
    noisy = _timing([1.0, 1.5, 0.7])
    assert noisy.loop.cv is not None and noisy.loop.cv > MAX_CV_FOR_RATIO
    value, note = ratio(noisy, _timing([1.0, 1.01, 0.99]))
    assert value is None and note.startswith("spread too wide: CV")
    value, note = ratio(_timing([1.0, 1.0]), _timing([1.0, 1.0]))
    assert value is None and "too few timed rounds (2 < 3)" in note
    assert ratio(None, _timing([1.0, 1.0, 1.0])) == (None, "not timed")


def test_interleaved_ratio_cancels_drift_common_to_both_sides() -> None:
    """Rounds that drift together (each cell 1.0, 1.5, 0.7 × its base) are noisy alone but give a steady paired ratio."""
    drift = [1.0, 1.5, 0.7]
    a, b = _timing([2.0 * d for d in drift]), _timing(drift)
    assert ratio(a, b)[0] is None
    value, note = ratio(a, b, paired=True)
    assert value == pytest.approx(2.0) and "interleaved" in note
    value, note = ratio(_timing([2.0, 1.0, 3.0]), b, paired=True)
    assert value is None and "interleaved ratio varies" in note


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"warmup_rounds": 0}, "warmup_rounds must be an integer ≥ 1: the first call writes the weights"),
        ({"rounds": 0}, "rounds must be an integer ≥ 1"),
        ({"rounds": True}, "rounds must be an integer ≥ 1"),
        ({"max_seconds": -1.0}, "max_seconds must be a positive number of seconds"),
        ({"max_seconds": float("nan")}, "max_seconds must be a positive number of seconds"),
    ],
)
def test_protocol_refuses_bad_values(fields: dict[str, Any], message: str) -> None:
    """Bad protocol values are refused with the field, the value and what is allowed."""
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        TimingProtocol(**fields)


def test_thread_env_sets_both_thread_pools() -> None:
    """Workers start with OpenMP's and MKL's pools sized like the spec's threads."""
    assert thread_env(3) == {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3"}


@pytest.mark.parametrize(("environ", "fixed"), [
    ({}, True),
    ({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F"}, True),  # tuning something else leaves the allocator to us
    ({"MALLOC_TRIM_THRESHOLD_": "0"}, False),  # the user's own allocator setting is kept
    ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}, False),
])
def test_workers_run_with_glibcs_thresholds_fixed_unless_the_user_set_them(environ: dict[str, str], fixed: bool) -> None:
    """Every worker gets the thread pools and, unless the user tuned glibc's malloc, its mmap and trim thresholds fixed at
    32 and 64 MiB (what glibc's dynamic rule reaches in a long-lived process), so a worker's timings do not depend on what
    it ran before."""
    env = worker_env(2, environ)
    assert env == {**thread_env(2), **DETERMINISM_ENV, **(ALLOCATOR_ENV if fixed else {})}
    assert ALLOCATOR_ENV == {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20), "MALLOC_TRIM_THRESHOLD_": str(64 * 2**20)}


def test_a_round_log_with_calibration_rounds_gives_their_statistics_as_the_floor() -> None:
    """Calibration seconds kept beside the rounds become ``samples.floor_seconds`` and ``floor``; without any, no floor."""
    log = RoundLog()
    for loop, floor in [(1.0, 0.50), (1.02, 0.51), (0.98, 0.49)]:
        log.add(loop + 0.001, _record(loop, loop), None, same_losses=True)
        log.add_floor(floor)
    t = log.summary()
    assert t.samples.floor_seconds == (0.50, 0.51, 0.49)
    assert t.floor is not None and t.floor.median == 0.50 and t.floor.cv == pytest.approx(0.02)
    assert _timing([1.0, 1.0, 1.0]).floor is None and _timing([1.0, 1.0, 1.0]).samples.floor_seconds == ()


def test_a_timing_round_trips_through_json_with_and_without_its_floor() -> None:
    """A timing with a floor comes back equal; one stored before the floor existed (no ``floor``, no
    ``samples.floor_seconds``) loads with none, and is written back with ``floor`` null and no samples."""
    log = RoundLog()
    for loop, floor in [(1.0, 0.5), (1.1, 0.6), (0.9, 0.4)]:
        log.add(loop + 0.001, _record(loop, loop), None, same_losses=True)
        log.add_floor(floor)
    floored = log.summary()
    data = floored.to_json()
    assert floored.floor is not None and data["floor"] == floored.floor.to_json()
    assert data["samples"]["floor_seconds"] == [0.5, 0.6, 0.4] and list(data)[-1] == "floor"
    assert Timing.from_json(data) == floored
    older = _timing([1.0, 1.1, 0.9]).to_json()
    del older["floor"], older["samples"]["floor_seconds"]
    loaded = Timing.from_json(older)
    assert loaded.floor is None and loaded.samples.floor_seconds == ()
    assert loaded.to_json() == older | {"floor": None, "samples": older["samples"] | {"floor_seconds": []}}


@pytest.mark.parametrize(("preset", "given", "expected"), [
    ("tiny", {}, (1, 1)),  # tiny's own: its record call is its warm-up, one round side by side: each cell's own time
    ("bench", {}, (DEFAULT_WARMUP_ROUNDS, BENCH_ROUNDS)),  # bench's own: the spread target reads 20 rounds
    ("recipe", {}, (DEFAULT_WARMUP_ROUNDS, DEFAULT_ROUNDS)),
    ("tiny", {"warmup_rounds": 2, "rounds": 5}, (2, 5)),  # what the user gives wins
    ("tiny", {"rounds": 7}, (1, 7)),
])
def test_a_preset_has_its_own_protocol_unless_told(preset: str, given: dict[str, int], expected: tuple[int, int]) -> None:
    """``run --preset tiny`` makes 1 untimed call and 1 timed round per cell, ``bench`` 20 timed rounds; ``recipe`` the defaults;
    flags win."""
    protocol = TimingProtocol.for_preset(preset, **given)
    assert (protocol.warmup_rounds, protocol.rounds) == expected
    assert protocol.max_seconds == DEFAULT_MAX_SECONDS and not protocol.interleave
    assert TimingProtocol.for_preset("tiny", interleave=True).interleave


@pytest.mark.parametrize(("rounds", "interleave", "expected"), [(1, False, True), (2, False, True), (3, False, False),
                                                                 (1, True, False), (20, False, False)])
def test_too_few_rounds_for_a_spread_run_side_by_side(rounds: int, interleave: bool, expected: bool) -> None:
    """Fewer rounds than a spread needs carry no ratio: they run side by side (tiny's one round), unless interleaved."""
    assert TimingProtocol(1, rounds, interleave=interleave).side_by_side is expected
    assert TimingProtocol.for_preset("tiny").side_by_side and not TimingProtocol.for_preset("bench").side_by_side


def test_a_noisy_ratio_never_advises_the_interleaving_in_use() -> None:
    """Issue 48 (8): interleaved rounds of unequal counts fall back to the medians; a spread too wide there is told to add
    rounds, not to interleave (it did)."""
    noisy, steady = _timing([1.0, 1.5, 0.7]), _timing([1.0, 1.01, 0.99, 1.0])
    assert "--interleave" in ratio(noisy, steady)[1]
    value, note = ratio(noisy, steady, paired=True)
    assert value is None and note.startswith("spread too wide") and "--interleave" not in note and "more --rounds" in note
