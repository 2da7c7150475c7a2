"""Runs the matrix: fixtures once, the float64 reference once, every cell in its frontend's worker.

A cell never raises: whatever happens (frontend missing, script error, crash, hang, NaN) ends as a
cell with a status and a one-line reason, and the run goes on with the other cells.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from safetensors.numpy import load_file

from harness.availability import Availability, probe, r_required
from harness.compare import compare_result
from harness.errors import ScriptError, WorkerError
from harness.fixtures import FixtureFile, ensure_fixtures, load_fixture_arrays
from harness.frontends.registry import FRONTENDS, open_worker
from harness.matrix import Cell, cells_for
from harness.prepare import prepare_run_spec
from harness.reference import Reference, distance_from_reference, reference_skip_reason, run_reference
from harness.results import RESULT_SCHEMA_VERSION
from harness.spec import SCRIPTS, WorkloadSpec
from harness.worker import Worker

__all__ = ["DEFAULT_TIMEOUT_S", "MatrixRunner", "SCALER_MODES", "add_speedups", "collect_warnings"]

log = logging.getLogger(__name__)

#: A cell that has not answered in this long is hung: ``recipe`` on 2 CPU cores takes a few minutes
#: per cell, ``tiny`` well under a second.
DEFAULT_TIMEOUT_S = 900.0
SCALER_MODES = frozenset(SCRIPTS["cuda_amp_grad_scaler"])


class MatrixRunner:
    """Holds the workers and the reference for one spec; reuse it to run cells many times (benchmarks)."""

    def __init__(
        self,
        spec: WorkloadSpec,
        frontends: tuple[str, ...] = ("python", "r"),
        timeout: float = DEFAULT_TIMEOUT_S,
        availability: Availability | None = None,
    ) -> None:
        self.spec = spec
        self.frontends = frontends
        self.timeout = timeout
        self.availability = availability or probe()
        self.fixture: FixtureFile = ensure_fixtures(spec)
        self._staging = Path(tempfile.mkdtemp(prefix="amp-parity-weights-"))
        self._workers: dict[str, Worker] = {}
        self._references: dict[bool, Reference] | None = None
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
            self._workers[frontend] = open_worker(frontend)
        return self._workers[frontend]

    def unavailable_reason(self, frontend: str) -> str | None:
        """Why ``frontend`` cannot run here, or ``None``."""
        return FRONTENDS[frontend].unavailable_reason(self.availability)

    def run(self, modes: tuple[str, ...], on_cell: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Run every cell of the matrix and return the whole (unsaved) result."""
        started = time.time()
        cells = []
        for cell in cells_for(self.frontends, modes, self.spec.device):
            outcome = self.run_cell(cell)
            cells.append(outcome)
            if on_cell is not None:
                on_cell(outcome)
        add_speedups(cells)
        result = {
            "schema_version": RESULT_SCHEMA_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
            "wall_seconds": time.time() - started,
            "spec": self.spec.to_dict(),
            "spec_digest": self.spec.digest(),
            "fixture": {"path": str(self.fixture.path), "sha256": self.fixture.sha256, "digest": self.fixture.digest},
            "environment": self.availability.to_dict(),
            "reference": self.reference_summary(),
            "warnings": collect_warnings(cells),
            "cells": cells,
        }
        result["pairs"] = [verdict.to_dict() for verdict in compare_result(result)]
        return result

    def run_cell(self, cell: Cell) -> dict[str, Any]:
        """Run one cell; the outcome's ``status`` says how it ended (it never raises)."""
        outcome: dict[str, Any] = {
            "id": cell.id, "pair": cell.pair, "frontend": cell.frontend, "script": cell.script,
            "mode": cell.mode, "device": cell.device, "status": "ok", "reason": None, "record": None,
            "reference_distance": None, "wall_seconds": None, "worker_peak_rss_bytes": None,
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
        outcome |= {"record": record, "wall_seconds": time.perf_counter() - start, "worker_peak_rss_bytes": worker.peak_rss_bytes}
        problem = _record_problem(record, self.spec, cell)
        if problem is not None:
            return outcome | {"status": "error", "reason": problem}
        bad_step = _first_nonfinite(record["losses"])
        if bad_step is not None and cell.mode not in SCALER_MODES:
            outcome |= {"status": "numerical_failure", "reason": f"loss is {record['losses'][bad_step]} at step {bad_step}"}
        if self.declared_unsupported(cell):
            outcome["reason"] = f"declared unsupported for {cell.frontend}, but it ran: update the Frontend registry"
        reference = self.reference(clip=cell.mode == "autocast_scaler_clip")
        if reference is not None and bad_step is None:
            weights = load_file(record["weights_path"])
            outcome["reference_distance"] = distance_from_reference(record["losses"], weights, reference)
        return outcome

    def call_cell(self, cell: Cell) -> dict[str, Any]:
        """Run ``cell`` in its worker and return the raw run record: what a benchmark round times.

        Raises:
            WorkerError: the script failed (``ScriptError``), the worker crashed or timed out.
        """
        request = {
            "script": cell.script, "mode": cell.mode, "spec_summary": self.spec.summary(),
            "run_spec": prepare_run_spec(self.spec, self._staging / f"{cell.id}.safetensors", self.fixture),
        }
        record: dict[str, Any] = self.worker(cell.frontend).call(request, timeout=self.timeout)
        return record

    def declared_unsupported(self, cell: Cell) -> bool:
        """Whether the frontend is known not to support this cell (it still runs, to notice a change)."""
        return (cell.script, cell.device) in FRONTENDS[cell.frontend].unsupported

    def reference(self, clip: bool) -> Reference | None:
        """The float64 trajectory (with or without clipping), computed once; ``None`` when too costly."""
        if self.reference_reason is not None:
            return None
        if self._references is None:
            arrays = load_fixture_arrays(self.fixture)
            self._references = {c: run_reference(self.spec, arrays, clip=c) for c in (False, True)}
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


def add_speedups(cells: list[dict[str, Any]]) -> None:
    """``speedup_vs_default`` = the frontend's ``default`` seconds ÷ this cell's (loop time in the script)."""
    base = {
        (c["frontend"], c["device"]): c["record"]["seconds_total"]
        for c in cells if c["mode"] == "default" and c["status"] == "ok"
    }
    for c in cells:
        ref = base.get((c["frontend"], c["device"]))
        seconds = c["record"]["seconds_total"] if c["record"] else None
        c["speedup_vs_default"] = ref / seconds if ref and seconds else None


def collect_warnings(cells: list[dict[str, Any]]) -> list[str]:
    """Warnings a reader must see: a libtorch mismatch between frontends, declared-unsupported cells that ran."""
    warnings = []
    versions = {
        c["frontend"]: c["record"].get("libtorch_version")
        for c in cells if c["record"] and c["record"].get("libtorch_version")
    }
    if len(set(versions.values())) > 1:
        listed = ", ".join(f"{f} {v}" for f, v in sorted(versions.items()))
        warnings.append(f"libtorch versions differ ({listed}): bitwise parity is not expected")
    warnings += [f"{c['id']}: {c['reason']}" for c in cells if c["status"] == "ok" and c["reason"]]
    return warnings


def _record_problem(record: Any, spec: WorkloadSpec, cell: Cell) -> str | None:
    if not isinstance(record, dict) or record.get("schema_version") != 1:
        return f"the {cell.frontend} script returned something that is not a version-1 run record"
    losses = record.get("losses")
    if not isinstance(losses, list) or len(losses) != spec.steps:
        got = len(losses) if isinstance(losses, list) else type(losses).__name__
        return f"the {cell.frontend} script returned {got} losses, expected {spec.steps} (one per step)"
    return None


def _first_nonfinite(losses: list[Any]) -> int | None:
    for step, value in enumerate(losses):
        if value is None or not math.isfinite(float(value)):
            return step
    return None

