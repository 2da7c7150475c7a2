"""Lanes: each frontend's cells in order in a thread of their own, an idle lane helping the frontend with the most work
left in a helper worker (harness.run.lanes). A fake pool records which worker (own or helper) ran each cell."""

from __future__ import annotations

import contextlib
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest

from harness.errors import WorkerError
from harness.run.lanes import HELP_MIN_WORK_PER_START, run_in_lanes, to_help
from harness.run.pool import WorkerPool


@dataclass(frozen=True)
class _Cell:
    frontend: str
    name: str


class _FakePool:
    """Runs nothing: says which worker a thread's call of each frontend goes to (its own, or its helper inside helping())."""

    def __init__(self, startup: float = 0.0, helper_fails: bool = False) -> None:
        self._local = threading.local()
        self.helpers: set[str] = set()
        self.startup = startup
        self.helper_fails = helper_fails

    @contextlib.contextmanager
    def helping(self, frontend: str) -> Iterator[None]:
        self._local.frontend = frontend
        try:
            yield
        finally:
            self._local.frontend = None

    def which(self, frontend: str) -> str:
        return "helper" if getattr(self._local, "frontend", None) == frontend else "own"

    spec = types.SimpleNamespace(device="cpu", threads=1)

    def call(self, frontend: str, request: dict[str, Any]) -> dict[str, Any]:
        """Only a helper's start is called here: its describe request (with the run's threads, set before its first
        backward: docs/determinism.md), which starts it."""
        assert request == {"kind": "describe", "device": "cpu", "threads": 1} and self.which(frontend) == "helper"
        if self.helper_fails:
            raise WorkerError(f"{frontend} helper could not start: planted")
        self.helpers.add(frontend)
        return {}

    def helper_started(self, frontend: str) -> bool:
        return frontend in self.helpers

    def unavailable_reason(self, frontend: str) -> str | None:
        return None

    def startup_seconds(self, frontend: str) -> float | None:
        return self.startup


def _run(pool: _FakePool, cells: list[_Cell], seconds: dict[str, float]) -> tuple[list[tuple[str, str]], list[str]]:
    ran: list[tuple[str, str]] = []

    def call(cell: _Cell) -> tuple[str, str]:
        time.sleep(seconds[cell.frontend])
        return cell.name, pool.which(cell.frontend)

    done: list[str] = []
    ran = run_in_lanes(cast(WorkerPool, pool), cells, call, lambda outcome: done.append(outcome[0]),
                       {"python": {"torch": "x"}, "r": {"torch": "y"}})
    return ran, done


def test_an_idle_lane_helps_the_frontend_with_the_most_work_left() -> None:
    """Python's 2 quick cells end first; its lane then takes R's cells from the end of R's queue in R's helper worker. Every
    cell runs once, and the results come back in the cells' order."""
    cells = [_Cell("python", f"p{k}") for k in range(2)] + [_Cell("r", f"r{k}") for k in range(12)]
    pool = _FakePool()
    ran, done = _run(pool, cells, {"python": 0.001, "r": 0.02})
    assert [name for name, _ in ran] == [c.name for c in cells] and sorted(done) == sorted(c.name for c in cells)
    helped = [name for name, worker in ran if worker == "helper"]
    assert helped and all(name.startswith("r") for name in helped) and pool.helpers == {"r"}
    assert "r11" in helped and "r0" not in helped  # from the end of R's queue; R's own lane starts at its front


def test_no_helper_where_the_work_left_is_not_worth_its_start() -> None:
    """A helper that would start for longer than the work it could take is not started."""
    cells = [_Cell("python", "p0")] + [_Cell("r", f"r{k}") for k in range(4)]
    pool = _FakePool(startup=60.0)
    ran, _ = _run(pool, cells, {"python": 0.001, "r": 0.01})
    assert all(worker == "own" for _, worker in ran) and not pool.helpers


def test_a_helper_that_cannot_start_gives_its_cell_back() -> None:
    """Where the helper cannot start, its cell goes back to its frontend's queue and no lane helps that frontend again."""
    cells = [_Cell("python", "p0")] + [_Cell("r", f"r{k}") for k in range(8)]
    pool = _FakePool(helper_fails=True)
    ran, done = _run(pool, cells, {"python": 0.001, "r": 0.01})
    assert [name for name, _ in ran] == [c.name for c in cells] and all(worker == "own" for _, worker in ran)
    assert sorted(done) == sorted(c.name for c in cells)


@pytest.mark.parametrize(("left", "spent", "start", "helped"), [
    ({"python": 0, "r": 10}, {"python": [0.1], "r": [1.0]}, 1.0, "r"),  # 10 s of R left against a 1 s start
    ({"python": 0, "r": 2}, {"python": [0.1], "r": [1.0]}, 1.0, None),  # 2 s left: less than HELP_MIN_WORK_PER_START starts
    ({"python": 0, "r": 10}, {"python": [0.1], "r": []}, 0.0, None),  # no R cell done yet: nothing says what one costs
    ({"python": 1, "r": 10}, {"python": [0.1], "r": [1.0]}, 0.0, "r"),  # a helper already running costs nothing
    ({"python": 5, "r": 3}, {"python": [1.0], "r": [1.0]}, 0.0, "python"),  # the most work left
])
def test_which_frontend_is_helped(left: dict[str, int], spent: dict[str, list[float]], start: float, helped: str | None) -> None:
    """The frontend with the most work left (cells left times its mean seconds so far), where that is at least
    HELP_MIN_WORK_PER_START times the helper's start."""
    assert HELP_MIN_WORK_PER_START == 3.0
    queues = {name: list(range(n)) for name, n in left.items()}
    assert to_help(queues, spent, lambda _: start, lambda _: True) == helped


def test_one_lane_at_a_time_calls_a_helper() -> None:
    """Three frontends, two of them quick: both idle lanes would help R, but a worker answers one caller at a time, so
    R's helper is never called by two lanes at once."""
    cells = [_Cell("python", "p0"), _Cell("py2", "q0")] + [_Cell("r", f"r{k}") for k in range(16)]
    pool = _FakePool()
    calling: list[str] = []
    most = [0]
    lock = threading.Lock()

    def call(cell: _Cell) -> tuple[str, str]:
        worker = pool.which(cell.frontend)
        with lock:
            calling.append(worker)
            most[0] = max(most[0], calling.count("helper"))
        time.sleep(0.001 if cell.frontend != "r" else 0.02)
        with lock:
            calling.remove(worker)
        return cell.name, worker

    ran = run_in_lanes(cast(WorkerPool, pool), cells, call, lambda _: None,
                       {"python": {"torch": "x"}, "py2": {"torch": "x"}, "r": {"torch": "y"}})
    assert [name for name, _ in ran] == [c.name for c in cells] and any(w == "helper" for _, w in ran)
    assert most[0] == 1
