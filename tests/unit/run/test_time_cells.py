"""The timed rounds after the record calls (:func:`harness.run.measure.time_cells`): the noise floor timed beside the cells
the spread target checks (after each of their timed rounds, in the same worker), and side by side, a bridge over its bound
read again with the machine to itself.

A fake pool (the golden cells' records, answered at once, or after a planted bridge) records every call in order, so the
order of cell rounds and calibration rounds is known exactly. The real workers' calibration loops are tested in
``tests/unit/worker_side/test_calibration.py`` and ``tests/integration/test_r_worker.py``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, cast

import pytest

from harness.errors import WorkerError
from harness.judge.record_check import expected_injections
from harness.judge.targets import OVERHEAD_MAX_SECONDS, check_targets
from harness.model.record import RECORD_SCHEMA_VERSION
from harness.model.result import CellResult, Status
from harness.model.timing import TimingProtocol
from harness.run.measure import FLOOR_SHARE_OF_LOOP, FLOOR_SIZING_STEPS, time_cells
from harness.run.pool import WorkerPool
from harness.worker_side.calibration import SHAPE_FIELDS
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec
from tests.twins import by_mode, golden, replace_cells

#: What one calibration step takes in the fake workers.
_PER_STEP = 0.001


class _FakePool:
    """Answers cell calls with the golden cell's record at a given loop time, and calibrations at ``_PER_STEP`` a step;
    keeps every call, in order, as ``(frontend, what)``."""

    def __init__(self, spec: WorkloadSpec, cells: list[CellResult], loops: dict[str, float], failing_calibration: bool = False,
                 bridges: dict[str, list[float]] | None = None):
        self.spec = spec
        self.calls: list[tuple[str, str]] = []
        self._records = {c.id: c.record for c in cells}
        self._loops = loops
        self._failing = failing_calibration
        self._bridges = bridges or {}

    def call_cell(self, cell: Cell, save_weights: bool = True) -> dict[str, Any]:
        """The cell's record, at once; a cell of ``bridges`` waits its next planted bridge first and says its workload took
        a tenth of a millisecond (so the call's time beyond it is that bridge)."""
        self.calls.append((cell.frontend, cell.id))
        record = self._records[cell.id]
        assert record is not None
        loop = self._loops[cell.id]
        if cell.id in self._bridges:
            time.sleep(self._bridges[cell.id].pop(0))
            loop = 0.00005
        return record.to_json() | {
            "schema_version": RECORD_SCHEMA_VERSION, "optimizer": cell.optimizer, "injected_steps": expected_injections(self.spec, cell),
            "switches": [], "seconds_total": loop, "seconds_workload": 2 * loop if cell.id in self._bridges else loop + 0.001,
            "gc_seconds": 0.0,
        }

    def call(self, frontend: str, request: dict[str, Any]) -> Any:
        assert request["kind"] == "calibrate" and request["device"] == "cpu" and request["threads"] == self.spec.threads
        # the floor is a training step of the cell's own MLP: its run spec's shapes
        assert {name: request[name] for name in SHAPE_FIELDS} == {name: getattr(self.spec, name) for name in SHAPE_FIELDS}
        self.calls.append((frontend, f"calibrate {request['dtype']} ×{request['iterations']}"))
        if self._failing:
            raise WorkerError(f"{frontend} worker could not answer its calibrate request: planted")
        return {"seconds": _PER_STEP * request["iterations"], "iterations": request["iterations"]}

    def last_memory(self, frontend: str) -> dict[str, Any]:
        return {}

    def worker_pid(self, frontend: str) -> int | None:
        return None  # no process: each round keeps no load


def _cells() -> tuple[list[CellResult], dict[str, float]]:
    """The golden tiny result's Python default (a 0.6 s loop: checked), Python autocast (0.1 s: not) and R autocast (0.8 s:
    checked, in bfloat16); their record calls ran under 0.5 s, so only the warm-up's loop can make a cell checked."""
    python, r = by_mode(golden()), by_mode(golden(), "r")
    cells = [python["default"], python["autocast"], r["autocast"]]
    assert all(c.record is not None and c.record.seconds_total < 0.5 for c in cells)
    return cells, {cells[0].id: 0.6, cells[1].id: 0.1, cells[2].id: 0.8}


def _calibration(dtype: str, loop: float) -> str:
    """The calibration round beside a cell of a ``loop``-second loop: :data:`FLOOR_SHARE_OF_LOOP` of it."""
    return f"calibrate {dtype} ×{round(FLOOR_SHARE_OF_LOOP * loop / _PER_STEP)}"


@pytest.mark.parametrize("interleave", [True, False], ids=["interleaved", "back-to-back"])
def test_a_checked_cell_gets_a_calibration_round_after_each_timed_round_in_its_worker(interleave: bool) -> None:
    """Each checked cell is sized once after its warm-up, then each of its timed rounds is followed at once by a calibration
    round in its own worker, in its GEMM dtype, :data:`FLOOR_SHARE_OF_LOOP` of its loop (issue 47: half as long, the floor
    rounds cost half as much); the unchecked cell gets none. Its timing keeps the floor. Back to back, a cell's warm-up
    comes right before its own rounds (its worker ran the other cells since); interleaved, every warm-up comes first."""
    cells, loops = _cells()
    default, autocast, r_autocast = cells
    pool = _FakePool(golden().spec, cells, loops)
    timed = time_cells(cast(WorkerPool, pool), cells, TimingProtocol(warmup_rounds=2, rounds=3, interleave=interleave), lambda _: None)
    sizing = f"calibrate {{}} ×{FLOOR_SIZING_STEPS}"
    warmups = {default.id: [("python", default.id), ("python", sizing.format("float32"))], autocast.id: [("python", autocast.id)],
               r_autocast.id: [("r", r_autocast.id), ("r", sizing.format("bfloat16"))]}
    rounds = {default.id: [("python", default.id), ("python", _calibration("float32", 0.6))],
              autocast.id: [("python", autocast.id)],
              r_autocast.id: [("r", r_autocast.id), ("r", _calibration("bfloat16", 0.8))]}
    if interleave:
        expected = [call for c in cells for call in warmups[c.id]] + [call for _ in range(3) for c in cells for call in rounds[c.id]]
    else:
        expected = [call for c in cells for call in [*warmups[c.id], *rounds[c.id] * 3]]
    assert pool.calls == expected
    by_id = {c.id: c for c in timed}
    for cell in (default, r_autocast):
        timing = by_id[cell.id].timing
        assert timing is not None and timing.floor is not None
        assert timing.samples.floor_seconds == pytest.approx([FLOOR_SHARE_OF_LOOP * loops[cell.id]] * 3, abs=_PER_STEP)
        assert timing.floor.cv == pytest.approx(0.0) and max(timing.samples.floor_seconds) < loops[cell.id]
    unchecked = by_id[autocast.id].timing
    assert unchecked is not None and unchecked.floor is None and unchecked.samples.floor_seconds == ()


def test_every_cpu_cell_of_bench_is_checked_whatever_its_loop() -> None:
    """At ``bench`` the spread target checks every CPU cell, so a 0.1 s cell gets its floor too."""
    cells, loops = _cells()
    spec = dataclasses.replace(golden().spec, preset="bench")
    pool = _FakePool(spec, cells, loops)
    timed = time_cells(cast(WorkerPool, pool), cells, TimingProtocol(warmup_rounds=2, rounds=3), lambda _: None)
    assert all(c.timing is not None and c.timing.floor is not None and c.timing.floor.n == 3 for c in timed)
    assert ("python", _calibration("bfloat16", 0.1)) in pool.calls


def test_without_a_warm_up_call_the_record_calls_loop_sizes_the_floor() -> None:
    """With one untimed call (the record call) the floor rounds are sized by the record call's loop."""
    cells, loops = _cells()
    pool = _FakePool(dataclasses.replace(golden().spec, preset="bench"), cells, loops)
    time_cells(cast(WorkerPool, pool), cells, TimingProtocol(warmup_rounds=1, rounds=3), lambda _: None)
    record = cells[0].record
    assert record is not None and pool.calls[:3] == [("python", f"calibrate float32 ×{FLOOR_SIZING_STEPS}"),
                                                     ("python", cells[0].id), ("python", _calibration("float32", record.seconds_total))]


def test_a_failed_calibration_leaves_the_cell_timed_without_a_floor() -> None:
    """A worker that cannot calibrate costs the cell its floor, never its timing."""
    cells, loops = _cells()
    pool = _FakePool(golden().spec, cells, loops, failing_calibration=True)
    timed = time_cells(cast(WorkerPool, pool), cells, TimingProtocol(warmup_rounds=2, rounds=3), lambda _: None)
    assert all(c.status is Status.OK and c.timing is not None and c.timing.rounds == 3 and c.timing.floor is None for c in timed)
    assert sum(what.startswith("calibrate") for _, what in pool.calls) == 2  # the sizing call of each checked cell, no more


@pytest.mark.parametrize("rounds", [1, 2])
def test_too_few_rounds_for_a_spread_run_side_by_side_without_floors(rounds: int) -> None:
    """Fewer timed rounds than a spread needs carry no ratio and no spread target: no floor is timed, not even beside the
    cells the target would check (``bench``), and each frontend's cells run in a lane of their own, each in order."""
    cells, loops = _cells()
    pool = _FakePool(dataclasses.replace(golden().spec, preset="bench"), cells, loops)
    said: list[str] = []
    timed = time_cells(cast(WorkerPool, pool), cells, TimingProtocol(warmup_rounds=2, rounds=rounds), said.append)
    assert not any(what.startswith("calibrate") for _, what in pool.calls)
    assert all(c.timing is not None and c.timing.rounds == rounds and c.timing.floor is None and c.timing.warmup_calls == 2
               for c in timed)
    python = [what for frontend, what in pool.calls if frontend == "python"]
    assert python == [cells[0].id] * (1 + rounds) + [cells[1].id] * (1 + rounds)  # a warm-up call, then the rounds, cell by cell
    assert sorted(line for line in said if line.endswith(": timed")) == sorted(f"{c.id}: timed" for c in cells)


def test_side_by_side_a_cell_whose_untraced_reconciled_run_gave_its_own_time_is_not_timed_again() -> None:
    """Issue 47: side by side, a round can give only a cell's own time, and a cell whose reconciled run ran untraced has
    it (:attr:`CellResult.untraced_seconds`): no call for it, no timing; its own run, for the limit, is that run's. One
    at a time (a ratio rests on the rounds), every cell is timed still."""
    cells, loops = _cells()
    cells = [dataclasses.replace(c, timing=None) for c in cells]  # as the record calls leave them
    cells[1] = dataclasses.replace(cells[1], untraced_seconds=0.25)
    pool = _FakePool(dataclasses.replace(golden().spec, preset="bench"), cells, loops)
    timed = time_cells(cast(WorkerPool, pool), cells, TimingProtocol(warmup_rounds=1, rounds=1), lambda _: None)
    assert cells[1].id not in {what for _, what in pool.calls}
    assert timed[1].timing is None and timed[1].own_run_seconds == 0.25
    assert timed[0].timing is not None and timed[2].timing is not None
    pool = _FakePool(dataclasses.replace(golden().spec, preset="bench"), cells, loops)
    timed = time_cells(cast(WorkerPool, pool), cells, TimingProtocol(warmup_rounds=1, rounds=3), lambda _: None)
    assert all(c.timing is not None and c.timing.rounds == 3 for c in timed)


#: A bridge well over :data:`OVERHEAD_MAX_SECONDS`, planted in the fake worker's reply.
_SLOW_BRIDGE = 2 * OVERHEAD_MAX_SECONDS


def _bridge_check(timed: list[CellResult], cell: CellResult) -> Any:
    """The overhead target's check of ``cell`` in the golden result with ``timed`` as its cells."""
    result = replace_cells(golden(), {c.id: c for c in timed})
    return next(c for c in check_targets(result) if c.name == "overhead per call" and c.subject == cell.id)


def test_side_by_side_a_bridge_over_its_bound_is_read_again_alone_and_that_reading_is_judged() -> None:
    """Side by side, R's cell reads a bridge of twice the bound (the other lane's wait, as R's first ``tiny`` cell beside all
    of Python's did); once the lanes are done it runs one more round, alone, whose bridge (near nothing) is the one judged,
    the side-by-side one shown beside it. The cells within their bound get no such round; the timed rounds stay one."""
    cells, loops = _cells()
    r_autocast = cells[2]
    pool = _FakePool(golden().spec, cells, loops, bridges={r_autocast.id: [0.0, _SLOW_BRIDGE, 0.0]})  # its warm-up, round, re-read
    said: list[str] = []
    timed = time_cells(cast(WorkerPool, pool), cells, TimingProtocol(warmup_rounds=2, rounds=1), said.append)
    assert pool.calls[-1] == ("r", r_autocast.id) and [what for _, what in pool.calls].count(r_autocast.id) == 3
    # a unit per cell, as the phase counts them: the round read alone is part of the cell's timing, no unit of its own
    assert sorted(line for line in said if "warm-up" not in line) == sorted(f"{c.id}: timed" for c in cells)
    timing = timed[2].timing
    assert timing is not None and timing.rounds == 1 and timing.call.n == 1
    assert timing.bridge_seconds > OVERHEAD_MAX_SECONDS and timing.bridge_alone_seconds is not None
    assert timing.judged_bridge_seconds == timing.bridge_alone_seconds < OVERHEAD_MAX_SECONDS
    assert len(timing.samples.alone_call_seconds) == len(timing.samples.alone_workload_seconds) == 1
    check = _bridge_check(timed, r_autocast)
    assert check.met and "with the machine to itself" in check.measured
    assert f"{timing.bridge_seconds * 1e3:.2f} ms side by side" in check.measured
    assert all(c.timing is not None and c.timing.bridge_alone_seconds is None for c in timed[:2])


def test_a_bridge_the_harness_lengthened_misses_alone_too() -> None:
    """A bridge that is long in every call (what a slower pipe or decoding would make) reads over the bound alone as well:
    the target misses, naming the reading alone."""
    cells, loops = _cells()
    r_autocast = cells[2]
    pool = _FakePool(golden().spec, cells, loops, bridges={r_autocast.id: [_SLOW_BRIDGE] * 3})
    timed = time_cells(cast(WorkerPool, pool), cells, TimingProtocol(warmup_rounds=2, rounds=1), lambda _: None)
    timing = timed[2].timing
    assert timing is not None and timing.bridge_alone_seconds is not None and timing.bridge_alone_seconds > OVERHEAD_MAX_SECONDS
    check = _bridge_check(timed, r_autocast)
    assert not check.met and check.why is not None and check.why.startswith("missed by ")
    assert check.measured.startswith(f"bridge {timing.bridge_alone_seconds * 1e3:.2f} ms with the machine to itself")


def test_one_at_a_time_a_long_bridge_is_not_read_again() -> None:
    """Rounds run one at a time have the machine to themselves already: a long bridge there is judged as it was read."""
    cells, loops = _cells()
    r_autocast = cells[2]
    pool = _FakePool(dataclasses.replace(golden().spec, preset="bench"), cells, loops, failing_calibration=True,  # no floor rounds
                     bridges={r_autocast.id: [0.0] + [_SLOW_BRIDGE] * 3})
    timed = time_cells(cast(WorkerPool, pool), cells, TimingProtocol(warmup_rounds=2, rounds=3), lambda _: None)
    timing = timed[2].timing
    assert [what for _, what in pool.calls].count(r_autocast.id) == 4 and timing is not None and timing.bridge_alone_seconds is None
    assert not _bridge_check(timed, r_autocast).met
