"""Runs the matrix: fixtures once, the float64 reference once, every cell in its frontend's worker.

Orchestration only: the workers and calls are the pool's (:mod:`harness.run.pool`), the record check is
:func:`harness.judge.record_check.judge_record`, the timed rounds, peaks and profiles are
:mod:`harness.run.measure`', a pair's trace is :func:`harness.run.tracer.trace_pair`'s, and what comes out is
a :class:`harness.model.result.MatrixResult`. A cell never
raises: whatever happens (frontend missing, script error, crash, hang, NaN) ends as a cell with a
status and a one-line reason, and the run goes on with the other cells.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from safetensors import SafetensorError

from harness.contract.optimizers import DEFAULT_OPTIMIZER
from harness.errors import ScriptError, UsageError, WorkerError
from harness.files.paths import REPO_ROOT, SCRIPTS_ENV, scripts_root
from harness.judge.assess import assess_result
from harness.judge.cells import judge_cell
from harness.judge.divergence import TRIGGER_POINTS, read_cell_trace
from harness.judge.kept_weights import keep_weights
from harness.judge.known_differences import KnownDifference, load_known_differences
from harness.judge.models import start_reference
from harness.judge.pairs import compare_result, needs_detail, reconciled_records_differ, reconciliation_needed
from harness.judge.record_check import judge_record
from harness.judge.reference import Reference, measure_distance, reference_skip_reason, run_reference, zero_grad_default_zeroes
from harness.judge.resumed import check_resumed
from harness.judge.tolerances import DEFAULT_JUDGING, check_judging
from harness.judge.weight_findings import load_weights, tensor_digests
from harness.model.cell_efficiency import cell_efficiency
from harness.model.cell_trace import DIGESTS, TRACE_SUFFIX, CellTrace, TraceFile
from harness.model.efficiency import gemm_dtype
from harness.model.pair_trace import PairTrace
from harness.model.phases import PhaseClock
from harness.model.progress import RunProgress, as_progress
from harness.model.record import RunRecord
from harness.model.record_points import RECORD_PREFIX, with_record_points
from harness.model.result import CellResult, MatrixResult, Memory, Peaks, ReferenceSummary, Status, with_time_vs_default
from harness.model.timing import TimingProtocol
from harness.model.verdicts import PairVerdict
from harness.model.weights import TensorDigest
from harness.run.availability import Availability, probe, probe_host, r_required
from harness.run.frontends import check_described, frontend_for
from harness.run.kept_workers import KeptWorkers
from harness.run.lanes import run_in_lanes
from harness.run.measure import measure_peaks, profile_cells, time_cells, timed_cells
from harness.run.pool import DEFAULT_TIMEOUT_S, WorkerPool
from harness.run.provenance import describe_provenance
from harness.run.tracer import SecondPass, measure_first_differences
from harness.workload.features import NO_FEATURE
from harness.workload.fixtures import FixtureFile, ensure_fixtures, load_fixture_arrays
from harness.workload.installations import DEFAULT_INSTALLATIONS, Installation
from harness.workload.matrix import Cell, cells_for
from harness.workload.optimizers import OPTIMIZERS, PRESET_OPTIMIZERS
from harness.workload.patches import switch_names
from harness.workload.refusals import refusal
from harness.workload.spec import WorkloadSpec, default_overflow_steps

__all__ = ["MatrixRunner", "collect_warnings"]

log = logging.getLogger(__name__)


class MatrixRunner:
    """Holds the worker pool and the reference for one spec; reuse it to run cells many times (benchmarks)."""

    def __init__(
        self,
        spec: WorkloadSpec,
        frontends: Sequence[str | Installation] = ("python", "r"),
        timeout: float = DEFAULT_TIMEOUT_S,
        availability: Availability | None = None,
        staging: Path | None = None,
        scaler_lift: bool = True,
        trace: bool = True,
        known: tuple[KnownDifference, ...] | None = None,
        baseline: str | None = None,
        fixture_cache: Path | None = None,
        kept: KeptWorkers | None = None,
    ) -> None:
        """``staging``: the folder the scripts write their final weights into (see :class:`harness.run.pool.WorkerPool`), which
        must outlive the runner, since the result names the files in it: a :class:`harness.store.result_claim.ResultClaim`'s
        staging, to publish them with the result, or a folder of the caller's. There is no default: a folder the runner
        removed when it closed would leave the result naming weights that are gone.

        ``scaler_lift``: R's scaler script may lift R torch's CUDA-only check on CPU (``--no-scaler-lift`` turns it
        off). ``trace``: trace the pairs that need it (:func:`harness.judge.pairs.needs_trace`). ``known``: the known
        differences the pairs are judged against (default: the committed list).

        ``frontends``: installations (:mod:`harness.workload.installations`), or the names ``python`` and ``r`` (this
        harness's own). ``baseline``: the frontend every other is paired with (default: the first). ``fixture_cache``: where
        the fixtures go (default: the harness's fixture cache). ``kept``: workers kept across runners, which this one borrows
        instead of starting its own (:class:`harness.run.kept_workers.KeptWorkers`: the test suite's planted copies).

        Raises:
            UsageError: no ``staging`` folder, or a baseline that is not one of the frontends.
        """
        if staging is None:
            raise UsageError("MatrixRunner staging", None, "a folder that outlives the runner, where the final weights go (a "
                             "ResultClaim's staging, to publish them with the result, or a folder of yours)")
        self._created = time.perf_counter()
        #: Where this run's time goes (harness.model.phases): the probe and fixtures here, the rest in :meth:`run`.
        self._clock = PhaseClock()
        self.spec = spec
        self.installations = tuple(DEFAULT_INSTALLATIONS[f] if isinstance(f, str) else f for f in frontends)
        self.frontends = tuple(i.name for i in self.installations)
        self.baseline = baseline or self.frontends[0]
        if self.baseline not in self.frontends:
            raise UsageError("--baseline", self.baseline, f"one of the frontends ({', '.join(self.frontends)})")
        #: What each installation's worker reported (:meth:`describe_installations`), by name.
        self.facts: dict[str, dict[str, Any]] = {}
        #: What can run here. Without one given, R's side is not probed before the run (an Rscript loading R torch: 2 s here):
        #: the R worker answers the probe's questions when it starts, or :func:`probe` where it cannot (describe_installations).
        self.availability = availability or probe_host()
        #: Seconds from each worker's start to its first answer (its start-up and the describe call: R's library(torch)).
        self.ready_seconds: dict[str, float] = {}
        self.trace = trace
        self.known = load_known_differences() if known is None else known
        self._fixture_cache = fixture_cache
        with self._clock.phase("fixtures"):
            self.fixture: FixtureFile = ensure_fixtures(spec, fixture_cache)
        self.pool = WorkerPool(spec, self.fixture, lambda: self.availability, timeout, staging, scaler_lift,
                               {i.name: frontend_for(i) for i in self.installations}, kept=kept)
        #: Each model's fixture tensors, loaded for its float64 reference on first use.
        self._arrays: dict[str, dict[str, Any]] = {}
        #: The float64 references by (model, optimizer, clip, skipped steps, feature).
        self._references: dict[tuple[str, str, bool, frozenset[int], str, bool], Reference] = {}
        #: Seconds spent computing the float64 reference (part of the matrix's wall time).
        self.reference_seconds = 0.0
        self.reference_reason = reference_skip_reason(spec)
        #: Cells whose reconciled run failed or did not apply its switches: why (a warning of the result).
        self.reconcile_problems: dict[str, str] = {}
        #: Cells whose trace was too long to keep (:meth:`harness.model.cell_trace.CellTrace.too_long`): why (a warning).
        self.trace_problems: dict[str, str] = {}
        #: The plain traces of the baseline's cells that ended ok, by cell id, as their record calls end (written by the
        #: lanes' threads, one key each): what another frontend's record call is compared with as it runs (_compared_with).
        self._baseline_traces: dict[str, TraceFile] = {}
        #: Each default installation whose worker could not describe itself at the start: the run goes on (its worker is
        #: started again for its cells), but its build and CPU facts are missing, and the result's warnings say why.
        self.start_problems: dict[str, str] = {}
        #: The optimizers the last run ran (their float64 trajectories go into its result).
        self._optimizers: tuple[str, ...] = PRESET_OPTIMIZERS.get(spec.preset, (DEFAULT_OPTIMIZER,))
        #: The loop features the last run ran (harness/workload/features.py; ``none``: the plain loop).
        self._features: tuple[str, ...] = (NO_FEATURE,)
        #: The models the last run trained (the spec's, and those beside it: harness/workload/model_designs.py).
        self._models: tuple[str, ...] = (spec.model,)

    def use_spec(self, spec: WorkloadSpec) -> None:
        """Run the next cells with ``spec``, in the workers already started (``harness search``: an example a spec, each a
        fraction of a second, where a worker's start takes seconds). A worker holds nothing of a spec between calls: each
        request carries its run spec and fixture file. The threads are the workers' own, fixed when they started.

        Raises:
            UsageError: ``spec`` asks for another thread count or device than the workers run.
        """
        if (spec.threads, spec.device) != (self.spec.threads, self.spec.device):
            raise UsageError("spec", spec.summary(), f"the runner's threads ({self.spec.threads}) and device ({self.spec.device})")
        self.spec = self.pool.spec = spec
        self.fixture = self.pool.fixture = ensure_fixtures(spec, self._fixture_cache)
        self.pool.model_fixtures = {}
        self._arrays, self._references, self._baseline_traces = {}, {}, {}
        self.reference_reason = reference_skip_reason(spec)
        self.reconcile_problems = {}

    def __enter__(self) -> MatrixRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (the final weights stay in the staging folder: the result names them)."""
        self.pool.close()

    def run(
        self,
        modes: tuple[str, ...],
        optimizers: tuple[str, ...] | None = None,
        on_progress: RunProgress | Callable[[str], None] | None = None,
        protocol: TimingProtocol | None = None,
        profile: bool | None = None,
        judging: str = DEFAULT_JUDGING,
        measure: bool = True,
        features: tuple[str, ...] | None = None,
        only_cells: Sequence[Cell] | None = None,
        models: tuple[str, ...] | None = None,
    ) -> MatrixResult:
        """Run every cell of the matrix (``modes`` × ``optimizers``, default the preset's optimizers, and each of
        ``features`` where its covering design runs it, default the plain loop alone: the CLI passes the preset's,
        :data:`harness.workload.features.PRESET_FEATURES`), then time and measure them; return the whole (unsaved) result.

        ``profile`` (default: on CUDA only) profiles one step of each Python cell's GEMMs. ``judging``
        (``strict`` or ``tolerance_only``, see :mod:`harness.judge.tolerances`) is how pairs are judged; the
        result keeps it, so ``report`` judges the result the same way. ``measure=False`` runs the record
        calls only (no timed rounds, peaks or profiles: ``harness trace``). ``on_progress``: what the run says as it goes
        (:class:`harness.model.progress.RunProgress`: each phase as it begins and ends, each cell or round done), or a
        function of one string (each cell or round done). ``only_cells``: these cells instead of the matrix's (``harness
        search``: one pair wherever it drew it, a feature's covering design or not). ``models``: the models trained
        (default the spec's alone, its whole matrix); several: the MLP's whole matrix and each other model's covering
        design (:mod:`harness.workload.model_designs`), each model from its own fixtures, built here once.
        """
        check_judging(judging)
        self.reconcile_problems.clear()  # what a run of this runner warns of is its own (a session's runner runs many)
        self.trace_problems.clear()
        protocol = protocol or TimingProtocol.for_preset(self.spec.preset)
        progress = as_progress(on_progress)
        clock = self._clock
        started = time.time()

        @contextlib.contextmanager
        def phase(name: str, total: int = 0) -> Iterator[None]:
            """``clock``'s phase ``name``, its beginning and end reported (``total``: its units, 0 where not counted)."""
            progress.begin(name, total)
            began = time.perf_counter()
            with clock.phase(name):
                yield
            progress.end(name, time.perf_counter() - began)

        with clock.phase("provenance"):
            provenance = describe_provenance()  # the files as they are when the cells start
        with phase("worker starts"):
            if self.reference_reason is None:  # a model reference's worker imports torch beside the frontends' workers
                for model in models or (self.spec.model,):
                    start_reference(model)
            self.describe_installations(progress)
        optimizers = optimizers or PRESET_OPTIMIZERS.get(self.spec.preset, (DEFAULT_OPTIMIZER,))
        self._optimizers = optimizers
        features = features or (NO_FEATURE,)
        self._features = features
        models = models or (self.spec.model,)
        matrix = (list(only_cells) if only_cells is not None
                  else cells_for(self.frontends, modes, optimizers, self.spec.device, features, models))
        self._models = tuple(dict.fromkeys(c.model for c in matrix)) or (self.spec.model,)
        if len(self._models) > 1:  # the spec's model by its design (the MLP's: every optimizer): its references, no more
            self._optimizers = tuple(dict.fromkeys(c.optimizer for c in matrix if c.model == self.spec.model))
        with clock.phase("fixtures"):  # each other model's, once (the spec's were built with the runner)
            self.model_fixtures(self._models)
        # Each frontend's cells in its own worker, the workers side by side (one thread each; the spec's threads per worker):
        # a record call's numbers do not depend on what the other worker does, and its time is not what is timed.
        with phase("record calls", len(matrix)):
            cells = self._per_frontend(matrix, self._called, progress)
        if self.trace:
            # Only where a pair parts (or a side is missing or failed): an identical pair's verdict never reads them.
            needed = reconciliation_needed(cells, self.baseline, self.frontends)
            chosen = [c for c in cells if c.id in needed]
            with phase("reconciled runs", len(chosen)):
                # Untraced first: a run's records (losses, scales, skipped steps, dtypes, final weights) are what a proof
                # compares; only the runs whose records still part from their partner's are traced, to say where.
                reconciled = {c.id: c for c in self._per_frontend(chosen, self._with_untraced_reconciled, progress)}
                cells = [reconciled.get(c.id, c) for c in cells]
                again = reconciled_records_differ(cells, self.baseline, self.frontends)
                retraced = {c.id: c for c in self._per_frontend([c for c in cells if c.id in again], self._with_reconciled, progress)}
            cells = [retraced.get(c.id, c) for c in cells]
        cells = check_resumed(cells)  # a resumed cell is bitwise its uninterrupted cell, where that ran too
        with phase("reference"):  # judged once, with the rest, by assess_result at the end
            cells = [self._with_distance(c) for c in cells]
            reference = self.reference_summary()  # every optimizer's, plain and clipped: the result keeps their losses
        if measure:
            ok = len(timed_cells(cells, protocol))
            # one at a time where a ratio rests on them (a timed round has the machine to itself), else side by side: only
            # the cells without an untraced run already (their untraced reconciled run gave their own time)
            with phase("timed rounds", ok if protocol.side_by_side else ok * (protocol.warmup_rounds - 1 + protocol.rounds)):
                cells = time_cells(self.pool, cells, protocol, progress, self.facts)
            with phase("peaks", len({gemm_dtype(c.cell.properties, self.spec) for c in cells if c.status is Status.OK})):
                peaks = measure_peaks(self.pool, cells, progress)
            if self.spec.device == "cuda" if profile is None else profile:
                with phase("profile", sum(c.status is Status.OK for c in cells)):
                    cells = profile_cells(self.pool, cells, progress)
            cells = [dataclasses.replace(c, efficiency=cell_efficiency(c, self.spec.for_model(c.cell.model), peaks)) for c in cells]
            cells = with_time_vs_default(cells, paired=protocol.interleave, side_by_side=protocol.side_by_side)
        else:
            peaks = Peaks(self.spec.device, self.spec.threads, {}, "not measured: the record calls only (harness trace)")
        result = MatrixResult(
            created=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
            wall_seconds=time.perf_counter() - self._created, spec=self.spec, spec_digest=self.spec.digest(),
            fixture={"path": str(self.fixture.path), "sha256": self.fixture.sha256, "digest": self.fixture.digest},
            environment=self.availability.to_json(), protocol=protocol, workers=self.worker_info(), peaks=peaks,
            reference=reference, reference_seconds=self.reference_seconds,
            warnings=tuple([*collect_warnings(cells, self.spec),
                            *(f"{cell_id}: no reconciled run: {why}" for cell_id, why in self.reconcile_problems.items()),
                            *(f"{cell_id}: its trace was not kept: {why}; its pairs are judged untraced (trace fewer steps "
                              "to see where they part: docs/tracing.md)" for cell_id, why in self.trace_problems.items()),
                            *(self._start_warning(name, why) for name, why in self.start_problems.items())]),
            cells=tuple(cells), judging=judging,
            frontends=self.frontends, baseline=self.baseline, provenance=provenance,
        )
        if self.trace:
            # Every pair is traced from its cells' stored traces; where two tensors first part, both cells run once more
            # to measure how far apart they are (for the explanation: the verdict is the same without it).
            with phase("judging"):
                pairs = compare_result(result, known=self.known)
            # both sides of each pair whose traces part at two tensors, run again to measure them
            with phase("trace measurements", 2 * sum(needs_detail(p) is not None for p in pairs if p.details.get("trace"))):
                result = dataclasses.replace(result, traces=self.measure_pairs(result, pairs, progress))
        with phase("judging"):
            # The targets read the wall time and phases so far (the matrix target names the longest phases where it is missed).
            result = dataclasses.replace(result, wall_seconds=time.perf_counter() - self._created, phases=clock.phases())
            result = assess_result(keep_weights(result), known=self.known)  # kept while the weights files are there
        # The matrix's wall time includes its traces and judging: the whole-matrix target is what a user waits for. A next
        # run of this runner (a benchmark's) starts its own clock: its workers are started already.
        result = dataclasses.replace(result, wall_seconds=time.perf_counter() - self._created, phases=clock.phases())
        self._clock, self._created = PhaseClock(), time.perf_counter()
        return result

    def model_fixtures(self, models: Sequence[str]) -> None:
        """Build (or find in the cache) the fixtures of each of ``models`` other than the spec's, once per runner."""
        for model in models:
            if model != self.spec.model and model not in self.pool.model_fixtures:
                self.pool.model_fixtures[model] = ensure_fixtures(self.spec.for_model(model), self._fixture_cache)

    def worker_info(self) -> dict[str, Any]:
        """Each worker's start-ups (:meth:`harness.run.pool.WorkerPool.worker_info`) and how long it took to answer first."""
        info = self.pool.worker_info()
        for name, seconds in self.ready_seconds.items():
            info.setdefault(name, {})["ready_seconds"] = seconds
        return info

    def _per_frontend(self, cells: Sequence[Any], call: Callable[[Any], CellResult],
                      progress: Callable[[str], None]) -> list[CellResult]:
        """``call`` of each cell, each frontend's cells in order in a lane of their own, an idle lane helping the frontend
        with the most work left (:func:`harness.run.lanes.run_in_lanes`); the results in the cells' order."""
        return run_in_lanes(self.pool, cells, call, lambda outcome: progress(f"{outcome.id}: {outcome.status}"), self.facts)

    def measure_pairs(
        self, result: MatrixResult, verdicts: Sequence[PairVerdict], on_progress: Callable[[str], None] | None = None
    ) -> tuple[PairTrace, ...]:
        """Every traced pair's trace, kept in the result (a lean result, whose trace files are gone, is judged from them),
        with the first difference of each pair whose traces part at two tensors measured by a second pass in the workers
        that ran its cells, both sides of every such pair in the lanes (:func:`harness.run.tracer.measure_first_differences`;
        ``on_progress`` hears of each side as it ends)."""
        progress = on_progress or (lambda text: None)
        traced = [v for v in verdicts if v.details.get("trace")]
        traces = [PairTrace.from_json(v.details["trace"]) for v in traced]
        measured = [i for i, v in enumerate(traced) if needs_detail(v) is not None]
        pairs = []
        for i in measured:
            v = traced[i]
            a, b = (result.cell(Cell(name, v.script, v.mode, v.optimizer, v.device, v.feature, v.model).id) for name in v.frontends)
            pairs.append((a, b, traces[i]))
        def said(side: SecondPass) -> None:
            progress(f"trace {side.cell.id}: again to step {side.point[0]}, {side.point[1]}")

        for i, trace in zip(measured, measure_first_differences(self.pool, pairs, said, self.facts), strict=True):
            traces[i] = trace
        return tuple(traces)

    def describe_installations(self, on_progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
        """Start every installation's worker and ask what it runs (libtorch version and build, CPU): once, before any cell.

        An installation the user named (another interpreter, R library or activation script) that cannot start is
        refused here, in one line, before the first cell runs; this harness's own ``python`` and ``r`` keep the
        availability probe's skip (or, under ``AMP_PARITY_REQUIRE_R=1``, error) instead.

        Raises:
            UsageError: a named installation's worker cannot start or describe itself (what it said, and the fix).
        """
        progress = on_progress or (lambda text: None)
        # Unasked: one described, or one that cannot run here (its cells say why).
        waiting = [i for i in self.installations if i.name not in self.facts and self.pool.unavailable_reason(i.name) is None]
        if not waiting:
            return self.facts
        progress("starting " + ", ".join(f"{i.name} ({i.where()})" for i in waiting))
        # Every worker starts at once: Python's import torch while R loads R torch.
        answers: dict[str, Future[dict[str, Any]]] = {}
        executor = ThreadPoolExecutor(len(waiting), thread_name_prefix="amp-parity-start")
        try:
            answers = {i.name: executor.submit(self._describe, i.name) for i in waiting}
            for installation in waiting:
                name = installation.name
                try:
                    described = self._probed_by(installation, answers[name].result())
                except WorkerError as err:
                    if self._probed_by(installation, None) is None:
                        continue  # the probe says why it cannot run here: its cells are skipped with that reason
                    if installation.is_default:
                        self.facts[name] = {}  # nothing reported; its cells end in error with this reason, and the run goes on
                        # ... or its worker starts again for them: either way the result says its facts are missing, and why.
                        self.start_problems[name] = f"{name} worker: {' '.join(str(err).split())}"
                        continue
                    fix = ("pip install torch numpy safetensors blake3 in it" if installation.language == "python"
                           else "check that its R library holds the torch package and its libtorch")
                    raise UsageError(f"installation {name}", installation.where(),
                                     f"one that starts a worker ({' '.join(str(err).split())}); {fix}") from err
                if described is None:
                    continue  # it started, but the probe says it cannot run here: its cells are skipped with that reason
                self.facts[name] = described
                check_described(installation, self.pool.worker(name).env, described)  # the R torch it names, not another
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
        for installation in waiting:
            if installation.name not in self.facts:
                self.pool.stop(installation.name)
        return self.facts

    def _start_warning(self, name: str, why: str) -> str:
        """What the result says of a default installation whose worker did not describe itself at the start."""
        if self.pool.cannot_start(name) is not None:
            return (f"{name}: its worker could not start, twice with the same error, so it was not started again and each of its "
                    f"cells failed at once with that error ({why})")
        return (f"{name}: its worker did not describe itself at the start, so the result lacks its build and CPU facts; its cells "
                f"ran in a worker started again ({why})")

    def _probed_by(self, installation: Installation, facts: dict[str, Any] | None) -> dict[str, Any] | None:
        """The installation's facts (``facts``: its worker's describe answer; ``None``: it could not start), without the probe's
        part, which completes an availability whose R side was not probed (this harness's own R worker is the R a probe
        would start).

        Where that worker could not start, or said nothing of R, R is probed as before (:func:`probe`, an Rscript), so its
        cells say why in the probe's words (R torch not installed, libtorch fails to load) rather than the worker's. Returns
        ``None`` where it then cannot run here (the reason is the probe's); ``{}`` for a worker that could not start.
        """
        answer = dict(facts or {})
        r_probe = answer.pop("r_probe", None)
        if not installation.is_default or installation.language != "r" or self.availability.r_probed:
            return answer
        if isinstance(r_probe, dict):
            self.availability = dataclasses.replace(self.availability, r=r_probe, r_probed=True)
            return answer
        with self._clock.phase("probe"):
            self.availability = probe()
        return None if self.pool.unavailable_reason(installation.name) is not None else answer

    def _describe(self, name: str) -> dict[str, Any]:
        """Start ``name``'s worker and ask what it runs (in a thread of its own: the workers start side by side)."""
        started = time.perf_counter()
        facts: dict[str, Any] = self.pool.call(name, {"kind": "describe", "device": self.spec.device, "threads": self.spec.threads})
        self.ready_seconds[name] = time.perf_counter() - started
        return facts

    def run_cell(self, cell: Cell) -> CellResult:
        """Run one cell (the record call); its ``status`` says how it ended (it never raises), its ``verdict``
        how it stands on its own (:mod:`harness.judge.cells`)."""
        self.model_fixtures((cell.model,))
        outcome = self._with_distance(self._with_reconciled(self._called(cell)))
        spec = self.spec.for_model(cell.model)
        # Judged against its own trajectory only (computed above): a runner that runs cells one by one does not compute
        # every row's, plain and clipped (34 at ``tiny``, 15-20 s of a core, which every test's runner paid).
        reference = self.reference_summary(every_optimizer=False).of_model(cell.model, self.spec.model)
        return dataclasses.replace(outcome, verdict=judge_cell(outcome, spec, reference))

    def _called(self, cell: Cell) -> CellResult:
        """The record call, with the facts of the installation that ran it."""
        self.describe_installations()  # once per installation: its facts go with each of its cells
        outcome = self._record_call(cell)
        installation = {**self.pool.frontends[cell.frontend].installation_json(), **self.facts.get(cell.frontend, {})}
        return dataclasses.replace(outcome, installation=installation)

    def _with_reconciled(self, outcome: CellResult, traced: bool = True) -> CellResult:
        """The cell with its reconciled run, where tracing is on and the cell ran (or failed: a switch may be what makes it run)."""
        if not self.trace or outcome.status not in (Status.OK, Status.ERROR):
            return outcome
        self.reconcile_problems.pop(outcome.id, None)  # a run traced again says its own
        reconciled, seconds = self._reconciled_call(outcome.cell, traced)
        if traced or seconds is None or outcome.status is not Status.OK:
            return dataclasses.replace(outcome, reconciled=reconciled)
        # An untraced run of the cell's workload: its time is the cell's own run (what the limit adds up), untimed again.
        return dataclasses.replace(outcome, reconciled=reconciled, untraced_seconds=seconds)

    def _with_untraced_reconciled(self, outcome: CellResult) -> CellResult:
        """:meth:`_with_reconciled`, its run untraced: its trace holds the run's record points only."""
        return self._with_reconciled(outcome, traced=False)

    def _reconciled_call(self, cell: Cell, traced: bool = True) -> tuple[TraceFile | None, float | None]:
        """The cell run again with the switches of the known differences that cover it on its side (none: no run), so a
        pair is proven bitwise identical for the whole run once every mechanism is removed (docs/known-differences.md).
        Run even where the record call failed: a switch may be what makes a binding run. A run that fails or does not
        apply its switches leaves no reconciled trace (its pairs then cannot be proven), and a warning says why.

        ``traced``: every point of its loop, else only its record points (:func:`harness.model.record_points.records_only`),
        what a proof compares; the matrix traces a reconciled run only where its records part from its partner's, to say
        where (issue 47: a traced R run costs about two untraced ones).

        Returns its trace (``None``: no run, or it failed, the warning said why) and the script's own workload seconds
        (``None`` where it gave no record)."""
        switches = self._active_switches(cell)
        if not switches:
            return None, None
        # Its final weights too (in a file of its own, read and removed): a proof compares everything the cells record.
        weights = f"{cell.id}.reconciled.safetensors"
        extra: dict[str, Any] = {"kind": "trace", "trace": {"keep": [], "stop": False}} if traced else {}
        request = self.pool.cell_request(cell, switches=switches, weights_name=weights, **extra)
        try:
            reply = self.pool.call(cell.frontend, request)
            raw = (reply.get("record") or {}) if traced else reply
            applied = tuple(raw.get("switches") or ())
            if tuple(sorted(applied)) != switches:
                self.reconcile_problems[cell.id] = f"asked for the switches {', '.join(switches)}, its script applied {list(applied)}"
                return None, None
            # Its record is checked as the plain one's, but for the switches it was asked to apply (checked above).
            status, reason = judge_record({**raw, "switches": []}, self.spec.for_model(cell.model), cell)
            if status is Status.ERROR:
                self.reconcile_problems[cell.id] = f"its run with the switches {', '.join(switches)} gave no record: {reason}"
                return None, None
            record = RunRecord.from_json(raw)
            loop = CellTrace.from_reply(reply, switches) if traced else CellTrace((), DIGESTS[0], switches)
            trace = self._write_trace(with_record_points(loop, record, self._digests(record)), cell, f"{cell.id}.reconciled{TRACE_SUFFIX}")
            seconds = raw.get("seconds_workload")
            return trace, float(seconds) if isinstance(seconds, int | float) else None
        except (WorkerError, ScriptError) as err:
            self.reconcile_problems[cell.id] = f"its run with the switches {', '.join(switches)} failed: {' '.join(str(err).split())}"
            return None, None
        finally:
            (self.pool.staging / weights).unlink(missing_ok=True)

    @staticmethod
    def _digests(record: RunRecord) -> dict[str, TensorDigest] | None:
        """The final weights' digests of a record (``None`` where its file cannot be read: the cell's own check says so)."""
        try:
            return tensor_digests(record.weights_path) if record.weights_path else None
        except ValueError:
            return None

    def _write_trace(self, trace: CellTrace, cell: Cell, name: str) -> TraceFile | None:
        """Write a cell's trace to staging; ``None`` where it is longer than a trace may be (a run of many thousand steps):
        no trace is kept that a reader refuses, the cell keeps none (its pairs are judged untraced) and a warning says so.

        Raises:
            WorkerError: the file cannot be written (a full disk): the cell ends in error, the run goes on.
        """
        too_long = trace.too_long()
        if too_long is not None:
            self.trace_problems[f"{cell.id}{' (reconciled run)' if trace.switches else ''}"] = too_long
            return None
        try:
            return trace.write(self.pool.staging / name)
        except (OSError, SafetensorError) as err:
            raise WorkerError(f"{cell.id}: cannot write its trace to {self.pool.staging / name}: {' '.join(str(err).split())}; "
                              "free space there (or set TMPDIR) and run again") from err

    def _record_call(self, cell: Cell) -> CellResult:
        refused = refusal(cell, self.spec.for_model(cell.model))  # arithmetic that cannot work in any language: not run, and said why
        if refused is not None:
            return CellResult(cell, Status.UNSUPPORTED, refused)
        reason = self.pool.unavailable_reason(cell.frontend)
        if reason is not None:
            if self.pool.frontends[cell.frontend].language == "r" and r_required():
                return CellResult(cell, Status.ERROR, reason + " (AMP_PARITY_REQUIRE_R=1 makes this a failure)")
            return CellResult(cell, Status.SKIPPED, reason)
        worker = self.pool.worker(cell.frontend)
        traced: CellTrace | None = None
        try:
            worker.start()  # start-up (R, library(torch), import torch) is not part of a cell's time
            start = time.perf_counter()
            if self.trace:  # the record call is the traced call: its points are the cell's trace (docs/tracing.md)
                request = self.pool.cell_request(cell, kind="trace", trace={"keep": [], "stop": False, **self._compared_with(cell)})
                reply = self.pool.call(cell.frontend, request)
                raw = reply["record"]
                traced = CellTrace.from_reply(reply)
            else:
                raw = self.pool.call_cell(cell)
        except ScriptError as err:
            # Unsupported: the binding refused a cell it is declared not to support (R torch's own error, the lift off),
            # or the script refused to lift its check (a condition of its own), or a loop feature or a model the binding
            # cannot do (Feature.unsupported, Model.unsupported_in: the script's refusal names the binding's missing piece);
            # any other failure is an error.
            known = ((self.pool.declared_unsupported(cell) and (err.refused or not self.pool.expected_to_run(cell)))
                     or (err.refused and (self.pool.feature_refused(cell) or self.pool.model_refused(cell))))
            # One line: R's cli messages carry their hints (the 'i' bullets) on lines of their own.
            reason = " ".join(err.frontend_message.split()) if known else str(err)
            return CellResult(cell, Status.UNSUPPORTED if known else Status.ERROR, reason)
        except WorkerError as err:
            return CellResult(cell, Status.ERROR, str(err))
        wall_seconds = time.perf_counter() - start
        memory = self.pool.last_memory(cell.frontend) | {"cuda_peak_bytes": raw.get("peak_memory_bytes") if isinstance(raw, dict) else None}
        status, reason = judge_record(raw, self.spec.for_model(cell.model), cell)
        if status is Status.ERROR:
            return CellResult(cell, status, reason, wall_seconds=wall_seconds, memory=Memory.from_json(memory))
        record = RunRecord.from_json(raw)
        trace = None
        if traced is not None:  # the trace carries the record (losses, scales, dtypes, final weights): docs/tracing.md
            try:
                trace = self._write_trace(with_record_points(traced, record, self._digests(record)), cell, f"{cell.id}{TRACE_SUFFIX}")
            except WorkerError as err:
                return CellResult(cell, Status.ERROR, str(err), wall_seconds=wall_seconds, memory=Memory.from_json(memory))
        if self.pool.declared_unsupported(cell) and record.lifted_check is None:
            reason = f"declared unsupported for {cell.frontend}, but it ran: update the Frontend registry"
        if trace is not None and status is Status.OK and cell.frontend == self.baseline:
            self._baseline_traces[cell.id] = trace
        return CellResult(cell, status, reason, record=record, wall_seconds=wall_seconds, memory=Memory.from_json(memory),
                          trace=trace)

    def _active_switches(self, cell: Cell) -> tuple[str, ...]:
        """The switches, in ``cell``'s language, of the entries that can act on it: not one inert on its arguments (a
        weight-decay bug where weight_decay is 0 or unset), whose switch is neither run nor expected (harness/judge/pairs.py)."""
        args = {**OPTIMIZERS[cell.optimizer].args, **self.spec.optimizer_args.get(cell.optimizer, {})}
        language = self.pool.language(cell.frontend)
        return switch_names([s for k in self.known if k.inert(args, cell.feature) is None for s in k.reconciling(cell, language)])

    def _compared_with(self, cell: Cell) -> dict[str, Any]:
        """What the recorder needs to compare ``cell``'s record call, as it runs, with its baseline partner's trace, and to
        cut it after the step where the two part (:class:`harness.worker_side.trace_recorder.TraceRecorder`'s ``against``
        and ``kept_after_cut``); empty where the whole trace is needed.

        Issue 38: of a pair that parts, the other side's plain trace tells where it parts (its first step or two at
        ``tiny``) and which triggers fired; the rest of it proves nothing, since its reconciled run is what is compared
        everywhere. Yet it cost R a copy, a dtype, a shape and a digest at each of its 700-1,600 points. So the trace is cut
        only where all of this holds: the run has two frontends (the cell has one comparison, with the baseline's cell);
        the baseline's record call has ended ok, its trace written; and the cell has switches of its own, so it has a
        reconciled run, which a verdict reads in place of the plain trace (a cell without one stands in with its plain
        trace, whole). A pair whose traces never part loses nothing: the recorder cuts nothing.
        """
        if len(self.frontends) != 2 or cell.frontend == self.baseline:
            return {}
        if not self._active_switches(cell):
            return {}
        partner = self._baseline_traces.get(dataclasses.replace(cell, frontend=self.baseline).id)
        if partner is None:
            return {}
        points = read_cell_trace(partner).points
        return {"against": [[p[0], p[1], p[2], p[4]] for p in points if not p[1].startswith(RECORD_PREFIX)],
                "kept_after_cut": list(TRIGGER_POINTS)}

    def _with_distance(self, outcome: CellResult) -> CellResult:
        """The cell's distance from float64 where it ran and has a reference (what its verdict is judged from); a cell whose
        final weights cannot be read ends in error here."""
        record, cell = outcome.record, outcome.cell
        if record is None or outcome.status is not Status.OK:
            return outcome
        # A scaler run is judged against the steps it really took: the reference skips its skipped steps too.
        skipped = record.skipped_step_indices
        reference = self.reference(cell.optimizer, clip=cell.properties.clip, skipped=skipped, feature=cell.feature, model=cell.model,
                                   default_zeroes=zero_grad_default_zeroes(self.pool.language(cell.frontend), cell.optimizer, cell.feature))
        if reference is None:
            return outcome
        assert record.weights_path is not None
        try:
            weights = load_weights(record.weights_path)
        except ValueError as err:  # the script said ok, but its weights cannot be read: this cell fails, the matrix goes on
            return dataclasses.replace(outcome, status=Status.ERROR, trace=None,
                                       reason=f"{err}; the script reported success, but its final weights cannot be judged")
        distance = measure_distance(list(record.losses), weights, reference, skipped)
        return dataclasses.replace(outcome, reference_distance=distance)

    def reference(self, optimizer: str, clip: bool, skipped: frozenset[int] = frozenset(),
                  feature: str = NO_FEATURE, model: str | None = None, default_zeroes: bool = False) -> Reference | None:
        """The float64 trajectory of ``optimizer`` in the loop of ``feature`` (with or without clipping, replaying
        ``skipped`` steps) training ``model`` (default the spec's), computed once per kind; ``None`` when too costly.
        ``default_zeroes``: the cell's binding's ``zero_grad()`` zeroes the grads (:func:`run_reference`)."""
        model = model or self.spec.model
        spec = self.spec.for_model(model)
        if (self.reference_reason if model == self.spec.model else reference_skip_reason(spec)) is not None:
            return None
        key = (model, optimizer, clip, skipped, feature, default_zeroes)
        if key not in self._references:
            started = time.perf_counter()
            if model not in self._arrays:
                self.model_fixtures((model,))
                self._arrays[model] = load_fixture_arrays(self.pool.model_fixture(model))
            self._references[key] = run_reference(spec, self._arrays[model], clip=clip, skipped=skipped, optimizer=optimizer,
                                                  feature=feature, default_zeroes=default_zeroes)
            self.reference_seconds += time.perf_counter() - started
        return self._references[key]

    def reference_summary(self, every_optimizer: bool = True) -> ReferenceSummary:
        """The reference trajectories for the result file (losses only; weights stay in memory): each optimizer's that
        ran with the spec's model, plain and clipped, and each one replayed over a run's skipped steps; another model's
        (a matrix of several) those its cells were judged against, each naming its model. ``every_optimizer=False``: only
        those already computed (a cell's own, by :meth:`_with_distance`), which is all that judging one cell reads."""
        if self.reference_reason is not None:
            return ReferenceSummary(available=False, reason=self.reference_reason)
        for optimizer in self._optimizers if every_optimizer else ():
            for clip in (False, True):
                self.reference(optimizer, clip)
        trajectories = tuple(
            {"optimizer": optimizer, "clip": clip, "skipped_steps": sorted(skipped), "losses": ref.losses.tolist(),
             **({} if feature == NO_FEATURE else {"feature": feature}), **({} if model == self.spec.model else {"model": model}),
             **({"zero_grad_zeroes": True} if zeroes else {})}
            for (model, optimizer, clip, skipped, feature, zeroes), ref in self._references.items()
        )
        return ReferenceSummary(True, None, trajectories)


def collect_warnings(cells: Sequence[CellResult], spec: WorkloadSpec | None = None) -> list[str]:
    """Warnings a reader must see: a libtorch or thread-count mismatch (a backward's among them), rounds that did not repeat the
    record call's losses, AMP cells with float32 GEMMs, declared-unsupported cells that ran, overflows asked
    for where no scaler mode ran."""
    warnings = []
    ran = [(c.frontend, c.record) for c in cells if c.record is not None]
    versions = {frontend: record.libtorch_version for frontend, record in ran if record.libtorch_version}
    if len(set(versions.values())) > 1:
        listed = ", ".join(f"{f} {v}" for f, v in sorted(versions.items()))
        warnings.append(f"libtorch versions differ ({listed}): pairs across them are not expected bitwise identical (each pair says why)")
    threads = {frontend: record.threads for frontend, record in ran}
    if spec is not None and any(t != spec.threads for t in threads.values()):
        listed = ", ".join(f"{f} {t}" for f, t in sorted(threads.items()))
        warnings.append(f"threads differ from the spec's {spec.threads} ({listed}): timings are not comparable")
    backward = {str(c.installation.get("name", c.frontend)): c.installation["backward_threads"] for c in cells
                if c.installation and c.installation.get("backward_threads") is not None}
    if spec is not None and any(list(seen) != [spec.threads] for seen in backward.values()):
        listed = ", ".join(f"{name} {list(seen)}" for name, seen in sorted(backward.items()) if list(seen) != [spec.threads])
        warnings.append(f"backward passes ran on other thread counts than the spec's {spec.threads} ({listed}; "
                        "harness/worker_side/thread_probe.py): a reduction in backward may differ bitwise")
    for c in cells:
        if c.timing is not None and c.timing.differing_rounds:
            warnings.append(
                f"{c.id}: {c.timing.differing_rounds} of {c.timing.rounds} timed rounds gave other losses than "
                "the record call: this build is not deterministic run to run"
            )
    warnings += [f"{c.id}: {c.gemm_problem}" for c in cells if c.gemm_problem]
    warnings += [f"{c.id}: {c.reason}" for c in cells if c.status is Status.OK and c.reason]
    asked = spec is not None and spec.overflow_steps and spec.overflow_steps != default_overflow_steps(spec.steps)
    if spec is not None and asked and not any(c.cell.properties.skips_steps for c in cells):
        warnings.append(f"overflow_steps {list(spec.overflow_steps)} given, but no scaler mode ran: nothing was injected")
    if scripts_root() != REPO_ROOT:
        warnings.append(f"scripts ran from {scripts_root()} (${SCRIPTS_ENV}), not from this checkout")
    return warnings
