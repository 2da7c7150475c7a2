"""What the harness measured of a cell, typed: timing statistics, efficiency, memory, distance from float64.

Leaves of the result model (:mod:`harness.model` re-exports them): they import nothing of the harness
but the stored float64 check they summarize.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.verdicts import Float64Check

__all__ = ["Efficiency", "Memory", "ReferenceDistance", "Stats", "Timing", "TimingSamples"]

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

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return dataclasses.asdict(self)
