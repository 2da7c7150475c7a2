"""The measurements after the record calls: timed rounds, matmul peaks, GEMM profiles, time against the default.

Each takes the cells the record calls gave and returns them again with their ``timing``,
``gemm_profile`` and ``gemm_problem`` (or ``time_vs_default``) set; a failure ends one cell's
measurement with its reason (the cell becomes ``error``), never the run. Every timed round's record
goes through the same check as the record call (:func:`harness.judge.record_check.judge_record`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from harness.errors import WorkerError
from harness.judge.gemm_precision import amp_gemm_problem
from harness.judge.record_check import judge_record
from harness.judge.spread import spread_checked
from harness.judge.targets import OVERHEAD_MAX_SECONDS
from harness.model.efficiency import gemm_dtype
from harness.model.result import CellResult, Peaks, Status
from harness.model.timing import RoundLog, TimingProtocol
from harness.run.lanes import run_in_lanes
from harness.run.machine_load import read_load, round_load
from harness.run.pool import WorkerPool
from harness.worker_side.calibration import SHAPE_FIELDS

__all__ = ["FLOOR_SHARE_OF_LOOP", "FLOOR_SIZING_STEPS", "PROFILED_STEP", "measure_peaks", "profile_cells", "time_cells", "timed_cells"]

logger = logging.getLogger(__name__)

#: The step profiled: the third, so the first two (allocator growth, kernel selection, the scaler's
#: first scale tensor) are behind it.
PROFILED_STEP = 3
#: Steps in the one untimed calibration call that sizes a cell's floor rounds (its seconds per step): 10 of
#: harness/worker_side/calibration.py's bare training steps at ``bench`` take 40 ms (bfloat16) to 114 ms (float32) in
#: Python on CPU, R's about 1.5 times as long, a quarter of one ``bench`` round or less, and come after the call's own
#: untimed first step (the floor rounds then run about as long as they are sized to, within a few tens of percent).
FLOOR_SIZING_STEPS = 10
#: How long a floor round runs, as a share of the cell's loop. The floor's CV is what the spread target reads, and the
#: machine's slowing on this VM is a share of the round, not a fixed stall (harness.model.timing.BENCH_ROUNDS: 2.7-3.2 % of
#: rounds over 5 % slow at 0.13 s and at 0.5 s alike), so a floor round half as long reads about the same noise (measured below).
#: The floor rounds were 42 % of a ``bench`` spread run's timed rounds at the loop's length (issue 47: ``tox -e bench``
#: within 10 minutes); at half of it they are 26 %.
FLOOR_SHARE_OF_LOOP = 0.5

Progress = Callable[[str], None]
#: What a call after the record call is for (:func:`_one_round`).
RoundKind = Literal["warm-up", "timed", "alone"]


class _RoundFailed(Exception):
    """A warm-up call or timed round did not give a usable record; the message is the cell's reason."""


