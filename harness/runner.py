"""Runs the matrix: fixtures once, the float64 reference once, every cell in its frontend's worker.

A cell never raises: whatever happens (frontend missing, script error, crash, hang, NaN) ends as a
cell with a status and a one-line reason, and the run goes on with the other cells. After the record
calls come the measurements (:mod:`harness.measurements`): timed rounds, matmul peaks, GEMM profiles.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from safetensors.numpy import load_file

from harness.availability import Availability, probe, r_required
from harness.cell_verdict import check_float64, judge_cell
from harness.compare import compare_result
from harness.efficiency import cell_efficiency
from harness.errors import ScriptError, WorkerError
from harness.figures import check_figures
from harness.fixtures import FixtureFile, ensure_fixtures, load_fixture_arrays
from harness.frontends.registry import FRONTENDS, open_worker
from harness.matrix import Cell, cells_for
from harness.measurements import measure_peaks, profile_cells, time_cells
from harness.paths import REPO_ROOT, SCRIPTS_ENV, scripts_root
from harness.prepare import prepare_run_spec
from harness.protocol import TimingProtocol, thread_env
from harness.records import SCALER_MODES, numerical_failure, record_problem
from harness.reference import Reference, reference_skip_reason, run_reference
from harness.results import RESULT_SCHEMA_VERSION
from harness.spec import WorkloadSpec
from harness.staging import StagingDir
from harness.timing import ratio
from harness.tolerances import DEFAULT_JUDGING, check_judging, float64_bound_for
from harness.worker import Worker

__all__ = ["DEFAULT_TIMEOUT_S", "MatrixRunner", "SCALER_MODES", "add_speedups", "collect_warnings"]

log = logging.getLogger(__name__)

#: A cell that has not answered in this long is hung: ``recipe`` on 2 CPU cores takes a few minutes
#: per cell, ``tiny`` well under a second.
DEFAULT_TIMEOUT_S = 900.0
#: The runner's own staging folders in the temporary directory (a killed run's are swept by the next).
STAGING_PREFIX = "amp-parity-weights-"


class MatrixRunner:
    """Holds the workers and the reference for one spec; reuse it to run cells many times (benchmarks)."""

    def __init__(
        self,
        spec: WorkloadSpec,
        frontends: tuple[str, ...] = ("python", "r"),
        timeout: float = DEFAULT_TIMEOUT_S,
        availability: Availability | None = None,
        staging: Path | None = None,
    ) -> None:
        """``staging``: the folder the scripts write their final weights into (a :class:`harness.outputs.ResultClaim`'s,
        to publish them); by default a folder of this runner's own in the temporary directory, dropped on close."""
        self._created = time.perf_counter()
        self.spec = spec
        self.frontends = frontends
        self.timeout = timeout
        self.availability = availability or probe()
        self.fixture: FixtureFile = ensure_fixtures(spec)
        self._own_staging: StagingDir | None = None
        if staging is None:
            self._own_staging = StagingDir(Path(tempfile.gettempdir()), STAGING_PREFIX)
            staging = self._own_staging.path
        self._staging = staging
        self._workers: dict[str, Worker] = {}
        self._arrays: dict[str, Any] | None = None
        self._references: dict[tuple[bool, frozenset[int]], Reference] = {}
        #: Seconds spent computing the float64 reference (part of the matrix's wall time).
        self.reference_seconds = 0.0
        self.reference_reason = reference_skip_reason(spec)

    def __enter__(self) -> MatrixRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers and drop the staged weights (when the staging folder is the runner's own)."""
        for worker in self._workers.values():
            worker.close()
        self._workers.clear()
        if self._own_staging is not None:
            self._own_staging.close()

    def worker(self, frontend: str) -> Worker:
        """The frontend's long-lived worker (started on first use)."""
        if frontend not in self._workers:
            self._workers[frontend] = open_worker(frontend, thread_env(self.spec.threads))
        return self._workers[frontend]

    def worker_info(self) -> dict[str, Any]:
        """Start-up seconds (R's start-up and ``library(torch)`` among them) and starts, per worker."""
        return {name: {"startup_seconds": w.startup_seconds, "starts": w.starts} for name, w in self._workers.items()}

    def unavailable_reason(self, frontend: str) -> str | None:
        """Why ``frontend`` cannot run here, or ``None``."""
        return FRONTENDS[frontend].unavailable_reason(self.availability)

    def run(
        self,
        modes: tuple[str, ...],
        on_progress: Callable[[str], None] | None = None,
        protocol: TimingProtocol | None = None,
        profile: bool | None = None,
        judging: str = DEFAULT_JUDGING,
    ) -> dict[str, Any]:
        """Run every cell of the matrix, then time and measure them; return the whole (unsaved) result.

        ``profile`` (default: on CUDA only) profiles one step of each Python cell's GEMMs. ``judging``
        (``strict`` or ``tolerance_only``, see :mod:`harness.tolerances`) is how pairs are judged; the
        result keeps it, so ``report`` judges the result the same way.
        """
        check_judging(judging)
        protocol = protocol or TimingProtocol()
        progress = on_progress or (lambda text: None)
        started = time.time()
        cells = []
        for cell in cells_for(self.frontends, modes, self.spec.device):
            outcome = self.run_cell(cell)
            cells.append(outcome)
            progress(f"{cell.id}: {outcome['status']}")
        time_cells(self, cells, protocol, progress)
        peaks = measure_peaks(self, cells, progress)
        if self.spec.device == "cuda" if profile is None else profile:
            profile_cells(self, cells, progress)
        for outcome in cells:
            outcome["efficiency"] = cell_efficiency(outcome, self.spec, peaks["by_dtype"])
        add_speedups(cells, paired=protocol.interleave)
        result = {
            "schema_version": RESULT_SCHEMA_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
            "wall_seconds": time.perf_counter() - self._created,
            "spec": self.spec.to_dict(),
            "spec_digest": self.spec.digest(),
            "fixture": {"path": str(self.fixture.path), "sha256": self.fixture.sha256, "digest": self.fixture.digest},
            "environment": self.availability.to_dict(),
            "protocol": protocol.to_dict(),
            "workers": self.worker_info(),
            "peaks": peaks,
            "reference": self.reference_summary(),
            "reference_seconds": self.reference_seconds,
            "warnings": collect_warnings(cells, self.spec),
            "cells": cells,
            "judging": judging,
        }
        result["pairs"] = [verdict.to_dict() for verdict in compare_result(result)]
        result["figures"] = [check.to_dict() for check in check_figures(result)]
        return result

    def run_cell(self, cell: Cell) -> dict[str, Any]:
        """Run one cell; the outcome's ``status`` says how it ended (it never raises), its ``verdict`` how it
        stands on its own (:mod:`harness.cell_verdict`)."""
        outcome = self._run_cell(cell)
        if outcome.get("verdict") is None:
            outcome["verdict"] = judge_cell(outcome, self.spec.to_dict(), None, self.reference_reason).to_dict()
        return outcome

    def _run_cell(self, cell: Cell) -> dict[str, Any]:
        outcome: dict[str, Any] = {
            "id": cell.id, "pair": cell.pair, "frontend": cell.frontend, "script": cell.script,
            "mode": cell.mode, "device": cell.device, "status": "ok", "reason": None, "record": None,
            "reference_distance": None, "wall_seconds": None, "memory": None, "timing": None,
            "efficiency": None, "gemm_profile": None, "gemm_problem": None, "verdict": None,
        }
        reason = self.unavailable_reason(cell.frontend)
        if reason is not None:
            status = "error" if cell.frontend == "r" and r_required() else "skipped"
            if status == "error":
                reason += " (AMP_PARITY_REQUIRE_R=1 makes this a failure)"
            return outcome | {"status": status, "reason": reason}
        worker = self.worker(cell.frontend)
        try:
            worker.start()  # start-up (R, library(torch), import torch) is not part of a cell's time
            start = time.perf_counter()
            record = self.call_cell(cell)
        except ScriptError as err:
            known = self.declared_unsupported(cell)
            status = "unsupported" if known else "error"
            return outcome | {"status": status, "reason": err.frontend_message if known else str(err)}
        except WorkerError as err:
            return outcome | {"status": "error", "reason": str(err)}
        memory = dict(worker.last_memory or {}) | {"cuda_peak_bytes": record.get("peak_memory_bytes") if isinstance(record, dict) else None}
        outcome |= {"record": record, "wall_seconds": time.perf_counter() - start, "memory": memory}
        problem = record_problem(record, self.spec, cell)
        if problem is not None:
            return outcome | {"status": "error", "reason": problem}
        failure = numerical_failure(record, cell)
        if failure is not None:
            outcome |= {"status": "numerical_failure", "reason": failure}
        if self.declared_unsupported(cell):
            outcome["reason"] = f"declared unsupported for {cell.frontend}, but it ran: update the Frontend registry"
        # A scaler run is judged against the steps it really took: the reference skips its skipped steps too.
        skipped = frozenset(step for step, flag in enumerate(record.get("skipped") or []) if flag)
        reference = self.reference(clip=cell.mode == "autocast_scaler_clip", skipped=skipped)
        float64 = None
        if reference is not None and failure is None:
            bound = float64_bound_for(cell.mode, cell.device, str(self.spec.amp_dtype), self.spec.steps)
            float64 = check_float64(record["losses"], load_file(record["weights_path"]), reference, bound, skipped)
            outcome["reference_distance"] = float64.distance()
        outcome["verdict"] = judge_cell(outcome, self.spec.to_dict(), float64, self.reference_reason).to_dict()
        return outcome

    def call_cell(self, cell: Cell, save_weights: bool = True) -> dict[str, Any]:
        """Run ``cell`` in its worker and return the raw run record: what a timed round (and a benchmark round) times.

        ``save_weights=False`` runs without writing the final weights: a timed round after the first.

        Raises:
            WorkerError: the script failed (``ScriptError``), the worker crashed or timed out.
        """
        record: dict[str, Any] = self.worker(cell.frontend).call(self.cell_request(cell, save_weights), timeout=self.timeout)
        return record

    def cell_request(self, cell: Cell, save_weights: bool = True, **extra: Any) -> dict[str, Any]:
        """The request a worker answers for ``cell`` (``extra`` adds fields, e.g. another ``kind``)."""
        weights_out = self._staging / f"{cell.id}.safetensors" if save_weights else None
        return {
            "script": cell.script, "mode": cell.mode, "spec_summary": self.spec.summary(),
            "run_spec": prepare_run_spec(self.spec, weights_out, self.fixture, save_weights=save_weights), **extra,
        }

    def declared_unsupported(self, cell: Cell) -> bool:
        """Whether the frontend is known not to support this cell (it still runs, to notice a change)."""
        return (cell.script, cell.device) in FRONTENDS[cell.frontend].unsupported

    def reference(self, clip: bool, skipped: frozenset[int] = frozenset()) -> Reference | None:
        """The float64 trajectory (with or without clipping, replaying ``skipped`` steps), computed once
        per kind; ``None`` when too costly."""
        if self.reference_reason is not None:
            return None
        key = (clip, skipped)
        if key not in self._references:
            started = time.perf_counter()
            if self._arrays is None:
                self._arrays = load_fixture_arrays(self.fixture)
            self._references[key] = run_reference(self.spec, self._arrays, clip=clip, skipped=skipped)
            self.reference_seconds += time.perf_counter() - started
        return self._references[key]

    def reference_summary(self) -> dict[str, Any]:
        """The reference trajectories for the result file (losses only; weights stay in memory), and each one
        replayed over a run's skipped steps (``replayed``: clip or not, the steps, the losses)."""
        if self.reference_reason is not None:
            return {"available": False, "reason": self.reference_reason}
        plain, clipped = self.reference(False), self.reference(True)
        assert plain is not None and clipped is not None
        replayed = [
            {"clip": clip, "skipped_steps": sorted(skipped), "losses": ref.losses.tolist()}
            for (clip, skipped), ref in self._references.items() if skipped
        ]
        return {
            "available": True, "reason": None, "losses": plain.losses.tolist(), "losses_clipped": clipped.losses.tolist(),
            "replayed": replayed,
        }


def add_speedups(cells: list[dict[str, Any]], paired: bool = False) -> None:
    """``speedup_vs_default``: the frontend's ``default`` loop time ÷ this cell's, when the spread supports it.

    ``speedup_note`` says what the ratio rests on or, when it is ``None``, why (see :func:`harness.timing.ratio`).
    """
    base = {(c["frontend"], c["device"]): c.get("timing") for c in cells if c["mode"] == "default" and c["status"] == "ok"}
    for c in cells:
        default = base.get((c["frontend"], c["device"]))
        if c["status"] != "ok":
            c["speedup_vs_default"], c["speedup_note"] = None, f"cell {c['status']}"
        elif (c["frontend"], c["device"]) not in base:
            c["speedup_vs_default"], c["speedup_note"] = None, "no default cell to compare with"
        else:
            c["speedup_vs_default"], c["speedup_note"] = ratio(default, c.get("timing"), paired)


def collect_warnings(cells: list[dict[str, Any]], spec: WorkloadSpec | None = None) -> list[str]:
    """Warnings a reader must see: a libtorch or thread-count mismatch, rounds that did not repeat the
    record call's losses, AMP cells with float32 GEMMs, declared-unsupported cells that ran, overflows asked
    for where no scaler mode ran."""
    warnings = []
    ran = [c for c in cells if c["record"]]
    versions = {c["frontend"]: c["record"].get("libtorch_version") for c in ran if c["record"].get("libtorch_version")}
    if len(set(versions.values())) > 1:
        listed = ", ".join(f"{f} {v}" for f, v in sorted(versions.items()))
        warnings.append(f"libtorch versions differ ({listed}): bitwise parity is not expected")
    threads = {c["frontend"]: c["record"].get("threads") for c in ran}
    if spec is not None and any(t != spec.threads for t in threads.values()):
        listed = ", ".join(f"{f} {t}" for f, t in sorted(threads.items()))
        warnings.append(f"threads differ from the spec's {spec.threads} ({listed}): timings are not comparable")
    for c in cells:
        timing = c.get("timing") or {}
        if timing.get("differing_rounds"):
            warnings.append(
                f"{c['id']}: {timing['differing_rounds']} of {timing['rounds']} timed rounds gave other losses than "
                "the record call: this build is not deterministic run to run"
            )
    warnings += [f"{c['id']}: {c['gemm_problem']}" for c in cells if c.get("gemm_problem")]
    warnings += [f"{c['id']}: {c['reason']}" for c in cells if c["status"] == "ok" and c["reason"]]
    if spec is not None and spec.overflow_steps and not any(c["mode"] in SCALER_MODES for c in cells):
        warnings.append(f"overflow_steps {list(spec.overflow_steps)} given, but no scaler mode ran: nothing was injected")
    if scripts_root() != REPO_ROOT:
        warnings.append(f"scripts ran from {scripts_root()} (${SCRIPTS_ENV}), not from this checkout")
    return warnings
