"""The second pass of the pairs' traces (harness.run.tracer): both sides of every pair whose traces part at two tensors run
in the lanes, and each pair gets the distance its own two sides measured. A fake pool answers each cell's call with the
points its frontend would give and the kept tensor."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from typing import Any, cast

import numpy as np

from harness.errors import WorkerError
from harness.model.pair_trace import PairTrace, PointDifference
from harness.model.result import CellResult, Status
from harness.run.pool import WorkerPool
from harness.run.tracer import measure_first_differences
from harness.workload.matrix import Cell


def _cell(frontend: str, optimizer: str) -> CellResult:
    return CellResult(Cell(frontend, "with_autocast", "default", optimizer, "cpu"), Status.OK)


def _points(values: list[float]) -> list[list[Any]]:
    """A trace of two points: a loss both sides share, then a tensor whose digest is its values' (hex, as a reply's)."""
    return [[0, "loss", "float32", [], "0" * 64, 1.0],
            [0, "forward.layer0", "float32", [len(values)], hashlib.sha256(repr(values).encode()).hexdigest(), None]]


class _FakePool:
    """Answers a trace request per frontend and optimizer (R's last value moved by ``moved``); a cell in ``fails`` raises."""

    spec = type("Spec", (), {"device": "cpu"})()

    def __init__(self, fails: set[tuple[str, str]]) -> None:
        self.fails = fails
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def cell_request(self, cell: Cell, **extra: Any) -> dict[str, Any]:
        return {"cell": cell, **extra}

    def call(self, frontend: str, request: dict[str, Any]) -> dict[str, Any]:
        cell: Cell = request["cell"]
        with self.lock:
            self.calls.append((frontend, cell.optimizer))
        if (frontend, cell.optimizer) in self.fails:
            raise WorkerError("planted: the worker died")
        assert request["trace"] == {"keep": [[0, "forward.layer0"]]}
        moved = {"sgd": 1.0, "adam": 2.0}[cell.optimizer] if frontend == "r" else 0.0
        values = [1.0, 2.0, 3.0 + moved]
        data = np.asarray(values, dtype=np.float32).tobytes()
        return {"points": _points(values), "kept": {"0:forward.layer0": {"dtype": "float32", "shape": [3], "data": data}}}

    @contextlib.contextmanager
    def helping(self, frontend: str) -> Iterator[None]:
        yield

    def helper_started(self, frontend: str) -> bool:
        return False

    def unavailable_reason(self, frontend: str) -> str | None:
        return None

    def startup_seconds(self, frontend: str) -> float | None:
        return 100.0  # no helper is worth starting: each frontend's sides run in its own lane


def _trace(optimizer: str, kind: str = "bytes") -> PairTrace:
    first = PointDifference(0, "forward.layer0", kind, ("float32", "float32"), ((3,), (3,)))
    return PairTrace(f"with_autocast-default-{optimizer}-cpu", ("python", "r"), (2, 2), 1, first, (0, "loss"))


def _measure(fails: frozenset[tuple[str, str]] = frozenset()) -> tuple[list[PairTrace], _FakePool]:
    pool = _FakePool(set(fails))
    kinds = (("sgd", "bytes"), ("rmsprop", "dtype"), ("adam", "bytes"))
    pairs = [(_cell("python", o), _cell("r", o), _trace(o, kind)) for o, kind in kinds]
    sides: list[str] = []
    traces = measure_first_differences(cast(WorkerPool, pool), pairs, lambda side: sides.append(side.cell.id),
                                       {"python": {"torch": "x"}, "r": {"torch": "y"}})
    assert sorted(sides) == sorted(c.id for o in ("sgd", "adam") for c in (_cell("python", o), _cell("r", o)))
    return traces, pool


def test_each_pair_gets_the_distance_its_own_two_sides_measured() -> None:
    traces, pool = _measure()
    # a pair that does not part at two tensors runs nothing again
    assert sorted(pool.calls) == [("python", "adam"), ("python", "sgd"), ("r", "adam"), ("r", "sgd")]
    sgd, rmsprop, adam = traces
    assert rmsprop == _trace("rmsprop", "dtype")
    assert sgd.detail is not None and adam.detail is not None
    # R's last element moved by 1.0 for sgd and 2.0 for adam: each pair's own tensors measured, never its neighbour's
    assert (sgd.detail.differing, sgd.detail.max_abs_difference, sgd.detail.worst_values) == (1, 1.0, (3.0, 4.0))
    assert (adam.detail.differing, adam.detail.max_abs_difference, adam.detail.worst_values) == (1, 2.0, (3.0, 5.0))


def test_a_side_whose_worker_fails_leaves_its_pair_unmeasured_and_the_others_measured() -> None:
    traces, _ = _measure(frozenset({("r", "sgd")}))
    assert traces[0] == _trace("sgd")
    assert traces[2].detail is not None and traces[2].detail.max_abs_difference == 2.0


def test_a_side_whose_record_call_kept_the_tensor_is_not_run_again(tmp_path: Any) -> None:
    """Issue 38: a record call compared as it ran keeps the tensor it parted at (the recorder's ``against``), so its side
    is answered from its stored trace (digests at the stored 128 bits) and only the other side runs; the distance is the
    same as two runs give."""
    import dataclasses

    from harness.model.cell_trace import CellTrace

    values = [1.0, 2.0, 4.0]  # R's sgd tensor, as the fake pool's R side answers it
    data = np.asarray(values, dtype=np.float32).tobytes()
    stored = CellTrace(tuple((p[0], p[1], p[2], tuple(p[3]), p[4][:32], p[5]) for p in _points(values)), "blake3",
                       kept={"0:forward.layer0": {"dtype": "float32", "shape": [3], "data": data}}, cut=0)
    r_cell = dataclasses.replace(_cell("r", "sgd"), trace=stored.write(tmp_path / "r.trace.safetensors"))
    pool = _FakePool(set())
    sides: list[str] = []
    (trace,) = measure_first_differences(cast(WorkerPool, pool), [(_cell("python", "sgd"), r_cell, _trace("sgd"))],
                                         lambda side: sides.append(side.cell.id), {"python": {"torch": "x"}, "r": {"torch": "y"}})
    assert pool.calls == [("python", "sgd")] and sorted(sides) == sorted([_cell("python", "sgd").id, r_cell.id])
    assert trace.detail is not None and (trace.detail.differing, trace.detail.worst_values) == (1, (3.0, 4.0))