def time_cells(pool: WorkerPool, cells: Sequence[CellResult], protocol: TimingProtocol, progress: Progress,
               facts: Mapping[str, Mapping[str, Any]] | None = None) -> list[CellResult]:
    """Warm-up calls, then the timed rounds of every ``ok`` cell: back to back (each cell's warm-up right before its own
    rounds), interleaved (every warm-up first), or side by side.

    Interleaved, round k of every cell runs before round k+1 of any (A, B, A, B …), so a slow drift
    of the machine (heat, a neighbour's load) lands on both sides of a comparison alike. A cell whose
    timed rounds have taken ``max_seconds`` gets no more (it always gets one).

    Side by side (:attr:`TimingProtocol.side_by_side`: too few rounds for a spread, so neither a ratio nor the spread
    target can rest on them): each frontend's cells in a lane of their own,
    the lanes on the cores at once (:func:`harness.run.lanes.run_in_lanes`, as the record calls run), since all such
    rounds can give is each cell's own time (the run's limit adds them up) and its bridge; ``facts``: the workers'
    descriptions (which frontends may have a helper worker). Only the cells that have no untraced run already are timed
    so (:func:`timed_cells`). A bridge read over its bound (:data:`~harness.judge.targets.OVERHEAD_MAX_SECONDS`) there is
    read again once the lanes are done, in one more round with the machine to itself, and that reading is the one judged
    (:attr:`~harness.model.timing.Timing.bridge_alone_seconds`): beside the other lane, two workers and the harness's lane
    threads share the cores, and a single round's bridge carried their wait (R's first ``tiny`` cell, which runs beside
    all of Python's, read 2.2-3 ms or 4-7 ms, 1 run in 4: the R worker woken 2-4 ms late, or its own handling stretched by
    as much, while its share alone stayed 2.0-2.2 ms). A bridge the harness itself lengthened misses both readings.
    Otherwise one at a time: a timed round has the machine to itself.

    A cell the spread target checks (:func:`harness.judge.spread.spread_checked`, over its last untimed call's loop) has
    the machine's noise floor timed beside it: one calibration round right after each of its timed rounds, in the same
    worker, so a drift of the machine lands on both (:mod:`harness.worker_side.calibration`), each
    :data:`FLOOR_SHARE_OF_LOOP` of the cell's loop. Other cells get none, nor any cell with too few rounds for a spread
    (side by side): floors only where a spread is judged.
    """
    timed = timed_cells(cells, protocol)
    logs = {c.id: RoundLog() for c in timed}
    failed: dict[str, str] = {}
    steps: dict[str, int] = {}  # the checked cells' steps per floor round
    if protocol.side_by_side:
        def all_rounds(c: CellResult) -> CellResult:
            _warm_up(pool, c, protocol, logs[c.id], failed, progress)
            for k in range(protocol.rounds):
                if c.id in failed or (k > 0 and logs[c.id].spent >= protocol.max_seconds):
                    break
                _one_round(pool, c, logs[c.id], failed, "timed")
            return c

        run_in_lanes(pool, timed, all_rounds, lambda c: progress(f"{c.id}: timed"), facts or {})
        for c in timed:  # part of the cell's timing, no unit of the phase's own (its bar counts the cells)
            if c.id not in failed and logs[c.id].call_seconds and logs[c.id].bridge_seconds > OVERHEAD_MAX_SECONDS:
                _one_round(pool, c, logs[c.id], failed, "alone")
        return [_with_timing(c, logs.get(c.id), failed.get(c.id)) for c in cells]

    def warm(c: CellResult) -> None:
        """The cell's untimed calls, then its floor rounds' size where the spread target checks it."""
        loop_seconds = _warm_up(pool, c, protocol, logs[c.id], failed, progress)
        if c.id not in failed and spread_checked(c.device, pool.spec.preset, loop_seconds):
            sized = _floor_steps(pool, c, loop_seconds)
            if sized is not None:
                steps[c.id] = sized

    def timed_round(k: int, c: CellResult) -> None:
        """The cell's round ``k`` and, where the spread target checks it, the floor round after it."""
        log = logs[c.id]
        if c.id in failed or (k > 0 and log.spent >= protocol.max_seconds):
            return
        progress(f"{c.id}: round {k + 1}/{protocol.rounds}")
        if _one_round(pool, c, log, failed, "timed") is not None and c.id in steps:
            if not _floor_round(pool, c, log, steps[c.id]):
                del steps[c.id]

    # Back to back, each cell's untimed calls come right before its own rounds: a worker serves every cell of its frontend,
    # so with every warm-up first, a cell's first timed round followed the other cells' rounds, not its own warm-up (in an
    # idle back-to-back ``bench`` run so warmed, R's scaler cell's rounds 1-4 ran 4-11 % over its median and R's
    # low-precision-weights cell's rounds 1-5 ran 2-25 % over). Interleaved, every round follows another cell's anyway, so
    # the warm-ups all come first there. It costs no call.
    if protocol.interleave:
        for c in timed:
            warm(c)
        for k in range(protocol.rounds):
            for c in timed:
                timed_round(k, c)
    else:
        for c in timed:
            warm(c)
            for k in range(protocol.rounds):
                timed_round(k, c)
    return [_with_timing(c, logs.get(c.id), failed.get(c.id)) for c in cells]


