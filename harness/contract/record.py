"""The run record's fields, declared once (:class:`RecordFields`): name, type (its JSON kind), whether the script may write
null, the record version that added it, and one line of doc.

Everything else reads this: the run spec hands the names and kinds to both languages' scripts (``make_record`` checks a
record against them, R's JSON writer keeps the list kinds arrays), :class:`harness.model.record.RunRecord` is
:class:`RecordFields` with the model's codec (so its JSON form and :mod:`harness.model.shape`'s check of a stored record
are derived from these same fields), and ``docs/contract.md``'s table is :func:`record_table`
(tests/unit/contract/test_contract_docs.py holds them equal).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

from harness.contract.optimizers import DEFAULT_OPTIMIZER

__all__ = [
    "KINDS", "LIST_KINDS", "RECORD_FIELDS", "RECORD_FIELD_NAMES", "RECORD_SCHEMA_VERSION", "RecordField", "RecordFields",
    "record_field_kinds",
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


def _f(doc: str, nullable: bool = False, since: int = 1, always: bool = False, default: Any = dataclasses.MISSING) -> Any:
    """A record field: its doc line, whether a script may write null, the version that added it, whether every stored record
    has it (the rest may be missing or null in a stored file: the codec's ``optional``), and its default (a field added at
    version 4 or later: what an older record meant)."""
    return dataclasses.field(default=default, metadata={"doc": doc, "nullable": nullable, "since": since, "optional": not always})


@dataclass(frozen=True, kw_only=True)
class RecordFields:
    """The run record's fields, declared once, in the order a stored record holds them: each field's type is its JSON kind
    (:data:`KINDS`), its metadata its doc, nullability and version. :class:`harness.model.record.RunRecord` is this class
    with the codec's methods; :data:`RECORD_FIELDS` is this class read as rows."""

    schema_version: int = _f("the record's version (this table's `since` says what each added)", always=True)
    frontend: str = _f("`python` or `r`", always=True)
    script: str = _f("the script pair that ran (the harness refuses a record of another script than asked)", always=True)
    mode: str = _f("the mode that ran (the harness refuses a record of another mode than asked)", always=True)
    device: str = _f("`cpu` or `cuda`", always=True)
    amp_dtype: str = _f("the spec's AMP dtype")
    losses: tuple[float | None, ...] = _f(
        "the loss at every step (float32 values as doubles); a NaN or infinite loss is written as JSON `NaN` / `Infinity` / "
        "`-Infinity` (as Python's `json` reads them), `null` only for a loss not recorded", always=True)
    final_loss: float | None = _f("the last element of `losses`")
    loss_scale: tuple[float, ...] | None = _f(
        "the scale after `update()` at every step; null without a dynamic scaler (checked against GradScaler's rule, "
        "`harness/judge/scaler_oracle.py`)", nullable=True)
    skipped: tuple[bool, ...] | None = _f("whether the scaler skipped each step (the scale went down at its update)", nullable=True)
    skipped_steps: int | None = _f("the number of `true` in `skipped`", nullable=True)
    output_dtype: str | None = _f("the dtype of the model output inside the autocast region, first step (a dtype of the run "
                                  "spec's `dtypes`)")
    loss_dtype: str | None = _f("the dtype of the loss inside the autocast region, first step")
    weights_path: str | None = _f("the run spec's `weights_out`", nullable=True)
    seconds_total: float = _f("the timed training loop")
    seconds_per_epoch: tuple[float, ...] = _f("the loop's time per epoch")
    seconds_workload: float = _f("the whole `run_workload` call: set-up, loop, weights", since=2)
    gc_seconds: float = _f("seconds the language's garbage collector ran inside the loop (Python: 0, it is off)", since=2)
    clock: str | None = _f("the clock that timed the loop and the workload, named with what it reads (docs/timing.md)", since=3)
    peak_memory_bytes: float | None = _f("CUDA peak allocated bytes over the loop (a whole number R may write as a double); null "
                                         "on CPU (the harness measures the worker's RSS)", nullable=True)
    torch_version: str = _f("Python torch's `__version__`; R: `packageVersion(\"torch\")`")
    libtorch_version: str | None = _f("the libtorch the frontend runs on", nullable=True)
    language_version: str = _f("`Python 3.11.7` / `R version 4.2.2 ...`")
    threads: int = _f("threads actually in use (read back after setting)")
    device_name: str | None = _f("`cpu` or the CUDA device's name")
    lifted_check: str | None = _f("the check of the binding the script lifted to run this cell (R's scaler on CPU); null: "
                                  "nothing lifted (always, in Python)", nullable=True, since=4, default=None)
    optimizer: str = _f("the optimizer row the script built (records before version 5 ran plain SGD)", since=5,
                        default=DEFAULT_OPTIMIZER)
    injected_steps: tuple[int, ...] | None = _f(
        "the steps at which the script put the overflow it was asked for (`overflow_steps` in a mode with a dynamic scaler; "
        "`[]` elsewhere): a script that ignores an injection fails its cell", since=5, default=None)
    switches: tuple[str, ...] = _f("the reconciliation switches the script applied (`[]` for a plain run): a reconciled run that "
                                   "did not apply what it was asked cannot prove an entry", since=5, default=())


#: A list kind's element, by its Python type (a list kind is ``list of`` these).
_ELEMENTS = {float: "numbers", int: "ints", bool: "flags", str: "strings"}
#: A scalar kind, by its Python type.
_SCALARS = {int: "int", float: "number", str: "string"}


def _kind(hint: Any) -> str:
    """A field's JSON kind (one of :data:`KINDS`), read off its type: ``X | None`` is X's (whether null is written is the
    field's ``nullable``), ``tuple[X, ...]`` is ``list of`` X's."""
    inner = [a for a in typing.get_args(hint) if a is not type(None)] if isinstance(hint, types.UnionType) else [hint]
    hint = inner[0]
    if typing.get_origin(hint) is tuple:
        element = [a for a in typing.get_args(typing.get_args(hint)[0]) if a is not type(None)] or [typing.get_args(hint)[0]]
        return f"list of {_ELEMENTS[element[0]]}"
    return _SCALARS[hint]


#: The run record's fields, in the order a stored record holds them (and both scripts write them in).
RECORD_FIELDS: tuple[RecordField, ...] = tuple(
    RecordField(f.name, _kind(typing.get_type_hints(RecordFields)[f.name]), f.metadata["nullable"], f.metadata["since"],
                f.metadata["doc"], not f.metadata["optional"])
    for f in dataclasses.fields(RecordFields)
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
