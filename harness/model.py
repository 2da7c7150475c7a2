"""The result model: every stored thing of a matrix result, typed and immutable, with ``to_json``/``from_json``.

A run produces one :class:`MatrixResult`: its spec (a real :class:`~harness.spec.WorkloadSpec`, so
``steps`` is read from it, never recomputed), one :class:`CellResult` per matrix cell, the pair and
figure verdicts, and what the machine was. The modules that compute these things (runner,
measurements, compare, cell_verdict, figures) import this module; it imports none of them, only leaf
modules (errors, spec, matrix, protocol, tolerances, scaler_oracle, verdicts), so there is no cycle.

Nothing here mutates: a cell filled in stages (the record call, then timing, efficiency, verdict) is
built again with :func:`dataclasses.replace`. ``from_json`` reads the current schema only;
:func:`harness.results.load_result` upgrades older files first (asv's ``update_to_N``).
What a worker or probe reports about itself (a matmul peak, a GEMM profile, the environment, worker
start-ups, the fixture file) is kept as the JSON object it is: the harness stores it and shows it,
and judges nothing by it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from harness.errors import ResultError
from harness.matrix import Cell
from harness.protocol import TimingProtocol
from harness.result_shape import check_result_shape
from harness.spec import WorkloadSpec
from harness.verdicts import CELL_OUTCOMES, CellVerdict, FigureCheck, Float64Check, PairVerdict

__all__ = [
    "CELL_OUTCOMES",
    "RECORD_SCHEMA_VERSION",
    "RESULT_SCHEMA_VERSION",
    "CellResult",
    "CellVerdict",
    "Efficiency",
    "FigureCheck",
    "Float64Check",
    "MatrixResult",
    "Memory",
    "PairVerdict",
    "Peaks",
    "ReferenceDistance",
    "ReferenceSummary",
    "RunRecord",
    "Stats",
    "Status",
    "Timing",
    "TimingSamples",
]

#: Version 2 added the timing protocol (``protocol``, per-cell ``timing``), ``peaks``, ``efficiency``,
#: ``memory`` and GEMM profiles. Version 3 stores ``weights_path`` relative to the result's folder
#: (version 2 stored it relative to the working directory of the run). Version 4 stores
#: ``time_vs_default`` (this cell's time ÷ its frontend's default cell's: what every view shows) and
#: ``time_vs_default_note`` instead of version 3's inverse, ``speedup_vs_default`` / ``speedup_note``.
RESULT_SCHEMA_VERSION = 4
#: The run record's version, written by py_scripts/common.py and r_scripts/common.R (2: seconds_workload,
#: gc_seconds; 3: ``clock``, the clock the frontend timed its loop with).
RECORD_SCHEMA_VERSION = 3

Json = dict[str, Any]


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


def _tuple(values: Any) -> tuple[Any, ...] | None:
    return None if values is None else tuple(values)


def _list(values: tuple[Any, ...] | None) -> list[Any] | None:
    return None if values is None else list(values)


@dataclass(frozen=True)
class RunRecord:
    """A script's run record (schema 3, ``docs/contract.md``), as the script returned it.

    Numbers keep the type the script wrote (R writes ``gc_seconds`` 0 as an integer), so a record
    stored again is byte for byte what came back. Fields this version does not know are kept in ``extra``.
    """

    schema_version: int
    frontend: str
    script: str
    mode: str
    device: str
    amp_dtype: str
    losses: tuple[float | None, ...]
    final_loss: float | None
    loss_scale: tuple[float, ...] | None
    skipped: tuple[bool, ...] | None
    skipped_steps: int | None
    output_dtype: str | None
    loss_dtype: str | None
    weights_path: str | None
    seconds_total: float
    seconds_per_epoch: tuple[float, ...]
    seconds_workload: float
    gc_seconds: float
    clock: str | None
    peak_memory_bytes: int | None
    torch_version: str
    libtorch_version: str | None
    language_version: str
    threads: int
    device_name: str | None
    extra: Mapping[str, Any] = field(default_factory=dict)

    _SEQUENCES = ("losses", "loss_scale", "skipped", "seconds_per_epoch")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """A record from its JSON object (a script's answer, already checked by :func:`harness.records.judge_record`)."""
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values: dict[str, Any] = {name: data.get(name) for name in known}
        for name in cls._SEQUENCES:
            values[name] = _tuple(values[name])
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})

    def to_json(self) -> Json:
        """The record as the script wrote it."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        for name in self._SEQUENCES:
            data[name] = _list(data[name])
        return data | dict(self.extra)

    @property
    def skipped_step_indices(self) -> frozenset[int]:
        """The steps the scaler skipped (empty outside the scaler modes)."""
        return frozenset(step for step, flag in enumerate(self.skipped or ()) if flag)


@dataclass(frozen=True)
class Stats:
    """Statistics of one clock's samples; ``iqr`` and ``cv`` are ``None`` below three samples."""

    n: int
    median: float
    q1: float
    q3: float
    iqr: float | None
    min: float
    max: float
    mean: float
    cv: float | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Stats:
        """The inverse of :meth:`to_json`."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})

    def to_json(self) -> Json:
        """Plain data."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TimingSamples:
    """Every timed round's value, in the order the rounds ran."""

    call_seconds: tuple[float, ...]
    loop_seconds: tuple[float, ...]
    workload_seconds: tuple[float, ...]
    gc_seconds: tuple[float, ...]
    peak_rss_bytes: tuple[int | None, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TimingSamples:
        """The inverse of :meth:`to_json`."""
        return cls(**{f.name: tuple(data[f.name]) for f in dataclasses.fields(cls)})

    def to_json(self) -> Json:
        """Plain data."""
        return {f.name: list(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class Timing:
    """A cell's timed rounds (see :mod:`harness.timing` for the three clocks and the overhead split)."""

    rounds: int
    warmup_calls: int
    call: Stats
    loop: Stats
    workload: Stats
    overhead_seconds: float
    overhead_share: float
    setup_seconds: float
    setup_share: float
    bridge_seconds: float
    gc_seconds: float
    reproducible: bool
    differing_rounds: int
    samples: TimingSamples

    _STATS = ("call", "loop", "workload")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Timing:
        """The inverse of :meth:`to_json`."""
        values = {f.name: data[f.name] for f in dataclasses.fields(cls)}
        values.update({name: Stats.from_json(data[name]) for name in cls._STATS})
        values["samples"] = TimingSamples.from_json(data["samples"])
        return cls(**values)

    def to_json(self) -> Json:
        """Plain data, in the stored key order."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data.update({name: getattr(self, name).to_json() for name in self._STATS})
        data["samples"] = self.samples.to_json()
        return data


@dataclass(frozen=True)
class Efficiency:
    """A cell against the hardware (:func:`harness.efficiency.cell_efficiency` says how each is found)."""

    flops: float
    step_flops: float
    seconds: float
    tflops: float | None
    gemm_dtype: str
    peak_tflops: float | None
    share_of_peak: float | None
    share_note: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Efficiency:
        """The inverse of :meth:`to_json` (``share_note`` came with schema 3)."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name != "share_note"}, share_note=data.get("share_note"))

    def to_json(self) -> Json:
        """Plain data."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Memory:
    """The record call's memory: the worker's resident set (``scope``: what it covers) and the device's peak."""

    peak_rss_bytes: int | None = None
    rss_before_bytes: int | None = None
    scope: str | None = None
    cuda_peak_bytes: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Memory:
        """The inverse of :meth:`to_json`; what a worker reports beyond the known fields is kept in ``extra``."""
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        return cls(**{k: data.get(k) for k in known}, extra={k: v for k, v in data.items() if k not in known})

    def to_json(self) -> Json:
        """Plain data (``extra`` before ``cuda_peak_bytes``, as the worker's report came first)."""
        head = {"peak_rss_bytes": self.peak_rss_bytes, "rss_before_bytes": self.rss_before_bytes, "scope": self.scope}
        return head | dict(self.extra) | {"cuda_peak_bytes": self.cuda_peak_bytes}


@dataclass(frozen=True)
class ReferenceDistance:
    """A cell's distance from float64: max relative loss error over the judged steps, weights relative L2 error."""

    max_rel_loss_error: float | None
    final_weights_rel_error: float | None

    @classmethod
    def from_check(cls, check: Float64Check) -> ReferenceDistance:
        """The distance a float64 check measured (non-finite as ``None``)."""
        distance = check.distance()
        return cls(distance["max_rel_loss_error"], distance["final_weights_rel_error"])

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReferenceDistance:
        """The inverse of :meth:`to_json`."""
        return cls(data["max_rel_loss_error"], data["final_weights_rel_error"])

    def to_json(self) -> Json:
        """Plain data."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CellResult:
    """One cell of the matrix: how it ended, what it recorded, how fast it ran, and how it stands on its own.

    ``time_vs_default``: this cell's median loop time ÷ its frontend's ``default`` cell's (1.8 means
    1.8× the default's time), or ``None`` with ``time_vs_default_note`` saying why.
    """

    cell: Cell
    status: Status
    reason: str | None = None
    record: RunRecord | None = None
    reference_distance: ReferenceDistance | None = None
    wall_seconds: float | None = None
    memory: Memory | None = None
    timing: Timing | None = None
    efficiency: Efficiency | None = None
    gemm_profile: Mapping[str, Any] | None = None
    gemm_problem: str | None = None
    verdict: CellVerdict | None = None
    time_vs_default: float | None = None
    time_vs_default_note: str | None = None

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
        """``python`` or ``r``."""
        return self.cell.frontend

    @property
    def script(self) -> str:
        """The script stem."""
        return self.cell.script

    @property
    def mode(self) -> str:
        """The mode the script ran."""
        return self.cell.mode

    @property
    def device(self) -> str:
        """The device it ran on."""
        return self.cell.device

    @property
    def ok(self) -> bool:
        """Whether a usable record came back."""
        return self.status is Status.OK

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellResult:
        """A stored cell (schema 4)."""

        def optional(name: str, build: Any) -> Any:
            value = data.get(name)
            return None if value is None else build(value)

        return cls(
            cell=Cell(data["frontend"], data["script"], data["mode"], data["device"]),
            status=Status(data["status"]), reason=data.get("reason"),
            record=optional("record", RunRecord.from_json),
            reference_distance=optional("reference_distance", ReferenceDistance.from_json),
            wall_seconds=data.get("wall_seconds"), memory=optional("memory", Memory.from_json),
            timing=optional("timing", Timing.from_json), efficiency=optional("efficiency", Efficiency.from_json),
            gemm_profile=optional("gemm_profile", dict), gemm_problem=data.get("gemm_problem"),
            verdict=optional("verdict", CellVerdict.from_dict),
            time_vs_default=data.get("time_vs_default"), time_vs_default_note=data.get("time_vs_default_note"),
        )

    def to_json(self) -> Json:
        """The cell as stored (key order kept from schema 3, so files diff well across versions)."""

        def optional(value: Any) -> Any:
            return None if value is None else value.to_json()

        return {
            "id": self.id, "pair": self.pair, "frontend": self.frontend, "script": self.script, "mode": self.mode,
            "device": self.device, "status": str(self.status), "reason": self.reason, "record": optional(self.record),
            "reference_distance": optional(self.reference_distance), "wall_seconds": self.wall_seconds,
            "memory": optional(self.memory), "timing": optional(self.timing), "efficiency": optional(self.efficiency),
            "gemm_profile": None if self.gemm_profile is None else dict(self.gemm_profile),
            "gemm_problem": self.gemm_problem, "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "time_vs_default": self.time_vs_default, "time_vs_default_note": self.time_vs_default_note,
        }


@dataclass(frozen=True)
class Peaks:
    """This machine's matmul throughput per GEMM dtype, measured in the run (a dtype maps to ``None`` when it failed)."""

    device: str
    threads: int
    by_dtype: Mapping[str, Mapping[str, Any] | None]
    reason: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Peaks:
        """The inverse of :meth:`to_json`."""
        return cls(data["device"], data["threads"], dict(data["by_dtype"]), data.get("reason"))

    def to_json(self) -> Json:
        """Plain data."""
        return {"device": self.device, "threads": self.threads, "by_dtype": dict(self.by_dtype), "reason": self.reason}


@dataclass(frozen=True)
class ReferenceSummary:
    """The float64 trajectories (losses only), or why there are none; ``replayed``: each one replayed over a run's skipped steps."""

    available: bool
    reason: str | None
    losses: tuple[float, ...] | None = None
    losses_clipped: tuple[float, ...] | None = None
    replayed: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReferenceSummary:
        """The inverse of :meth:`to_json`."""
        return cls(
            bool(data["available"]), data.get("reason"), _tuple(data.get("losses")), _tuple(data.get("losses_clipped")),
            tuple(data.get("replayed") or ()),
        )

    def to_json(self) -> Json:
        """Plain data (an unavailable reference stores only why)."""
        if not self.available:
            return {"available": False, "reason": self.reason}
        return {
            "available": True, "reason": self.reason, "losses": _list(self.losses),
            "losses_clipped": _list(self.losses_clipped), "replayed": [dict(r) for r in self.replayed],
        }


@dataclass(frozen=True)
class MatrixResult:
    """A whole run: the spec, every cell, the pair and figure verdicts, and the machine it ran on."""

    created: str
    wall_seconds: float
    spec: WorkloadSpec
    spec_digest: str
    fixture: Mapping[str, Any]
    environment: Mapping[str, Any]
    protocol: TimingProtocol
    workers: Mapping[str, Any]
    peaks: Peaks
    reference: ReferenceSummary
    reference_seconds: float
    warnings: tuple[str, ...]
    cells: tuple[CellResult, ...]
    judging: str
    pairs: tuple[PairVerdict, ...] = ()
    figures: tuple[FigureCheck, ...] = ()

    @property
    def steps(self) -> int:
        """Optimizer steps of every cell's run (the spec's)."""
        return self.spec.steps

    def map_weights_paths(self, change: Callable[[str], str]) -> MatrixResult:
        """This result with every record's ``weights_path`` changed by ``change`` (made relative, absolute, moved)."""

        def moved(cell: CellResult) -> CellResult:
            if cell.record is None or cell.record.weights_path is None:
                return cell
            return dataclasses.replace(cell, record=dataclasses.replace(cell.record, weights_path=change(cell.record.weights_path)))

        return dataclasses.replace(self, cells=tuple(moved(c) for c in self.cells))

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
                              "read it with harness.results.load_result, which upgrades older versions.")
        try:
            protocol = data["protocol"]
            return cls(
                created=data["created"], wall_seconds=data["wall_seconds"], spec=WorkloadSpec.from_mapping(data["spec"]),
                spec_digest=data["spec_digest"], fixture=dict(data["fixture"]), environment=dict(data["environment"]),
                protocol=TimingProtocol(**{f.name: protocol[f.name] for f in dataclasses.fields(TimingProtocol)}),
                workers=dict(data["workers"]), peaks=Peaks.from_json(data["peaks"]),
                reference=ReferenceSummary.from_json(data["reference"]), reference_seconds=data["reference_seconds"],
                warnings=tuple(data["warnings"]), cells=tuple(CellResult.from_json(c) for c in data["cells"]),
                judging=data["judging"], pairs=tuple(PairVerdict.from_dict(p) for p in data.get("pairs") or ()),
                figures=tuple(FigureCheck(**f) for f in data.get("figures") or ()),
            )
        except (KeyError, TypeError, ValueError) as err:
            what = f"no field {err}" if isinstance(err, KeyError) else str(err)
            raise ResultError(
                f"{source} is not a complete amp-parity result ({what}). Re-run `python -m harness run --json` to write one."
            ) from err

    def to_json(self) -> Json:
        """The result as stored (weights paths as they are in memory; :func:`harness.results.save_result` relativizes them)."""
        return {
            "schema_version": RESULT_SCHEMA_VERSION, "created": self.created, "wall_seconds": self.wall_seconds,
            "spec": self.spec.to_dict(), "spec_digest": self.spec_digest, "fixture": dict(self.fixture),
            "environment": dict(self.environment), "protocol": self.protocol.to_dict(), "workers": dict(self.workers),
            "peaks": self.peaks.to_json(), "reference": self.reference.to_json(), "reference_seconds": self.reference_seconds,
            "warnings": list(self.warnings), "cells": [c.to_json() for c in self.cells], "judging": self.judging,
            "pairs": [p.to_dict() for p in self.pairs], "figures": [f.to_dict() for f in self.figures],
        }
