"""The contract between the harness and the scripts of both languages (docs/contract.md), written once.

What a script receives is the run spec (:func:`script_run_spec` adds what a script needs beyond the workload's
fields: its modes' properties, the optimizer row, the reconciliation switches to apply, and the record's fields); what
it returns is a run record with exactly :data:`RECORD_FIELDS`. Neither language keeps its own copy of these lists:
``py_scripts/common.py`` and ``r_scripts/common.R`` read them from the run spec, so a field added here reaches both
scripts at once, and a script that returns another set of fields fails its own ``make_record`` check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.contract.modes import SCRIPTS
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.patches import patches_for, switch_names

__all__ = ["RECORD_FIELDS", "RECORD_SCHEMA_VERSION", "script_run_spec"]

#: The run record's fields, in the contract's order.
RECORD_FIELDS: tuple[str, ...] = (
    "schema_version", "frontend", "script", "mode", "optimizer", "device", "amp_dtype",
    "losses", "final_loss", "loss_scale", "skipped", "skipped_steps", "injected_steps",
    "output_dtype", "loss_dtype", "weights_path",
    "seconds_total", "seconds_per_epoch", "seconds_workload", "gc_seconds", "clock", "peak_memory_bytes",
    "torch_version", "libtorch_version", "language_version", "threads", "device_name", "lifted_check", "switches",
)
#: 2: seconds_workload, gc_seconds; 3: ``clock``; 4: ``lifted_check`` (the check of the binding a script lifted to run
#: the cell); 5: ``optimizer`` (the row it built), ``injected_steps`` (the steps where it put the overflow it was asked
#: for: a script that ignores an injection fails its cell) and ``switches`` (the reconciliation switches it applied).
RECORD_SCHEMA_VERSION = 5


def script_run_spec(spec_lr: float, script: str, optimizer: str, optimizer_args: dict[str, Any] | None,
                    switches: Sequence[str] = ()) -> dict[str, Any]:
    """The part of the run spec that comes from the contract: ``modes`` (the script's modes and their properties),
    ``optimizer`` (the row, under each language's names), ``switches`` (the reconciliation switches to apply, by name),
    ``patches`` (per language, the replacements the script applies: those switches and the trace's points, see
    :mod:`harness.workload.patches`), ``record_fields`` and ``record_schema_version``."""
    switches = switch_names(switches)
    return {
        "modes": SCRIPTS[script].modes_json(),
        "optimizer": OPTIMIZERS[optimizer].run_spec(spec_lr, (optimizer_args or {}).get(optimizer)),
        "switches": list(switches),
        "patches": patches_for(optimizer, switches),
        "record_fields": list(RECORD_FIELDS),
        "record_schema_version": RECORD_SCHEMA_VERSION,
    }
