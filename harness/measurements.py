"""The measurements after the record calls: timed rounds, matmul peaks and GEMM profiles.

Each takes the runner's cells (outcome dicts) and fills in their ``timing``, ``gemm_profile`` and
``gemm_problem``; a failure ends one cell's measurement with its reason, never the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.efficiency import gemm_dtype
from harness.errors import WorkerError
from harness.gemm_profile import amp_gemm_problem
from harness.matrix import Cell
from harness.protocol import TimingProtocol
from harness.records import numerical_failure, record_problem
from harness.timing import RoundLog

if TYPE_CHECKING:
    from harness.runner import MatrixRunner

__all__ = ["PROFILED_STEP", "measure_peaks", "profile_cells", "time_cells"]

#: The step profiled: the third, so the first two (allocator growth, kernel selection, the scaler's
#: first scale tensor) are behind it.
PROFILED_STEP = 3

Progress = Callable[[str], None]


def time_cells(runner: MatrixRunner, cells: list[dict[str, Any]], protocol: TimingProtocol, progress: Progress) -> None:
    """Warm-up calls, then the timed rounds of every ``ok`` cell, back to back or interleaved.

    Interleaved, round k of every cell runs before round k+1 of any (A, B, A, B …), so a slow drift
    of the machine (heat, a neighbour's load) lands on both sides of a comparison alike. A cell whose
    timed rounds have taken ``max_seconds`` gets no more (it always gets one).
    """
    timed = [c for c in cells if c["status"] == "ok"]
    logs = {c["id"]: RoundLog() for c in timed}
    for c in list(timed):
        extra = protocol.warmup_rounds - 1 if c["wall_seconds"] < protocol.max_seconds else 0
        for k in range(extra):
            progress(f"{c['id']}: warm-up {k + 2}/{protocol.warmup_rounds}")
            if not _one_round(runner, c, logs[c["id"]], timed=False):
                timed.remove(c)
                break
    order = (
        [(k, c) for k in range(protocol.rounds) for c in timed] if protocol.interleave
        else [(k, c) for c in timed for k in range(protocol.rounds)]
    )
    for k, c in order:
        log = logs[c["id"]]
        if c["status"] != "ok" or (k > 0 and log.spent >= protocol.max_seconds):
            continue
        progress(f"{c['id']}: round {k + 1}/{protocol.rounds}")
        _one_round(runner, c, log, timed=True)
    for c in timed:
        log = logs[c["id"]]
        c["timing"] = log.summary() if c["status"] == "ok" and log.call_seconds else None


def _one_round(runner: MatrixRunner, cell: dict[str, Any], log: RoundLog, timed: bool) -> bool:
    """One call without weights; kept in ``log`` when ``timed``. False (cell now ``error``) if it failed."""
    what = f"timed round {len(log.call_seconds) + 1}" if timed else f"warm-up call {log.warmup_calls + 1}"
    key = _cell_of(cell)
    worker = runner.worker(cell["frontend"])
    try:
        start = time.perf_counter()
        record = runner.call_cell(key, save_weights=False)
        seconds = time.perf_counter() - start
    except WorkerError as err:
        cell |= {"status": "error", "reason": f"{what} failed: {err}", "timing": None}
        return False
    problem = record_problem(record, runner.spec, key)
    failure = numerical_failure(record, key) if problem is None else None
    if failure is not None:
        problem = f"{failure}, where the record call's losses were finite"
    if problem is not None:
        cell |= {"status": "error", "reason": f"{what}: {problem}", "timing": None}
        return False
    if timed:
        same = np.array_equal(np.asarray(record["losses"], dtype=float), np.asarray(cell["record"]["losses"], dtype=float), equal_nan=True)
        log.add(seconds, record, (worker.last_memory or {}).get("peak_rss_bytes"), same)
    else:
        log.warmup_calls += 1
    return True


def measure_peaks(runner: MatrixRunner, cells: list[dict[str, Any]], progress: Progress) -> dict[str, Any]:
    """This machine's matmul throughput in each GEMM dtype the cells used, measured now, in the Python worker.

    Measured after the cells, with the spec's device and threads, so "share of peak" compares like with like.
    """
    spec = runner.spec
    dtypes = sorted({gemm_dtype(c["mode"], spec) for c in cells if c["status"] == "ok"})
    peaks: dict[str, Any] = {"device": spec.device, "threads": spec.threads, "by_dtype": {}, "reason": None}
    reason = runner.unavailable_reason("python")
    if not dtypes or reason is not None:
        peaks["reason"] = "no cell ran" if not dtypes else f"the peak is measured with Python torch: {reason}"
        return peaks
    for dtype in dtypes:
        progress(f"measuring the {dtype} matmul peak on {spec.device}")
        request = {"kind": "matmul_peak", "device": spec.device, "dtype": dtype, "threads": spec.threads,
                   "script": "matmul peak", "mode": dtype}
        try:
            peaks["by_dtype"][dtype] = runner.worker("python").call(request, timeout=runner.timeout)
        except WorkerError as err:
            peaks["by_dtype"][dtype] = None
            peaks["reason"] = f"{dtype} peak not measured: {err}"
    return peaks


def profile_cells(runner: MatrixRunner, cells: list[dict[str, Any]], progress: Progress) -> None:
    """Profile one step of every ``ok`` Python cell and flag AMP cells whose GEMMs ran in float32.

    Python only: torch.profiler is Python torch's. R cells keep ``gemm_profile`` ``None``.
    """
    step = min(PROFILED_STEP, runner.spec.steps)
    for c in cells:
        if c["status"] != "ok" or c["frontend"] != "python":
            continue
        progress(f"{c['id']}: profiling step {step}")
        request = runner.cell_request(_cell_of(c), save_weights=False, kind="gemm_profile", step=step)
        try:
            c["gemm_profile"] = runner.worker("python").call(request, timeout=runner.timeout)
        except WorkerError as err:
            c["gemm_profile"] = {"error": str(err)}
            continue
        c["gemm_problem"] = amp_gemm_problem(c["mode"], c["gemm_profile"])


def _cell_of(outcome: dict[str, Any]) -> Cell:
    """The matrix cell an outcome dict describes (the key the runner's calls take)."""
    return Cell(outcome["frontend"], outcome["script"], outcome["mode"], outcome["device"])