def timed_cells(cells: Sequence[CellResult], protocol: TimingProtocol) -> list[CellResult]:
    """The cells ``protocol`` times: every ``ok`` one, but side by side (too few rounds for a ratio) only those without an
    untraced run of their workload already (:attr:`CellResult.untraced_seconds`: an untraced reconciled run made for a
    proof). Such a round could give only the cell's own time, and that run gave it (issue 47: at ``tiny``, 40 % of the
    timed rounds repeated a run the proofs had made)."""
    ok = [c for c in cells if c.status is Status.OK]
    return [c for c in ok if c.untraced_seconds is None] if protocol.side_by_side else ok


def _warm_up(pool: WorkerPool, c: CellResult, protocol: TimingProtocol, log: RoundLog, failed: dict[str, str],
             progress: Progress) -> float:
    """The cell's untimed calls after its record call; the loop seconds of its last untimed call."""
    loop_seconds = c.record.seconds_total if c.record is not None else 0.0
    extra = protocol.warmup_rounds - 1 if (c.wall_seconds or 0.0) < protocol.max_seconds else 0
    for k in range(extra):
        progress(f"{c.id}: warm-up {k + 2}/{protocol.warmup_rounds}")
        seconds = _one_round(pool, c, log, failed, "warm-up")
        if seconds is None:
            break
        loop_seconds = seconds
    return loop_seconds


def _calibration_request(pool: WorkerPool, cell: CellResult, iterations: int) -> dict[str, object]:
    """The request for the noise-floor loop: the cell's MLP shapes (its run spec's fields) in its GEMM dtype (float32, or
    the AMP dtype under autocast)."""
    spec = pool.spec
    return {"kind": "calibrate", "device": cell.device, "dtype": gemm_dtype(cell.cell.properties, spec), "threads": spec.threads,
            "iterations": iterations, **{name: getattr(spec, name) for name in SHAPE_FIELDS}}


def _floor_steps(pool: WorkerPool, cell: CellResult, loop_seconds: float) -> int | None:
    """How many steps make a floor round :data:`FLOOR_SHARE_OF_LOOP` of the cell's loop, from one untimed calibration
    call; ``None`` (no floor for this cell, said in the log) if the call failed."""
    try:
        reply = pool.call(cell.frontend, _calibration_request(pool, cell, FLOOR_SIZING_STEPS))
    except WorkerError as err:
        logger.warning("%s: the machine's noise floor is not measured beside it: %s", cell.id, err)
        return None
    per_step = float(reply["seconds"]) / int(reply["iterations"])
    return max(1, round(FLOOR_SHARE_OF_LOOP * loop_seconds / per_step)) if per_step > 0 else FLOOR_SIZING_STEPS


def _floor_round(pool: WorkerPool, cell: CellResult, log: RoundLog, iterations: int) -> bool:
    """One calibration round in the cell's worker, kept in ``log``; False if it failed (the cell's floor is then dropped,
    so its spread is judged against the plain bound, and the log says why)."""
    try:
        reply = pool.call(cell.frontend, _calibration_request(pool, cell, iterations))
    except WorkerError as err:
        logger.warning("%s: the machine's noise floor is dropped: %s", cell.id, err)
        log.floor_seconds.clear()
        return False
    log.add_floor(float(reply["seconds"]))
    return True


def _with_timing(cell: CellResult, log: RoundLog | None, failure: str | None) -> CellResult:
    if failure is not None:
        return dataclasses.replace(cell, status=Status.ERROR, reason=failure, timing=None)
    if log is None or not log.call_seconds:
        return cell
    return dataclasses.replace(cell, timing=log.summary())


