"""The shape a result must have before a report is drawn from it: one clear line, not a KeyError.

``report`` reads a file a user may have edited, merged or truncated. The report reads a few dozen
fields of it; each one missing or of the wrong JSON type would surface deep in the markdown or plot
code as a ``KeyError`` or ``TypeError``, after some plots were already written. Checking the fields the
report relies on first means a bad file is refused before anything is written, naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from harness.errors import ResultError

__all__ = ["check_result_shape"]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_numbers(value: object) -> bool:
    return isinstance(value, list) and all(v is None or _is_number(v) for v in value)


#: The spec fields the report prints or computes with, and what each must be.
_SPEC_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "preset": (_is_str, "a string"), "device": (_is_str, "a string"), "amp_dtype": (_is_str, "a string"),
    "batch_size": (_is_int, "a whole number"), "in_size": (_is_int, "a whole number"),
    "out_size": (_is_int, "a whole number"), "num_layers": (_is_int, "a whole number"),
    "num_batches": (_is_int, "a whole number"), "epochs": (_is_int, "a whole number"),
    "seed": (_is_int, "a whole number"), "threads": (_is_int, "a whole number"), "lr": (_is_number, "a number"),
}
#: Every cell's fields the report groups and labels by.
_CELL_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "id": (_is_str, "a string"), "pair": (_is_str, "a string"), "script": (_is_str, "a string"),
    "mode": (_is_str, "a string"), "frontend": (_is_str, "a string"), "device": (_is_str, "a string"),
    "status": (_is_str, "a string"),
}
#: The record fields of an ``ok`` cell that the comparison and the plots read.
_RECORD_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "losses": (_is_numbers, "a list of numbers"), "final_loss": (lambda v: v is None or _is_number(v), "a number"),
    "seconds_total": (_is_number, "a number"),
}


def check_result_shape(result: object, source: str) -> None:
    """Refuse a result the report cannot be drawn from, naming the first field that is missing or wrong.

    Raises:
        ResultError: one line: where in ``source`` the problem is, what was expected, and what to do.
    """
    if not isinstance(result, Mapping):
        _refuse(source, "the result", "a JSON object", result)
    spec = result.get("spec")
    if not isinstance(spec, Mapping):
        _refuse(source, "spec", "an object with the run's spec fields", spec, missing="spec" not in result)
    _check_fields(source, "spec", spec, _SPEC_FIELDS)
    cells = result.get("cells")
    if not isinstance(cells, list):
        _refuse(source, "cells", "a list of cells", cells, missing="cells" not in result)
    for k, cell in enumerate(cells):
        where = f"cells[{k}]"
        if not isinstance(cell, Mapping):
            _refuse(source, where, "an object", cell)
        _check_fields(source, where, cell, _CELL_FIELDS)
        if cell["status"] == "ok":
            record = cell.get("record")
            if not isinstance(record, Mapping):
                _refuse(source, f"{where}.record", "an object (the cell's status is ok)", record, missing="record" not in cell)
            _check_fields(source, f"{where}.record", record, _RECORD_FIELDS)
    for name in ("reference", "protocol", "peaks", "environment", "fixture"):
        if result.get(name) is not None and not isinstance(result[name], Mapping):
            _refuse(source, name, "an object", result[name])
    if result.get("warnings") is not None and not isinstance(result["warnings"], list):
        _refuse(source, "warnings", "a list", result["warnings"])


def _check_fields(
    source: str, where: str, data: Mapping[str, Any], fields: Mapping[str, tuple[Callable[[object], bool], str]]
) -> None:
    for name, (valid, expected) in fields.items():
        if name not in data or not valid(data[name]):
            _refuse(source, f"{where}.{name}", expected, data.get(name), missing=name not in data)


def _refuse(source: str, where: str, expected: str, got: object, missing: bool = False) -> NoReturn:
    shown = "it is missing" if missing else f"got {_short(got)}"
    raise ResultError(
        f"{source} is not a result a report can be drawn from: {where} must be {expected}, but {shown}. "
        "Re-run `python -m harness run --json` to write a complete one."
    )


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
