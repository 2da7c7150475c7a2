"""A script's run record, typed: what one call of ``run_workload`` returned (``docs/contract.md``).

A leaf of the result model (:mod:`harness.model.result` re-exports it); its fields, their kinds and the version that
added each are the contract's (:mod:`harness.contract.record`), the one list both languages' scripts read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.contract.optimizers import DEFAULT_OPTIMIZER
from harness.contract.record import RECORD_FIELDS, RECORD_SCHEMA_VERSION

__all__ = ["RECORD_SCHEMA_VERSION", "RunRecord"]


def _tuple(values: Any) -> tuple[Any, ...] | None:
    return None if values is None else tuple(values)


def _list(values: tuple[Any, ...] | None) -> list[Any] | None:
    return None if values is None else list(values)


@dataclass(frozen=True)
class RunRecord:
    """A script's run record (``docs/contract.md``), as the script returned it (older versions as they were stored).

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
    #: The optimizer row the script built (records before version 5 ran plain SGD).
    optimizer: str = DEFAULT_OPTIMIZER
    #: The steps at which the script put the overflow it was asked for (version 5; older records: not said, None).
    injected_steps: tuple[int, ...] | None = None
    #: The reconciliation switches the script applied (docs/known-differences.md).
    switches: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    _SEQUENCES: ClassVar[tuple[str, ...]] = tuple(f.name for f in RECORD_FIELDS if f.is_list and f.name != "switches")
    #: Fields each record version from 4 on added, which an older record does not have (stored again as it came; the
    #: fields versions 2 and 3 added are read as null from a record that lacks them, and stored so).
    _ADDED_IN: ClassVar[dict[str, int]] = {f.name: f.since for f in RECORD_FIELDS if f.since >= 4}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """A record from its JSON object (a script's answer, already checked by :func:`harness.judge.record_check.judge_record`)."""
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values: dict[str, Any] = {name: data[name] for name in known if name in data}
        for name in cls._SEQUENCES:
            values[name] = _tuple(values.get(name))
        values["switches"] = tuple(values.get("switches") or ())
        for name in known - set(values):  # an older record lacks the fields later versions added: their defaults
            if name not in cls._ADDED_IN:
                values[name] = None
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})

    def to_json(self) -> dict[str, Any]:
        """The record as the script wrote it."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        for name in self._SEQUENCES:
            data[name] = _list(data[name])
        data["switches"] = list(self.switches)
        for name, version in self._ADDED_IN.items():  # an older record has no such field: stored again as it came
            if self.schema_version < version:
                del data[name]
        return data | dict(self.extra)

    @property
    def skipped_step_indices(self) -> frozenset[int]:
        """The steps the scaler skipped (empty outside the scaler modes)."""
        return frozenset(step for step, flag in enumerate(self.skipped or ()) if flag)
