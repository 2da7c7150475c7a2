"""The worker pool: one long-lived worker per frontend, and the requests and calls a cell makes to it.

The runner (record calls) and the measurements (timed rounds, matmul peaks, GEMM profiles) both call
cells through one pool, so a cell's request is built in one place and every call has the same timeout.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.contract.models import MODELS
from harness.errors import WorkerError
from harness.files.paths import scripts_root
from harness.files.staging import StagingDir
from harness.model.timing import MALLOC_THRESHOLDS
from harness.run.availability import Availability
from harness.run.frontends import FRONTENDS, Frontend, open_worker
from harness.run.kept_workers import KeptWorkers
from harness.run.prepare import prepare_run_spec
from harness.run.worker import Worker
from harness.workload.features import FEATURES
from harness.workload.fixtures import FixtureFile
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec

__all__ = ["ALLOCATOR_ENV", "DEFAULT_TIMEOUT_S", "TEMPORARY_WEIGHTS_PREFIX", "WORKER_TMP_PREFIX", "WorkerPool", "thread_env", "worker_env"]

#: A cell that has not answered in this long is hung: ``recipe`` on 2 CPU cores takes a few minutes
#: per cell, ``tiny`` well under a second.
DEFAULT_TIMEOUT_S = 900.0
#: The staging folders for final weights that a command drops at its end (``run`` without ``--json``, ``trace``), in the
#: temporary directory (a killed run's are swept by the next); a result claim stages beside its result instead
#: (harness/store/result_claim.py).
TEMPORARY_WEIGHTS_PREFIX = "amp-parity-weights-"
#: The workers' temporary directory ($TMPDIR), one per pool, removed with it (a killed run's is swept by the next).
WORKER_TMP_PREFIX = "amp-parity-tmp-"


class WorkerPool:
    """The workers of one spec, started on first use and stopped by :meth:`close`.

    ``staging``: the folder the scripts write their final weights into (a :class:`harness.store.result_claim.ResultClaim`'s,
    to publish them, or the caller's); the pool never removes it: the result names the files in it.
    ``scaler_lift``: whether R's scaler script may lift R torch's CUDA-only check on CPU (every request says so).
    ``frontends``: the frontends by name (:func:`harness.run.frontends.frontend_for` of each installation).
    ``availability``: the probe's answer, or what waits for it (the runner probes while the workers start).
    ``kept``: where its own workers come from and go back to when it closes (:class:`harness.run.kept_workers.KeptWorkers`:
    started once for many runs), instead of starting and stopping its own; helpers are always its own.

    Each worker is called from one thread at a time (the runner gives each frontend a thread of its own). A frontend may
    also have a *helper*: a second worker of the same installation, started on first use by a thread that runs inside
    :meth:`helping` (the runner's thread of a frontend whose cells are done, taking cells of one with many left). In that
    thread, every call for that frontend goes to the helper; anywhere else, to its own worker.
    """

    def __init__(
        self, spec: WorkloadSpec, fixture: FixtureFile, availability: Availability | Callable[[], Availability],
        timeout: float = DEFAULT_TIMEOUT_S,
        staging: Path | None = None, scaler_lift: bool = True, frontends: dict[str, Frontend] | None = None,
        kept: KeptWorkers | None = None,
    ) -> None:
        self.spec = spec
        self.kept = kept
        #: The scripts this pool's workers run (the root of this process's environment when the pool is made): a kept
        #: worker follows it.
        self.scripts_root = scripts_root()
        #: The frontends by name (default: python and r, this harness's own).
        self.frontends = dict(FRONTENDS) if frontends is None else frontends
        self.scaler_lift = scaler_lift
        self.fixture = fixture
        #: Each model's fixtures beside the spec's (a matrix of several models: :meth:`model_fixture`), by model.
        self.model_fixtures: dict[str, FixtureFile] = {}
        self._availability = availability
        self.timeout = timeout
        if staging is None:
            raise ValueError("WorkerPool needs a staging folder for the final weights (MatrixRunner says which)")
        self.staging = staging
        # What the workers leave in $TMPDIR (torch's torchinductor_<user>, R's Rtmp* of a worker that was killed)
        # goes into a folder of the pool's own, removed when it closes.
        self._worker_tmp = StagingDir(Path(tempfile.gettempdir()), WORKER_TMP_PREFIX)
        self._workers: dict[str, Worker] = {}
        self._helpers: dict[str, Worker] = {}
        #: The frontend whose helper this thread calls (:meth:`helping`), per thread.
        self._helping = threading.local()
        self._closed = False

    @property
    def availability(self) -> Availability:
        """What can run here (the probe's answer; waited for on first use where the probe still runs)."""
        return self._availability() if callable(self._availability) else self._availability

    def close(self) -> None:
        """Stop the workers and drop their temporary folder (the staged weights stay: they are the caller's).

        Every worker is asked to stop before any is waited for, so they exit side by side. Once closed, the pool starts no
        worker again: a thread that outlived its run (Ctrl-C) gets an error, not a new process.
        """
        self._closed = True
        everyone = [*(w for w in self._workers.values() if not self._given_back(w, own=True)), *self._helpers.values()]
        for worker in everyone:
            worker.ask_to_stop()
        for worker in everyone:
            worker.close()
        self._workers.clear()
        self._helpers.clear()
        self._worker_tmp.close()

    def stop(self, frontend: str) -> None:
        """Stop one frontend's worker, if it started (one started before the probe said it cannot run here), or give it back
        to the keeper it was borrowed from."""
        for workers in (self._workers, self._helpers):
            worker = workers.pop(frontend, None)
            if worker is not None and not self._given_back(worker, own=workers is self._workers):
                worker.close()

    def _given_back(self, worker: Worker, own: bool) -> bool:
        """Give ``worker`` back to the keeper it was borrowed from (``kept``; the keeper stops it if it died or cannot
        start) rather than stop it; whether it was borrowed. ``own``: one of the frontends' workers (helpers are never
        borrowed). Stopped here instead, it would stay on the keeper's list of lent workers, under an id a later worker may
        get."""
        if self.kept is None or not own:
            return False
        self.kept.give_back(worker)
        return True

    @contextlib.contextmanager
    def helping(self, frontend: str) -> Iterator[None]:
        """Inside the block, this thread's calls for ``frontend`` go to its helper worker (started on first use)."""
        before = getattr(self._helping, "frontend", None)
        self._helping.frontend = frontend
        try:
            yield
        finally:
            self._helping.frontend = before

    def startup_seconds(self, frontend: str) -> float | None:
        """How long the frontend's own worker took to start (``None`` before it started): what a helper's start will cost."""
        worker = self._workers.get(frontend)
        return None if worker is None else worker.startup_seconds

    def cannot_start(self, frontend: str) -> str | None:
        """Why ``frontend``'s worker is not started again (:class:`harness.errors.WorkerCannotStart`), or ``None``."""
        worker = self._workers.get(frontend)
        return None if worker is None else worker.cannot_start

    def helper_started(self, frontend: str) -> bool:
        """Whether ``frontend``'s helper worker has started (the runner weighs the cost of starting one)."""
        return frontend in self._helpers

    def worker(self, frontend: str) -> Worker:
        """The frontend's long-lived worker (started on first use).

        Raises:
            WorkerError: the pool is closed.
        """
        if self._closed:
            raise WorkerError(f"{frontend} worker: the run is stopping, no worker starts again")
        workers = self._helpers if getattr(self._helping, "frontend", None) == frontend else self._workers
        if frontend not in workers:
            env = worker_env(self.spec.threads)
            if self.kept is not None and workers is self._workers:
                workers[frontend] = self.kept.take(self.frontends[frontend], env, self.timeout, self.scripts_root)
            else:
                workers[frontend] = open_worker(self.frontends[frontend], {**env, "TMPDIR": str(self._worker_tmp.path)},
                                                timeout=self.timeout)
        return workers[frontend]

    def worker_pid(self, frontend: str) -> int | None:
        """The process id of the frontend's worker, ``None`` if none runs (what :mod:`harness.run.machine_load` reads
        around a timed round; it starts no worker)."""
        workers = self._helpers if getattr(self._helping, "frontend", None) == frontend else self._workers
        worker = workers.get(frontend)
        return None if worker is None else worker.pid

    def worker_info(self) -> dict[str, Any]:
        """Start-up seconds (R's start-up and ``library(torch)`` among them) and starts, per worker; a frontend's helper's
        start-up beside them (``helper_startup_seconds``: it started during the run, so no run waited for it before its
        first cell)."""
        info: dict[str, Any] = {name: {"startup_seconds": w.startup_seconds, "starts": w.starts} for name, w in self._workers.items()}
        for name, helper in self._helpers.items():
            info.setdefault(name, {})["helper_startup_seconds"] = helper.startup_seconds
        return info

    def peak_frontend(self) -> str | None:
        """The Python frontend that measures this machine's matmul peaks: this harness's own if it runs, else the first Python."""
        pythons = [name for name, f in self.frontends.items() if f.language == "python"]
        return "python" if "python" in pythons else next(iter(pythons), None)

    def language(self, frontend: str) -> str:
        """``python`` or ``r``: what the frontend's installation runs."""
        return self.frontends[frontend].language

    def unavailable_reason(self, frontend: str) -> str | None:
        """Why ``frontend`` cannot run here, or ``None``."""
        return self.frontends[frontend].unavailable_reason(self.availability)

    def declared_unsupported(self, cell: Cell) -> bool:
        """Whether the frontend is known not to support this cell (it still runs, to notice a change)."""
        return (cell.properties.scaler, cell.device) in self.frontends[cell.frontend].unsupported

    def feature_refused(self, cell: Cell) -> bool:
        """Whether the cell's loop feature declares this frontend's binding unable to do it with the cell's scaler
        (``Feature.unsupported``): its script refuses it in the binding's own words, and the cell is unsupported."""
        row = FEATURES.get(cell.feature)
        return row is not None and row.refuses(self.language(cell.frontend), cell.properties.scaler)

    def model_refused(self, cell: Cell) -> bool:
        """Whether the cell's model declares this frontend's binding unable to train it (``Model.unsupported_in``): its
        script refuses it in the binding's own words, and the cell is unsupported."""
        return self.language(cell.frontend) in MODELS[cell.model].unsupported_in

    def expected_to_run(self, cell: Cell) -> bool:
        """Whether the cell should run: supported, or declared unsupported but run with one check lifted (``scaler_lift``)."""
        lifted = self.scaler_lift and (cell.properties.scaler, cell.device) in self.frontends[cell.frontend].lifted
        return lifted or not self.declared_unsupported(cell)

    def call(self, frontend: str, request: dict[str, Any]) -> Any:
        """Send ``request`` to the frontend's worker and return its answer.

        Raises:
            WorkerError: the script failed (``ScriptError``), the worker crashed or timed out.
        """
        return self.worker(frontend).call(request, timeout=self.timeout)

    def call_cell(self, cell: Cell, save_weights: bool = True) -> dict[str, Any]:
        """Run ``cell`` in its worker and return the raw run record: what a timed round (and a benchmark round) times.

        ``save_weights=False`` runs without writing the final weights: a timed round after the first.

        Raises:
            WorkerError: the script failed (``ScriptError``), the worker crashed or timed out.
        """
        record: dict[str, Any] = self.call(cell.frontend, self.cell_request(cell, save_weights))
        return record

    def cell_request(self, cell: Cell, save_weights: bool = True, switches: tuple[str, ...] = (), weights_name: str | None = None,
                     **extra: Any) -> dict[str, Any]:
        """The request a worker answers for ``cell`` (``switches``: the reconciliation switches its script applies;
        ``weights_name``: the final weights' file in staging, default the cell's; ``extra`` adds fields, e.g. another ``kind``)."""
        weights_out = self.staging / (weights_name or f"{cell.id}.safetensors") if save_weights else None
        spec = self.spec.for_model(cell.model)
        return {
            "script": cell.script, "mode": cell.mode, "spec_summary": spec.summary(),
            "run_spec": prepare_run_spec(spec, cell.script, cell.optimizer, weights_out, self.model_fixture(cell.model),
                                         save_weights=save_weights,
                                         scaler_lift=self.scaler_lift, switches=switches, feature=cell.feature),
            **extra,
        }

    def model_fixture(self, model: str) -> FixtureFile:
        """``model``'s fixture file: the spec's, or the one the runner built for another model of its matrix.

        Raises:
            KeyError: a model whose fixtures were not built (the runner builds each model's before its cells run).
        """
        return self.fixture if model == self.spec.model else self.model_fixtures[model]

    def last_memory(self, frontend: str) -> dict[str, Any]:
        """What the frontend's worker measured of its memory during its last call (empty before any)."""
        return dict(self.worker(frontend).last_memory or {})


def thread_env(threads: int) -> dict[str, str]:
    """Environment for a worker, so both libtorch builds size their thread pools alike from the start."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


#: cuBLAS's workspace setting that PyTorch's deterministic algorithms ask for on CUDA 10.2 and later (without it a cuBLAS
#: call warns, or raises, under ``torch.use_deterministic_algorithms``: PyTorch's reproducibility notes), set in every
#: worker's environment before libtorch starts, since cuBLAS reads it when it creates its handle. Python's scripts turn
#: the deterministic algorithms on for CUDA cells (``set_determinism`` in py_scripts/loop.py); on the CPU it is unread.
DETERMINISM_ENV = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}


#: The environment that fixes them (:data:`harness.model.timing.MALLOC_THRESHOLDS`, where the reason is).
ALLOCATOR_ENV = {name: str(value) for name, value in MALLOC_THRESHOLDS.items()}


def worker_env(threads: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a worker's environment adds to ``environ`` (default this process's): :func:`thread_env`, unless the user set
    their own, :data:`DETERMINISM_ENV` and, unless the user tuned glibc's allocator there, :data:`ALLOCATOR_ENV`."""
    environ = os.environ if environ is None else environ
    tuned = any(k in environ for k in ALLOCATOR_ENV) or "glibc.malloc." in environ.get("GLIBC_TUNABLES", "")
    cublas = {} if "CUBLAS_WORKSPACE_CONFIG" in environ else DETERMINISM_ENV
    return {**thread_env(threads), **cublas, **({} if tuned else ALLOCATOR_ENV)}
