"""A script's run record, typed: what one call of ``run_workload`` returned (``docs/contract.md``).

A leaf of the result model (:mod:`harness.model.result` re-exports it). Its fields, their types, the version that added
each and their docs are the contract's (:class:`harness.contract.record.RecordFields`, the one declaration both
languages' scripts read); this class adds the model's codec (:mod:`harness.model.codec`) and what the judges ask of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.contract.record import RECORD_SCHEMA_VERSION, RecordFields
from harness.model.codec import Stored, codec

__all__ = ["RECORD_SCHEMA_VERSION", "RunRecord"]


@dataclass(frozen=True, kw_only=True)
class RunRecord(Stored, RecordFields):
    """A script's run record (``docs/contract.md``), as the script returned it (older versions as they were stored).

    Numbers keep the type the script wrote (R writes ``gc_seconds`` 0 as an integer), so a record stored again is byte
    for byte what came back. A record of an older version lacks the fields later versions added: they read as their
    defaults (or null), and it is stored again without them, as it came (``VERSION_FIELD``).
    """

    VERSION_FIELD: ClassVar[str | None] = "schema_version"

    #: Fields this version does not know, kept and stored again after the known ones.
    extra: Mapping[str, Any] = field(default_factory=dict, metadata=codec(extra=True))

    @property
    def skipped_step_indices(self) -> frozenset[int]:
        """The steps the scaler skipped (empty outside the scaler modes)."""
        return frozenset(step for step, flag in enumerate(self.skipped or ()) if flag)
