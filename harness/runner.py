"""Runs the matrix: fixtures once, the float64 reference once, every cell in its frontend's worker.

A cell never raises: whatever happens (frontend missing, script error, crash, hang, NaN) ends as a
cell with a status and a one-line reason, and the run goes on with the other cells. After the record
calls come the measurements (:mod:`harness.measurements`): timed rounds, matmul peaks, GEMM profiles.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from safetensors.numpy import load_file

from harness.availability import Availability, probe, r_required
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
from harness.records import SCALER_MODES, first_nonfinite, nonfinite_reason, record_problem
from harness.reference import Reference, distance_from_reference, reference_skip_reason, run_reference
from harness.results import RESULT_SCHEMA_VERSION
from harness.spec import WorkloadSpec
from harness.timing import TimingProtocol, ratio, thread_env
from harness.tolerances import DEFAULT_JUDGING, check_judging
from harness.worker import Worker

__all__ = ["DEFAULT_TIMEOUT_S", "MatrixRunner", "SCALER_MODES", "add_speedups", "collect_warnings"]

log = logging.getLogger(__name__)

#: A cell that has not answered in this long is hung: ``recipe`` on 2 CPU cores takes a few minutes
#: per cell, ``tiny`` well under a second.
DEFAULT_TIMEOUT_S = 900.0


class MatrixRunner:
    """Holds the workers and the reference for one spec; reuse it to run cells many times (benchmarks)."""

    def __init__(
        self,
        spec: WorkloadSpec,
        frontends: tuple[str, ...] = ("python", "r"),
        timeout: float = DEFAULT_TIMEOUT_S,
        availability: Availability | None = None,
    ) -> None:
        self._created = time.perf_counter()
        self.spec = spec
        self.frontends = frontends
        self.timeout = timeout
        self.availability = availability or probe()
        self.fixture: FixtureFile = ensure_fixtures(spec)
        self._staging = Path(tempfile.mkdtemp(prefix="amp-parity-weights-"))
        self._workers: dict[str, Worker] = {}
        self._references: dict[bool, Reference] | None = None
        #: Seconds spent computing the float64 reference (part of the matrix's wall time).
        self.reference_seconds = 0.0
        self.reference_reason = reference_skip_reason(spec)

    def __enter__(self) -> MatrixRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers and drop the staged weights."""
        for worker in self._workers.values():
            worker.close()
        self._workers.clear()
        shutil.rmtree(self._staging, ignore_errors=True)

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
        """Run one cell; the outcome's ``status`` says how it ended (it never raises)."""
        outcome: dict[str, Any] = {
            "id": cell.id, "pair": cell.pair, "frontend": cell.frontend, "script": cell.script,
            "mode": cell.mode, "device": cell.device, "status": "ok", "reason": None, "record": None,
            "reference_distance": None, "wall_seconds": None, "memory": None, "timing": None,
            "efficiency": None, "gemm_profile": None, "gemm_problem": None,
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
        bad_step = first_nonfinite(record["losses"])
        if bad_step is not None and cell.mode not in SCALER_MODES:
            outcome |= {"status": "numerical_failure", "reason": nonfinite_reason(record["losses"], cell.frontend)}
        if self.declared_unsupported(cell):
            outcome["reason"] = f"declared unsupported for {cell.frontend}, but it ran: update the Frontend registry"
        reference = self.reference(clip=cell.mode == "autocast_scaler_clip")
        if reference is not None and bad_step is None:
            weights = load_file(record["weights_path"])
            outcome["reference_distance"] = distance_from_reference(record["losses"], weights, reference)
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

    def reference(self, clip: bool) -> Reference | None:
        """The float64 trajectory (with or without clipping), computed once; ``None`` when too costly."""
        if self.reference_reason is not None:
            return None
        if self._references is None:
            started = time.perf_counter()
            arrays = load_fixture_arrays(self.fixture)
            self._references = {c: run_reference(self.spec, arrays, clip=c) for c in (False, True)}
            self.reference_seconds = time.perf_counter() - started
        return self._references[clip]

    def reference_summary(self) -> dict[str, Any]:
        """The reference trajectories for the result file (losses only; weights stay in memory)."""
        if self.reference_reason is not None:
            return {"available": False, "reason": self.reference_reason}
        plain, clipped = self.reference(False), self.reference(True)
        assert plain is not None and clipped is not None
        return {"available": True, "reason": None, "losses": plain.losses.tolist(), "losses_clipped": clipped.losses.tolist()}

    def publish_weights(self, cells: list[dict[str, Any]], weights_dir: Path) -> None:
        """Move the staged final weights beside the result and point each record at its file.

        The files are gathered in a temporary folder beside ``weights_dir`` and renamed into place in
        one step, so an interrupted publish leaves no half-filled folder under the final name.
        """
        weights_dir.parent.mkdir(parents=True, exist_ok=True)
        gathering = Path(tempfile.mkdtemp(dir=weights_dir.parent, prefix=f".{weights_dir.name}."))
        try:
            moved = []
            for cell in cells:
                record = cell.get("record")
                if record and Path(record["weights_path"]).exists():
                    name = Path(record["weights_path"]).name
                    shutil.move(record["weights_path"], gathering / name)
                    moved.append((record, name))
            if weights_dir.exists():
                shutil.rmtree(weights_dir)
            gathering.rename(weights_dir)
        except BaseException:
            shutil.rmtree(gathering, ignore_errors=True)
            raise
        for record, name in moved:
            record["weights_path"] = str(weights_dir / name)


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
    record call's losses, AMP cells with float32 GEMMs, declared-unsupported cells that ran."""
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
    if scripts_root() != REPO_ROOT:
        warnings.append(f"scripts ran from {scripts_root()} (${SCRIPTS_ENV}), not from this checkout")
    return warnings
