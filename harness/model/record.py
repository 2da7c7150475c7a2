"""A script's run record, typed: what one call of ``run_workload`` returned (``docs/contract.md``, schema 3).

A leaf of the result model (:mod:`harness.model.result` re-exports it): it imports nothing of the harness.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RECORD_SCHEMA_VERSION", "RunRecord"]

#: The run record's version, written by py_scripts/common.py and r_scripts/common.R (2: seconds_workload,
#: gc_seconds; 3: ``clock``, the clock the frontend timed its loop with; 4: ``lifted_check``, the check of the
#: binding a script lifted to run the cell, e.g. R torch's CUDA-only scaler on CPU).
RECORD_SCHEMA_VERSION = 4


def _tuple(values: Any) -> tuple[Any, ...] | None:
    return None if values is None else tuple(values)


def _list(values: tuple[Any, ...] | None) -> list[Any] | None:
    return None if values is None else list(values)


@dataclass(frozen=True)
class RunRecord:
    """A script's run record (schema 4, ``docs/contract.md``), as the script returned it.

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
    #: What the script lifted from the binding to run this cell (R's scaler on CPU), or None: nothing.
    lifted_check: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    _SEQUENCES = ("losses", "loss_scale", "skipped", "seconds_per_epoch")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """A record from its JSON object (a script's answer, already checked by :func:`harness.judge.record_check.judge_record`)."""
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values: dict[str, Any] = {name: data.get(name) for name in known}
        for name in cls._SEQUENCES:
            values[name] = _tuple(values[name])
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})

    def to_json(self) -> dict[str, Any]:
        """The record as the script wrote it."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        for name in self._SEQUENCES:
            data[name] = _list(data[name])
        if self.schema_version < 4:  # an older record has no such field: stored again as it came
            del data["lifted_check"]
        return data | dict(self.extra)

    @property
    def skipped_step_indices(self) -> frozenset[int]:
        """The steps the scaler skipped (empty outside the scaler modes)."""
        return frozenset(step for step, flag in enumerate(self.skipped or ()) if flag)
