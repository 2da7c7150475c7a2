"""A malformed result is refused in one line naming the field.

The real ``report`` command refusing it before writing anything is in ``tests/integration/test_result_shape.py``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from harness.errors import ResultError
from harness.model.shape import check_result_shape
from tests.support import GOLDEN_RESULT

_EXAMPLE = GOLDEN_RESULT
_FIX = "Re-run `python -m harness run --json` to write a complete one."


def _example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_EXAMPLE.read_text())
    return data


def test_a_real_result_passes() -> None:
    """The golden result (a real run, ``tests/data/``) has every field the report needs."""
    check_result_shape(_example(), "example.json")


def _without_spec(d: dict[str, Any]) -> None:
    del d["spec"]


def _cells_nope(d: dict[str, Any]) -> None:
    d["cells"] = "nope"


def _lr_text(d: dict[str, Any]) -> None:
    d["spec"]["lr"] = "fast"


def _cell_not_object(d: dict[str, Any]) -> None:
    d["cells"][1] = 7


def _no_status(d: dict[str, Any]) -> None:
    del d["cells"][0]["status"]


def _losses_text(d: dict[str, Any]) -> None:
    d["cells"][0]["record"]["losses"] = "0.1,0.2"


def _warnings_text(d: dict[str, Any]) -> None:
    d["warnings"] = "none"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_without_spec, "spec must be an object with the run's spec fields, but it is missing."),
        (_cells_nope, "cells must be a list of cells, but got 'nope'."),
        (_lr_text, "spec.lr must be a number, but got 'fast'."),
        (_cell_not_object, "cells[1] must be an object, but got 7."),
        (_no_status, "cells[0].status must be a string, but it is missing."),
        (_losses_text, "cells[0].record.losses must be a list of numbers, but got '0.1,0.2'."),
        (_warnings_text, "warnings must be a list, but got 'none'."),
    ],
)
def test_each_malformed_field_is_named(edit: Any, message: str) -> None:
    """Each planted defect is refused with a ResultError naming the field, what it must be and what it is."""
    result = _example()
    edit(result)
    with pytest.raises(ResultError) as caught:
        check_result_shape(copy.deepcopy(result), "r.json")
    assert str(caught.value) == f"r.json is not a result a report can be drawn from: {message} {_FIX}"
