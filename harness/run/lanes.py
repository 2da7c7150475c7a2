"""Lanes: each frontend's cells in order in a thread of its own, its workers side by side, and an idle lane helping.

The record calls, the reconciled runs and (where no ratio rests on them) the timed rounds all run a call per cell in the
cell's own worker. Each frontend gets a lane (a thread): its cells one after another, in its worker, the lanes side by
side on the cores. R's cells cost about four times Python's (issue 38), so the Python lane used to finish first and its
core idled while R's ran on. Now a lane whose frontend has no cells left helps the one with the most work left
(:func:`to_help`): it takes that frontend's cells from the end of its queue and runs them in a *helper* worker of the
same installation (:meth:`harness.run.pool.WorkerPool.helping`). As many calls run at once as before (one per lane),
each in a worker of its own cell's installation: a cell's record does not depend on which of its workers ran it.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from harness.errors import WorkerError
from harness.run.pool import WorkerPool

__all__ = ["HELP_MIN_WORK_PER_START", "run_in_lanes", "to_help"]

#: A lane helps another frontend only where that frontend's work left (its cells left times its mean seconds per cell so far)
#: is at least this many times the helper's start: the helper then saves more than it costs (it halves what is left, less
#: its start), and a frontend nearly done gets no worker started for its last cells.
HELP_MIN_WORK_PER_START = 3.0

Result = TypeVar("Result")


def to_help(queues: Mapping[str, Sequence[int]], spent: Mapping[str, Sequence[float]], start_cost: Callable[[str], float],
            can_help: Callable[[str], bool]) -> str | None:
    """The frontend an idle lane should help: the one with the most work left, where that is worth a helper's start
    (:data:`HELP_MIN_WORK_PER_START`); ``None``: none is (the lane ends). The work left is estimated from the cells done
    so far; a frontend with none done yet, or one cell left, is not helped."""
    left = {frontend: len(queue) * sum(spent[frontend]) / len(spent[frontend])
            for frontend, queue in queues.items() if len(queue) >= 2 and spent.get(frontend)}
    for frontend in sorted(left, key=lambda f: -left[f]):
        if can_help(frontend) and left[frontend] >= HELP_MIN_WORK_PER_START * start_cost(frontend):
            return frontend
    return None


def run_in_lanes(pool: WorkerPool, cells: Sequence[Any], call: Callable[[Any], Result], progress: Callable[[Any], None],
                 facts: Mapping[str, Mapping[str, Any]]) -> list[Result]:
    """``call`` of each cell (anything with a ``frontend``), a lane per frontend; the results in the cells' order, each
    handed to ``progress`` as it ends. ``facts``: what each frontend's worker said of itself (a frontend whose worker
    did not describe itself, or one that cannot run here, gets no helper: its cells are skipped or fail quickly).

    A lane only talks to its own worker (or its helper) and writes its own cells' files. Should the caller stop
    (Ctrl-C, a signal), no lane starts another cell: ``stop`` is set before the pool closes, so a worker is never
    restarted by a thread that outlived its run.
    """
    queues: dict[str, collections.deque[int]] = {}
    for index, cell in enumerate(cells):
        queues.setdefault(cell.frontend, collections.deque()).append(index)
    spent: dict[str, list[float]] = {frontend: [] for frontend in queues}  # each frontend's calls' seconds so far
    results: list[Result | None] = [None] * len(cells)
    stop = threading.Event()
    lock = threading.Lock()
    ended = threading.Condition(lock)  # notified as each cell ends
    refused: set[str] = set()  # frontends whose helper could not start: helped no more
    helped_now: set[str] = set()  # frontends whose helper a lane is calling: one lane at a time talks to a worker

    def can_help(frontend: str) -> bool:
        return (frontend not in refused and frontend not in helped_now and pool.unavailable_reason(frontend) is None
                and bool(facts.get(frontend)))

    def start_cost(frontend: str) -> float:
        """Nothing once its helper runs, else its own worker's start."""
        if pool.helper_started(frontend):
            return 0.0
        return pool.startup_seconds(frontend) or 0.0

    def next_cell(own: str) -> tuple[int, str | None] | None:
        with ended:
            while not stop.is_set():
                if queues[own]:
                    return queues[own].popleft(), None
                helped = to_help(queues, spent, start_cost, can_help)
                if helped is not None:
                    helped_now.add(helped)
                    return queues[helped].pop(), helped
                if not any(len(queue) >= 2 and not spent[f] and can_help(f) for f, queue in queues.items()):
                    return None
                ended.wait(timeout=1.0)  # a frontend none of whose cells has ended yet: wait for its first to weigh it
            return None

    def run_lane(own: str) -> None:
        while not stop.is_set():
            picked = next_cell(own)
            if picked is None:
                return
            index, helped = picked
            cell = cells[index]
            with pool.helping(helped) if helped is not None else contextlib.nullcontext():
                if helped is not None:
                    try:
                        if not pool.helper_started(helped):  # its start is not its first cell's time; nor are the one-time
                            # costs of a first step, which its own worker paid when it described itself (describe_installations)
                            pool.call(helped, {"kind": "describe", "device": pool.spec.device, "threads": pool.spec.threads})
                    except WorkerError:  # its own worker runs on: the cell goes back to it
                        with lock:
                            refused.add(helped)
                            helped_now.discard(helped)
                            queues[helped].append(index)
                        continue
                started = time.perf_counter()
                outcome = results[index] = call(cell)
            with ended:
                spent[cell.frontend].append(time.perf_counter() - started)
                helped_now.discard(helped or "")
                ended.notify_all()
            progress(outcome)

    executor = ThreadPoolExecutor(max(1, len(queues)), thread_name_prefix="amp-parity-lanes")
    try:
        futures = [executor.submit(run_lane, frontend) for frontend in queues]
        for future in futures:
            future.result()
        for index in [i for i, r in enumerate(results) if r is None]:  # given back by a helper that could not start, late
            results[index] = call(cells[index])
            progress(results[index])
    finally:
        stop.set()
        executor.shutdown(wait=False, cancel_futures=True)
    done = [r for r in results if r is not None]
    assert len(done) == len(cells)
    return done