def _one_round(pool: WorkerPool, cell: CellResult, log: RoundLog, failed: dict[str, str], kind: RoundKind) -> float | None:
    """One call without weights, kept in ``log`` as ``kind`` says: an untimed ``warm-up`` call, a ``timed`` round (with what
    else ran during it), or the round that reads a side-by-side bridge again ``alone``. Its loop seconds, or ``None`` (the
    reason in ``failed``) if it failed."""
    timed = kind == "timed"
    what = {"warm-up": f"warm-up call {log.warmup_calls + 1}", "timed": f"timed round {len(log.call_seconds) + 1}",
            "alone": "the round reading its bridge again alone"}[kind]
    try:
        before = read_load(pool.worker_pid(cell.frontend)) if timed else None
        start = time.perf_counter()
        record = pool.call_cell(cell.cell, save_weights=False)
        seconds = time.perf_counter() - start
        load = round_load(before, read_load(pool.worker_pid(cell.frontend))) if timed else None
    except WorkerError as err:
        failed[cell.id] = f"{what} failed: {err}"
        return None
    status, problem = judge_record(record, pool.spec.for_model(cell.cell.model), cell.cell)
    if status is Status.NUMERICAL_FAILURE:
        problem = f"{problem}, where the record call's losses were finite"
    if status is not Status.OK:
        failed[cell.id] = f"{what}: {problem}"
        return None
    if kind == "warm-up":
        log.warmup_calls += 1
        return float(record["seconds_total"])
    assert cell.record is not None
    same = np.array_equal(np.asarray(record["losses"], dtype=float), np.asarray(cell.record.losses, dtype=float), equal_nan=True)
    if timed:
        log.add(seconds, record, pool.last_memory(cell.frontend).get("peak_rss_bytes"), same, load)
    else:
        log.add_alone(seconds, record, same)
    return float(record["seconds_total"])


def measure_peaks(pool: WorkerPool, cells: Sequence[CellResult], progress: Progress) -> Peaks:
    """This machine's matmul throughput in each GEMM dtype the cells used, measured now, in the Python worker.

    Measured after the cells, with the spec's device and threads, so "share of peak" compares like with like.
    """
    spec = pool.spec
    dtypes = sorted({gemm_dtype(c.cell.properties, spec) for c in cells if c.status is Status.OK})
    measurer = pool.peak_frontend()
    reason = "no Python frontend in this run" if measurer is None else pool.unavailable_reason(measurer)
    if not dtypes or measurer is None or reason is not None:
        why = "no cell ran" if not dtypes else f"the peak is measured with Python torch: {reason}"
        return Peaks(spec.device, spec.threads, {}, why)
    by_dtype = {}
    failure = None
    for dtype in dtypes:
        progress(f"measuring the {dtype} matmul peak on {spec.device}")
        request = {"kind": "matmul_peak", "device": spec.device, "dtype": dtype, "threads": spec.threads,
                   "script": "matmul peak", "mode": dtype}
        try:
            by_dtype[dtype] = pool.call(measurer, request)
        except WorkerError as err:
            by_dtype[dtype] = None
            failure = f"{dtype} peak not measured: {err}"
    return Peaks(spec.device, spec.threads, by_dtype, failure)


def profile_cells(pool: WorkerPool, cells: Sequence[CellResult], progress: Progress) -> list[CellResult]:
    """Profile one step of every ``ok`` Python cell and flag AMP cells whose GEMMs ran in float32.

    Python only: torch.profiler is Python torch's. R cells keep ``gemm_profile`` ``None``.
    """
    step = min(PROFILED_STEP, pool.spec.steps)
    profiled = []
    for c in cells:
        if c.status is not Status.OK or pool.language(c.frontend) != "python":
            profiled.append(c)
            continue
        progress(f"{c.id}: profiling step {step}")
        request = pool.cell_request(c.cell, save_weights=False, kind="gemm_profile", step=step)
        try:
            profile = pool.call(c.frontend, request)
        except WorkerError as err:
            profiled.append(dataclasses.replace(c, gemm_profile={"error": str(err)}))
            continue
        profiled.append(dataclasses.replace(c, gemm_profile=profile, gemm_problem=amp_gemm_problem(c.cell.properties, profile)))
    return profiled


