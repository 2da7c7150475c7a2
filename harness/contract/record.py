"""The run record's fields, declared once: name, JSON kind, whether the script may write null, the record version that
added it, and one line of doc.

Everything else reads this: the run spec hands the names and kinds to both languages' scripts (``make_record`` checks a
record against them, R's JSON writer keeps the list kinds arrays), :class:`harness.model.record.RunRecord` takes its
lists and version steps from it, :mod:`harness.model.shape` its checks, and ``docs/contract.md``'s table is
:func:`record_table` (tests/unit/contract/test_contract_docs.py holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "KINDS", "LIST_KINDS", "RECORD_FIELDS", "RECORD_FIELD_NAMES", "RECORD_SCHEMA_VERSION", "RecordField", "record_field_kinds",
    "record_table",
]

#: A field's JSON kind, and how docs/contract.md writes it: a scalar, or a list of one (``list of numbers``: elements
#: may be null, a loss not recorded). A list kind is named ``list of ...``: R's writer keeps those fields JSON arrays
#: even with one element or none (it would unbox a length-1 vector), reading the kinds from the run spec.
KINDS: dict[str, str] = {
    "int": "int", "number": "float", "string": "str",
    "list of numbers": "list[float]", "list of ints": "list[int]", "list of flags": "list[bool]", "list of strings": "list[str]",
}
#: The kinds that are JSON arrays.
LIST_KINDS = frozenset(kind for kind in KINDS if kind.startswith("list of "))


@dataclass(frozen=True)
class RecordField:
    """One field of the run record. ``always``: every stored record of any version has it, never null (the rest may be
    missing or null in a stored file, which :mod:`harness.model.shape` accepts)."""

    name: str
    kind: str
    nullable: bool
    since: int
    doc: str
    always: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS or not 1 <= self.since:
            raise ValueError(f"record field {self.name}: kind must be one of {', '.join(KINDS)} and since >= 1")

    @property
    def is_list(self) -> bool:
        """The field is a JSON array."""
        return self.kind in LIST_KINDS


def _f(name: str, kind: str, doc: str, nullable: bool = False, since: int = 1, always: bool = False) -> RecordField:
    return RecordField(name, kind, nullable, since, doc, always)


#: The run record's fields, in the contract's order (the order both scripts write them in).
RECORD_FIELDS: tuple[RecordField, ...] = (
    _f("schema_version", "int", "the record's version (this table's `since` says what each added)", always=True),
    _f("frontend", "string", "`python` or `r`", always=True),
    _f("script", "string", "the script pair that ran (the harness refuses a record of another script than asked)", always=True),
    _f("mode", "string", "the mode that ran (the harness refuses a record of another mode than asked)", always=True),
    _f("optimizer", "string", "the optimizer row the script built (records before version 5 ran plain SGD)", since=5),
    _f("device", "string", "`cpu` or `cuda`", always=True),
    _f("amp_dtype", "string", "the spec's AMP dtype"),
    _f("losses", "list of numbers", "the loss at every step (float32 values as doubles); a NaN or infinite loss is written as JSON "
       "`NaN` / `Infinity` / `-Infinity` (as Python's `json` reads them), `null` only for a loss not recorded", always=True),
    _f("final_loss", "number", "the last element of `losses`"),
    _f("loss_scale", "list of numbers", "the scale after `update()` at every step; null without a dynamic scaler (checked against "
       "GradScaler's rule, `harness/judge/scaler_oracle.py`)", nullable=True),
    _f("skipped", "list of flags", "whether the scaler skipped each step (the scale went down at its update)", nullable=True),
    _f("skipped_steps", "int", "the number of `true` in `skipped`", nullable=True),
    _f("injected_steps", "list of ints", "the steps at which the script put the overflow it was asked for (`overflow_steps` in a "
       "mode with a dynamic scaler; `[]` elsewhere): a script that ignores an injection fails its cell", since=5),
    _f("output_dtype", "string", "the dtype of the model output inside the autocast region, first step (a dtype of the "
       "run spec's `dtypes`)"),
    _f("loss_dtype", "string", "the dtype of the loss inside the autocast region, first step"),
    _f("weights_path", "string", "the run spec's `weights_out`", nullable=True),
    _f("seconds_total", "number", "the timed training loop"),
    _f("seconds_per_epoch", "list of numbers", "the loop's time per epoch"),
    _f("seconds_workload", "number", "the whole `run_workload` call: set-up, loop, weights", since=2),
    _f("gc_seconds", "number", "seconds the language's garbage collector ran inside the loop (Python: 0, it is off)", since=2),
    _f("clock", "string", "the clock that timed the loop and the workload, named with what it reads (docs/timing.md)", since=3),
    _f("peak_memory_bytes", "number", "CUDA peak allocated bytes over the loop (a whole number R may write as a double); "
       "null on CPU (the harness measures the worker's RSS)", nullable=True),
    _f("torch_version", "string", "Python torch's `__version__`; R: `packageVersion(\"torch\")`"),
    _f("libtorch_version", "string", "the libtorch the frontend runs on", nullable=True),
    _f("language_version", "string", "`Python 3.11.7` / `R version 4.2.2 ...`"),
    _f("threads", "int", "threads actually in use (read back after setting)"),
    _f("device_name", "string", "`cpu` or the CUDA device's name"),
    _f("lifted_check", "string", "the check of the binding the script lifted to run this cell (R's scaler on CPU); null: "
       "nothing lifted (always, in Python)", nullable=True, since=4),
    _f("switches", "list of strings", "the reconciliation switches the script applied (`[]` for a plain run): a reconciled run "
       "that did not apply what it was asked cannot prove an entry", since=5),
)
#: The record's version: the newest ``since``. 2: seconds_workload, gc_seconds; 3: clock; 4: lifted_check; 5: optimizer,
#: injected_steps, switches.
RECORD_SCHEMA_VERSION = max(f.since for f in RECORD_FIELDS)


#: The fields' names, in order.
RECORD_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in RECORD_FIELDS)


def record_field_kinds() -> dict[str, str]:
    """The run spec's ``record_fields``: each field's kind by name, in the contract's order."""
    return {f.name: f.kind for f in RECORD_FIELDS}


def record_table() -> str:
    """The run record's table in docs/contract.md (Markdown), from the declaration."""
    rows = ["| field | type | since | meaning |", "|---|---|---|---|"]
    rows += [f"| `{f.name}` | {KINDS[f.kind]}{' or null' if f.nullable else ''} | {f.since} | {f.doc} |" for f in RECORD_FIELDS]
    return "\n".join(rows)
