"""The result model: every stored thing of a matrix result, typed and immutable, with ``to_json``/``from_json``.

A run produces one :class:`MatrixResult`: its spec (a real :class:`~harness.workload.spec.WorkloadSpec`, so
``steps`` is read from it, never recomputed), one :class:`CellResult` per matrix cell, the pair and
performance targets, and what the machine was. The modules that compute these things (runner, measurements, judge,
:mod:`harness.model.cell_efficiency`) import this module; it imports none of them, only the contract, the workload
spec and cells, and the model's leaves (record, timing, efficiency, verdicts, trace, cell_trace, shape, provenance,
weights, phases), whose types it re-exports.

Nothing here mutates: a cell filled in stages (the record call, then timing, efficiency, verdict) is
built again with :func:`dataclasses.replace`. ``from_json`` reads the current schema only;
:func:`harness.store.result_file.load_result` upgrades older files first (asv's ``update_to_N``).
What a worker or probe reports about itself (a matmul peak, a GEMM profile, the environment, worker
start-ups, the fixture file) is kept as the JSON object it is: the harness stores it and shows it,
and judges nothing by it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, NotRequired, TypedDict

from harness.contract.models import DEFAULT_MODEL
from harness.contract.modes import SCRIPTS
from harness.errors import ResultError
from harness.model.cell_trace import TraceFile
from harness.model.codec import Since, Stored, codec, decode, hints
from harness.model.efficiency import Efficiency
from harness.model.pair_trace import PairTrace
from harness.model.phases import Phases, phase_entries, phases_of
from harness.model.provenance import Provenance
from harness.model.record import RECORD_SCHEMA_VERSION, RunRecord
from harness.model.reported import Environment, Fixture, GemmProfile, Installation, Peak, PhaseEntry, Trajectory, WorkerStarts
from harness.model.shape import check_shape, check_upgradable, strip_judged
from harness.model.timing import MIN_ROUNDS_FOR_SPREAD, Stats, Timing, TimingProtocol, TimingSamples, for_want_of_spread, ratio
from harness.model.verdicts import CELL_OUTCOMES, CellVerdict, Float64Check, PairVerdict, ReferenceDistance, TargetCheck, Verdict
from harness.model.weights import FinalWeights
from harness.workload.features import NO_FEATURE
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec

__all__ = [
    "CELL_OUTCOMES",
    "CellKeys",
    "Source",
    "check_result_shape",
    "check_upgradable_shape",
    "without_verdicts",
    "CellResult",
    "CellVerdict",
    "Efficiency",
    "FinalWeights",
    "TargetCheck",
    "Float64Check",
    "MatrixResult",
    "Memory",
    "PairTrace",
    "PairVerdict",
    "Peaks",
    "Provenance",
    "RECORD_SCHEMA_VERSION",
    "RESULT_SCHEMA_VERSION",
    "ReferenceDistance",
    "ReferenceSummary",
    "SIDE_BY_SIDE_NOTE",
    "RunOf",
    "RunRecord",
    "Stats",
    "Status",
    "Timing",
    "TimingSamples",
    "with_time_vs_default",
]

#: Version 2 added the timing protocol (``protocol``, per-cell ``timing``), ``peaks``, ``efficiency``,
#: ``memory`` and GEMM profiles. Version 3 stores ``weights_path`` relative to the result's folder
#: (version 2 stored it relative to the working directory of the run). Version 4 stores
#: ``time_vs_default`` (this cell's time ÷ its frontend's default cell's: what every view shows) and
#: ``time_vs_default_note`` instead of version 3's inverse, ``speedup_vs_default`` / ``speedup_note``.
#: Version 5 adds ``traces``: each traced pair's :class:`~harness.model.pair_trace.PairTrace` (where its runs part).
#: Version 6 renames ``figures`` to ``targets`` (each entry's ``figure`` to ``name``) and adds the worst tensor to each
#: cell's ``reference_distance``: every verdict is judged on load from what the result stores (:mod:`harness.judge.assess`).
#: Version 7 adds installations as frontends: each cell's ``installation`` (what ran it, what its worker reported), the
#: result's ``frontends`` (their order) and ``baseline`` (what every other frontend is paired with), and ``sources``
#: (the results a ``harness merge`` was made of; empty for a run).
#: Version 8 adds the optimizer axis: each cell's ``optimizer`` (its row of harness/workload/optimizers.py), the float64
#: reference as one trajectory per optimizer (``reference.trajectories``), and the ratio to default within one script,
#: optimizer and frontend (each script declares its own ``default``).
#: Version 9 adds ``provenance`` (the harness's version, the checkout's commit and dirty state, every script's digest:
#: :class:`~harness.model.provenance.Provenance`) and each cell's ``weights`` (its final weights' tensor digests and
#: measurements against its pair's other cells: :class:`~harness.model.weights.FinalWeights`), so a result stays judgeable
#: without its weights files.
RESULT_SCHEMA_VERSION = 10


class CellKeys(TypedDict):
    """A cell's key as a result stores it: its id, its pair's id and their parts (a feature only where the cell ran one)."""

    id: str
    pair: str
    frontend: str
    script: str
    mode: str
    optimizer: Annotated[str, Since(8)]
    feature: NotRequired[str]
    model: NotRequired[str]
    device: str


def _cell_keys(cell: Cell) -> dict[str, str]:
    """A cell stored as the keys of its result (:class:`CellKeys`): its ids beside their parts, so a reader (or ``grep``)
    finds a cell by its id, and no feature where it ran none, no model where it trained the default (results from before
    features and models read back byte for byte)."""
    left_out = {"feature": NO_FEATURE, "model": DEFAULT_MODEL}
    return {name: getattr(cell, name) for name in hints(CellKeys) if getattr(cell, name) != left_out.get(name)}


def _cell_of(data: Mapping[str, Any]) -> Cell:
    """The inverse of :func:`_cell_keys` (the ids are the parts', never read back)."""
    return Cell(**{f.name: data[f.name] for f in dataclasses.fields(Cell) if f.name in data})


class Status(StrEnum):
    """How a cell ended.

    ``ok``: a record came back; ``unsupported``: the binding refused a cell it is known not to support
    (the binding's own message is the reason); ``skipped``: the frontend is not available here;
    ``numerical_failure``: non-finite loss in a mode without a scaler; ``error``: anything else.
    """

    OK = "ok"
    UNSUPPORTED = "unsupported"
    SKIPPED = "skipped"
    NUMERICAL_FAILURE = "numerical_failure"
    ERROR = "error"


@dataclass(frozen=True)
class CellResult(Stored):
    """One cell of the matrix: how it ended, what it recorded, how fast it ran, and how it stands on its own.

    ``time_vs_default``: this cell's median loop time ÷ its frontend's ``default`` cell's (1.8 means
    1.8× the default's time), or ``None`` with ``time_vs_default_note`` saying why.
    """

    cell: Cell = field(metadata=codec(flatten=CellKeys, encode=_cell_keys, decode=_cell_of))
    status: Status
    reason: str | None = None
    record: RunRecord | None = None
    reference_distance: ReferenceDistance | None = None
    wall_seconds: float | None = None
    memory: Memory | None = None
    timing: Timing | None = None
    efficiency: Efficiency | None = None
    gemm_profile: Mapping[str, Any] | None = field(default=None, metadata=codec(json=GemmProfile | None))
    gemm_problem: str | None = None
    verdict: CellVerdict | None = field(default=None, metadata=codec(judged=True))
    time_vs_default: float | None = field(default=None, metadata=codec(since=4))
    time_vs_default_note: str | None = field(default=None, metadata=codec(since=4))
    #: The installation that ran it: how the user named it (language, interpreter, R library or activation
    #: script) and what its worker reported (libtorch version and build, CPU, host; :mod:`harness.worker_side.installation_facts`).
    #: Kept per cell, so a result merged from many machines still says what ran each one.
    installation: Mapping[str, Any] | None = field(default=None, metadata=codec(since=7, json=Installation | None))
    #: The record call's trace (every named point, digested: :mod:`harness.model.cell_trace`), beside the weights; and
    #: the trace of the cell run again with the switches of the known differences that cover it on its side.
    trace: TraceFile | None = field(default=None, metadata=codec(since=8))
    reconciled: TraceFile | None = field(default=None, metadata=codec(since=8))
    #: What the result keeps of the final weights (tensor digests, measurements against the pair's other cells), so the cell
    #: is judged when its weights file is gone; ``None`` where nothing was kept (no weights, or a result before schema 9).
    weights: FinalWeights | None = field(default=None, metadata=codec(since=9))
    #: The script's own workload seconds of an untraced warm run of the cell's workload that a proof made anyway (its
    #: untraced reconciled run: the same workload, the switches on), kept where the run timed no round of the cell for it
    #: (issue 47: a run timed side by side, ``tiny``, times only the cells that have no such run); ``None`` elsewhere.
    untraced_seconds: float | None = field(default=None, metadata=codec(optional=True, omit=lambda c: c.untraced_seconds is None))

    @property
    def id(self) -> str:
        """``with_autocast-autocast-r-cpu``."""
        return self.cell.id

    @property
    def pair(self) -> str:
        """The id this cell shares with its other frontend."""
        return self.cell.pair

    @property
    def frontend(self) -> str:
        """The installation's name: ``python``, ``r``, or one the user gave (``py28``)."""
        return self.cell.frontend

    @property
    def language(self) -> str:
        """``python`` or ``r``: what the installation runs (its scripts, its binding's known differences)."""
        if self.installation and self.installation.get("language"):
            return str(self.installation["language"])
        return self.record.frontend if self.record is not None else self.frontend

    @property
    def script(self) -> str:
        """The script stem."""
        return self.cell.script

    @property
    def optimizer(self) -> str:
        """The optimizer row the cell ran (harness/workload/optimizers.py)."""
        return self.cell.optimizer

    @property
    def feature(self) -> str:
        """The loop feature the cell ran (harness/workload/features.py; ``none``: the plain loop)."""
        return self.cell.feature

    @property
    def mode(self) -> str:
        """The mode the script ran."""
        return self.cell.mode

    @property
    def device(self) -> str:
        """The device it ran on."""
        return self.cell.device

    @property
    def model(self) -> str:
        """The model it trained (harness/contract/models.py)."""
        return self.cell.model

    @property
    def ok(self) -> bool:
        """Whether a usable record came back."""
        return self.status is Status.OK

    @property
    def own_run_seconds(self) -> float | None:
        """One run of the cell: its median timed workload (a warm call), else the workload of the untraced run a proof made
        of it (:attr:`untraced_seconds`), else its record call's wall time (``None``: it did not run). What tracing adds is
        measured over it, and the matrix's limit adds it up (:meth:`MatrixResult.limit`)."""
        if self.timing:
            return self.timing.workload.median
        return self.untraced_seconds if self.untraced_seconds is not None else self.wall_seconds

@dataclass(frozen=True)
class Peaks(Stored):
    """This machine's matmul throughput per GEMM dtype, measured in the run (a dtype maps to ``None`` when it failed)."""

    device: str
    threads: int
    by_dtype: Mapping[str, Mapping[str, Any] | None] = field(metadata=codec(json=Mapping[str, Peak | None]))
    reason: str | None = None

def _no_trajectories(reference: ReferenceSummary) -> bool:
    """An unavailable reference stores only why (results from before trajectories read back byte for byte)."""
    return not reference.available


@dataclass(frozen=True)
class ReferenceSummary(Stored):
    """The float64 trajectories (losses only), or why there are none.

    ``trajectories``: one per optimizer, clipped or not, and replayed over a run's skipped steps where one skipped:
    each ``{"optimizer", "clip", "skipped_steps", "losses"}``.
    """

    available: bool
    reason: str | None = None
    trajectories: tuple[Mapping[str, Any], ...] = field(default=(), metadata=codec(omit=_no_trajectories, json=tuple[Trajectory, ...]))

    def losses_for(self, optimizer: str, clip: bool, skipped: Collection[int] = (),
                   feature: str = NO_FEATURE, zero_grad_zeroes: bool = False) -> tuple[float | None, ...] | None:
        """The float64 losses a run is compared with: ``optimizer``'s in the loop of ``feature``, plain or clipped
        (``clip``), replayed over the steps it ``skipped``; ``None`` where the result has none (no reference, or none
        for exactly those). A trajectory stored without a feature is the plain loop's; ``zero_grad_zeroes``: the one whose
        zero_grad() zeroes the unused layer's grads (an R-code optimizer's cell at R torch's default)."""
        if not self.available:
            return None
        steps = sorted(skipped)
        return next((tuple(t["losses"]) for t in self.trajectories
                     if "model" not in t and t["optimizer"] == optimizer and bool(t["clip"]) == clip and list(t["skipped_steps"]) == steps
                     and t.get("feature", NO_FEATURE) == feature and bool(t.get("zero_grad_zeroes", False)) == zero_grad_zeroes),
                    None)

    def of_model(self, model: str, spec_model: str) -> ReferenceSummary:
        """The trajectories of ``model`` alone, as a run of that model would store them (without their ``model``): a
        trajectory names its model only where it is not the spec's (``spec_model``), so the MLP's result reads as before."""
        if model == spec_model or not self.available:
            return dataclasses.replace(self, trajectories=tuple(t for t in self.trajectories if "model" not in t))
        return dataclasses.replace(self, trajectories=tuple({k: v for k, v in t.items() if k != "model"}
                                                            for t in self.trajectories if t.get("model") == model))

@dataclass(frozen=True)
class RunOf:
    """What one run of a (maybe merged) result was run under: its spec, measured peaks and timing protocol, and the
    ``sources`` entry it is (``None``: the result's own run)."""

    spec: WorkloadSpec
    peaks: Peaks
    protocol: TimingProtocol
    source: Mapping[str, Any] | None
    #: Its float64 reference: a merged input's own (a merge keeps every input's, issue 37), else the result's.
    reference: ReferenceSummary | None = None



def _same_crash(pair: PairVerdict, by_side: Mapping[tuple[str, str], CellResult]) -> bool:
    """Whether both cells of ``pair`` stopped with the same error in the same language (``r`` and ``r2=r``, both crashing
    as an R torch bug does): one failure twice, so an excuse of one is the other's, as for an identical pair. Each
    side's own name is set aside in the comparison (a worker's message may name its frontend)."""
    cells = [by_side.get((pair.pair, f)) for f in pair.frontends]
    if pair.verdict != Verdict.ERROR or any(c is None or c.status is not Status.ERROR or c.reason is None for c in cells):
        return False
    a, b = cells
    assert a is not None and b is not None and a.reason is not None and b.reason is not None
    def anonymous(cell: CellResult) -> str:
        return re.sub(rf"(?<![\w.]){re.escape(cell.frontend)}(?![\w.])", "<frontend>", cell.reason or "")

    return a.language == b.language and anonymous(a) == anonymous(b)


class Source(TypedDict):
    """A merged input (:mod:`harness.store.merge`): the result file it was, what it ran, and what it was run under."""

    file: str
    created: NotRequired[str]
    host: NotRequired[str]
    frontends: list[str]
    devices: list[str]
    cells: list[str]
    environment: NotRequired[Environment]
    spec: NotRequired[WorkloadSpec]
    peaks: NotRequired[Peaks]
    protocol: NotRequired[TimingProtocol]
    provenance: NotRequired[Provenance]
    reference: NotRequired[ReferenceSummary]


@dataclass(frozen=True)
class MatrixResult(Stored):
    """A whole run: the spec, every cell, the pair verdicts and performance targets, and the machine it ran on.

    Its fields are the result file's, in the file's order (:mod:`harness.model.codec`); a field added to the file is one
    line here (its ``since``, and a default an older file meant) and its upgrade step in
    :mod:`harness.store.result_file` (docs/development.md).
    """

    #: The file's schema: always this harness's (older files are upgraded before they are read).
    schema_version: int = field(default=RESULT_SCHEMA_VERSION, init=False, compare=False)
    created: str
    wall_seconds: float
    spec: WorkloadSpec
    spec_digest: str
    fixture: Mapping[str, Any] = field(metadata=codec(json=Fixture))
    environment: Mapping[str, Any] = field(metadata=codec(json=Environment))
    protocol: TimingProtocol
    workers: Mapping[str, Any] = field(metadata=codec(json=Mapping[str, WorkerStarts]))
    peaks: Peaks
    reference: ReferenceSummary
    reference_seconds: float
    warnings: tuple[str, ...]
    cells: tuple[CellResult, ...] = field(metadata=codec(non_empty=True))
    judging: str = field(metadata=codec(since=4))
    pairs: tuple[PairVerdict, ...] = field(default=(), metadata=codec(judged=True))
    targets: tuple[TargetCheck, ...] = field(default=(), metadata=codec(judged=True))
    #: The traced pairs (every pair that was not identical, and those a known difference covers).
    traces: tuple[PairTrace, ...] = field(default=(), metadata=codec(since=5, optional=False))
    #: The frontends (installations) in the order the user gave them; every view lists them so.
    frontends: tuple[str, ...] = field(default=("python", "r"), metadata=codec(since=7, optional=False, non_empty=True))
    #: The frontend every other one is paired with (where it has no cell of a pair, the first frontend that has one).
    baseline: str = field(default="python", metadata=codec(since=7, optional=False))
    #: The results a ``harness merge`` was made of (file, created, host, cells, provenance), oldest first; empty for a run.
    sources: tuple[Mapping[str, Any], ...] = field(default=(), metadata=codec(since=7, optional=False, json=tuple[Source, ...]))
    #: Where the result came from: the harness's version, the checkout's commit, every script's digest (a merged result:
    #: its first input's; each input's is in ``sources``).
    provenance: Provenance = field(default_factory=Provenance.unknown, metadata=codec(since=9, optional=False))
    #: Where the run's time went (:mod:`harness.model.phases`); none recorded before schema 10, or for a merged result.
    phases: Phases = field(default_factory=Phases, metadata=codec(since=10, optional=False, encode=phase_entries, decode=phases_of,
                                                                 json=list[PhaseEntry]))

    def limit(self) -> tuple[float, float, float]:
        """The least wall time this matrix could take here, and its two parts: ``(limit, start, rounds)``.

        ``start``: the slowest worker's start (from its launch to its first answer: R's start-up and ``library(torch)``,
        Python's ``import torch``; the workers start side by side, so the slowest is what a run waits for). ``rounds``: one
        untraced run of every cell that ran (:attr:`CellResult.own_run_seconds`: its untraced timed round where it has one),
        and one more of each cell whose reconciled run the run needed (a known difference covers it: its pair is proven by a
        second run with the switches, the same workload, so its untraced cost is the cell's own run), spread over the
        :attr:`lanes` the cells can run in at once. No run that proves what this one proves can be quicker: each cell and
        each reconciled run must run once, and its worker must start first (issue 47: the limit counts the proofs).
        """
        start = max((float(w.get("ready_seconds") or w.get("startup_seconds") or 0.0) for w in self.workers.values()), default=0.0)
        runs = sum((c.own_run_seconds or 0.0) * (2 if c.reconciled is not None else 1) for c in self.cells if c.record is not None)
        rounds = runs / self.lanes
        return start + rounds, start, rounds

    @property
    def lanes(self) -> int:
        """How many cells could run at once here: a lane per frontend that ran a cell, no more than the machine's cores
        hold at the spec's threads each (the ``cpus`` the run found, :mod:`harness.run.availability`). 1 for a result that
        did not record its cores (before issue 38): its limit is read as it was written, one cell after another."""
        cpus = self.environment.get("cpus")
        if not isinstance(cpus, int) or cpus < 1:
            return 1
        frontends = len({c.frontend for c in self.cells if c.record is not None})
        return max(1, min(frontends, cpus // max(1, self.spec.threads)))

    @property
    def steps(self) -> int:
        """Optimizer steps of every cell's run (the spec's)."""
        return self.spec.steps

    def map_weights_paths(self, change: Callable[[str], str]) -> MatrixResult:
        """This result with every file a cell points at (its record's ``weights_path``, its trace files) changed by
        ``change`` (made relative, absolute, moved)."""

        def moved(cell: CellResult) -> CellResult:
            files: dict[str, Any] = {}
            if cell.record is not None and cell.record.weights_path is not None:
                files["record"] = dataclasses.replace(cell.record, weights_path=change(cell.record.weights_path))
            for name in ("trace", "reconciled"):
                trace = getattr(cell, name)
                if trace is not None:
                    files[name] = dataclasses.replace(trace, path=change(trace.path))
            return dataclasses.replace(cell, **files) if files else cell

        return dataclasses.replace(self, cells=tuple(moved(c) for c in self.cells))

    def run_of(self, cell: CellResult) -> RunOf:
        """The spec, peaks and timing protocol ``cell`` was run, measured and timed under.

        A run's are its own (the result's ``spec``, ``peaks``, ``protocol``). A merged result's cells come from several
        runs, each with its own (another device's AMP dtype, another machine's peaks, another protocol): each input's
        are kept in its entry of ``sources`` (:mod:`harness.store.merge`), and a cell is checked and judged against
        those of the run it came from. Where an entry lacks one (a merge written before they were kept), the result's own.
        """
        run = self._runs.get(cell.id, self._own_run)
        return run if cell.cell.model == run.spec.model else self._model_run(run, cell.cell.model)

    def _model_run(self, run: RunOf, model: str) -> RunOf:
        """``run`` for another model's cells (a matrix of several models): the spec training it, and its references."""
        key = (id(run), model)
        if key not in self._model_runs:
            reference = None if run.reference is None else run.reference.of_model(model, run.spec.model)
            self._model_runs[key] = dataclasses.replace(run, spec=run.spec.for_model(model), reference=reference)
        return self._model_runs[key]

    @functools.cached_property
    def _model_runs(self) -> dict[tuple[int, str], RunOf]:
        return {}

    @functools.cached_property
    def _own_run(self) -> RunOf:
        return RunOf(self.spec, self.peaks, self.protocol, None, self.reference)

    def run_of_source(self, source: Mapping[str, Any]) -> RunOf:
        """What the run an entry of ``sources`` is was run under (what the entry lacks: the result's own)."""
        return RunOf(
            WorkloadSpec.from_json(source["spec"]) if source.get("spec") is not None else self.spec,
            Peaks.from_json(source["peaks"]) if source.get("peaks") is not None else self.peaks,
            TimingProtocol.from_json(source["protocol"]) if source.get("protocol") is not None else self.protocol,
            source,
            ReferenceSummary.from_json(source["reference"]) if source.get("reference") is not None else self.reference,
        )

    @functools.cached_property
    def _runs(self) -> dict[str, RunOf]:
        runs: dict[str, RunOf] = {}
        for source in self.sources:
            run = self.run_of_source(source)
            for cell_id in source.get("cells") or ():
                runs.setdefault(str(cell_id), run)
        return runs
    def excused(self) -> dict[str, PairVerdict]:
        """The cells whose failure a judged pair excuses, each with that pair: a crash that is a known R torch bug, or a cell
        on the side of a bug its pair's traces part at, each proven by its switch (:mod:`harness.judge.pairs` decides;
        this reads what the pairs say)."""
        excused = {cell: p for p in self.pairs if p.verdict == Verdict.KNOWN_DIFFERENCE for cell in p.details.get("excused") or ()}
        # A cell bitwise identical to an excused one fails the same way, whichever of them was the baseline (r and
        # r2=r): the excuse follows identical pairs, so it never depends on the frontends' order.
        by_side = {(c.pair, c.frontend): c for c in self.cells}
        identical = [tuple(by_side[(p.pair, f)].id if (p.pair, f) in by_side else None for f in p.frontends)
                     for p in self.pairs if p.verdict == Verdict.IDENTICAL or _same_crash(p, by_side)]
        grown = True
        while grown:
            grown = False
            for x, y in identical:
                for mine, other in ((x, y), (y, x)):
                    if mine in excused and other is not None and other not in excused:
                        excused[other] = excused[mine]
                        grown = True
        return excused

    def cell(self, cell_id: str) -> CellResult:
        """The cell with this id.

        Raises:
            KeyError: no such cell in this result.
        """
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        raise KeyError(cell_id)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "the result") -> MatrixResult:
        """A result of this schema version from its JSON object.

        Raises:
            ResultError: one line naming the field that is missing or wrong, and what to do.
        """
        check_result_shape(data, source)
        if data.get("schema_version") != RESULT_SCHEMA_VERSION:
            raise ResultError(f"{source} has result schema version {data.get('schema_version')!r}, not {RESULT_SCHEMA_VERSION}: "
                              "read it with harness.store.result_file.load_result, which upgrades older versions.")
        try:
            result: MatrixResult = decode(cls, data)
            return result
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:  # a stored verdict (never shape-checked)
            what = f"no field {err}" if isinstance(err, KeyError) else str(err)
            raise ResultError(
                f"{source} is not a complete amp-parity result ({what}). Re-run `python -m harness run --json` to write one."
            ) from err

@dataclass(frozen=True)
class Memory(Stored):
    """The record call's memory: the worker's resident set (``scope``: what it covers) and the device's peak."""

    peak_rss_bytes: int | None = None
    rss_before_bytes: int | None = None
    scope: str | None = None
    #: What a worker reports beyond the known fields, stored before ``cuda_peak_bytes`` (the worker's report came first).
    extra: Mapping[str, Any] = field(default_factory=dict, metadata=codec(extra=True))
    cuda_peak_bytes: int | None = None

#: Why a cell of a run timed side by side has no time against its default (``tiny``'s one round per cell, issue 38): by design, not noise.
#: Its own time is one untraced run: a round timed side by side, or its untraced reconciled run where it had one (issue 47).
SIDE_BY_SIDE_NOTE = (f"not timed for a ratio: fewer than {MIN_ROUNDS_FOR_SPREAD} timed rounds, run side by side for each cell's "
                     "own time, or its untraced reconciled run's where it had one "
                     f"(--rounds {MIN_ROUNDS_FOR_SPREAD} or more times them one at a time, for a ratio)")


def with_time_vs_default(cells: Sequence[CellResult], paired: bool = False, side_by_side: bool = False) -> list[CellResult]:
    """``time_vs_default``: this cell's loop time ÷ its script's ``default`` cell's (the mode its pair declares as the
    baseline), same optimizer, frontend and device, when the spread supports it: a ratio compares one thing.

    ``time_vs_default_note`` says what the ratio rests on or, when it is ``None``, why (see :func:`harness.model.timing.ratio`).
    ``side_by_side``: the run's protocol timed too few rounds for a ratio by design (:attr:`TimingProtocol.side_by_side`,
    ``tiny``'s one round): a cell without one says so (:data:`SIDE_BY_SIDE_NOTE`), not that its rounds were noisy.
    """
    def key(c: CellResult) -> tuple[str, str, str, str, str]:
        return (c.script, c.optimizer, c.frontend, c.device, c.cell.feature)

    base: dict[tuple[str, str, str, str, str], Timing | None] = {
        key(c): c.timing for c in cells
        if c.status is Status.OK and c.script in SCRIPTS and c.mode == SCRIPTS[c.script].baseline
    }
    out = []
    for c in cells:
        if c.status is not Status.OK:
            value, note = None, f"cell {c.status}"
        elif key(c) not in base:
            baseline = SCRIPTS[c.script].baseline if c.script in SCRIPTS else "default"
            value, note = None, f"no {baseline} cell of {c.script} with {c.optimizer} to compare with"
        else:
            value, note = ratio(c.timing, base[key(c)], paired)
            # side by side, a cell or its default may have no timed round at all (its untraced reconciled run timed it)
            if side_by_side and value is None and (for_want_of_spread(note) or not (c.timing and base[key(c)])):
                note = SIDE_BY_SIDE_NOTE
        out.append(dataclasses.replace(c, time_vs_default=value, time_vs_default_note=note))
    return out


def check_result_shape(result: object, source: str) -> None:
    """Refuse a result of the current schema that anything would trip over, naming the first field that is missing or wrong
    (:func:`harness.model.shape.check_shape` of :class:`MatrixResult`'s declaration).

    Raises:
        ResultError: one line: where in ``source`` the problem is, what was expected, what it is, and what to do.
    """
    check_shape(MatrixResult, result, source)


def check_upgradable_shape(result: object, source: str) -> None:
    """Refuse a result of any schema version whose shared fields an upgrade step would trip over (those every version has:
    :func:`harness.model.shape.check_upgradable`).

    Raises:
        ResultError: one line naming the field, as :func:`check_result_shape`.
    """
    check_upgradable(MatrixResult, result, source)


def without_verdicts(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without its stored verdicts (pairs, performance targets, each cell's verdict: the fields declared ``judged``):
    they are judged again on load, never read back, so a hand edit there cannot stop a result from loading, nor count."""
    return strip_judged(MatrixResult, data)
