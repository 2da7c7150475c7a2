"""The run spec: everything a script receives for one call of ``run_workload(spec, mode)``, as a typed frozen value.

Its JSON (:meth:`RunSpec.to_json`) is what both languages read (docs/contract.md's table lists every field). The parts
that are the contract's own, the record's fields and kinds, the record's version and the dtype table, are added by
``to_json`` itself, so no caller can hand a script a run spec without them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.contract.dtypes import dtype_table
from harness.contract.record import RECORD_SCHEMA_VERSION, record_field_kinds

__all__ = ["RunSpec"]


@dataclass(frozen=True)
class RunSpec:
    """One call's run spec. ``workload``: the workload spec's fields (``WorkloadSpec.to_json()``), resolved; ``modes``:
    the script's modes' properties by name; ``optimizer``: the optimizer row under each language's names; ``switches``:
    the reconciliation switches to apply; ``patches``: per language, the replacements the script applies; ``feature``:
    the loop feature's row or ``None``."""

    workload: Mapping[str, Any]
    fixture_path: str
    weights_out: str | None
    scaler_lift: bool
    collect_before_loop: str
    modes: Mapping[str, Mapping[str, Any]]
    optimizer: Mapping[str, Any]
    switches: tuple[str, ...]
    patches: Mapping[str, Any]
    #: The loop feature's row (harness/workload/features.py), or ``None`` for the plain loop.
    feature: Mapping[str, Any] | None = None
    #: The model's row (:meth:`harness.contract.models.Model.run_spec`): its name, layers and parameters.
    model: Mapping[str, Any] | None = None
    #: A ``resume`` row's checkpoint to load in place of the run's own (another run's, e.g. the other language's:
    #: docs/contract.md#checkpoint), or ``None``: the matrix's calls resume from their own.
    resume_from: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain data for a script of either language, in docs/contract.md's order."""
        return {
            **self.workload, "fixture_path": self.fixture_path, "weights_out": self.weights_out, "scaler_lift": self.scaler_lift,
            "collect_before_loop": self.collect_before_loop, "modes": dict(self.modes), "optimizer": dict(self.optimizer),
            "switches": list(self.switches), "patches": dict(self.patches), "model": None if self.model is None else dict(self.model),
            "feature": None if self.feature is None else dict(self.feature), "resume_from": self.resume_from,
            "record_fields": record_field_kinds(),
            "record_schema_version": RECORD_SCHEMA_VERSION, "dtypes": dtype_table(),
        }
