"""A malformed result is refused in one line naming the field, by ``load_result`` and by every command that reads one.

The real ``report`` command refusing it before writing anything is in ``tests/integration/test_result_shape.py``.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ResultError
from harness.model.result import check_result_shape, check_upgradable_shape
from harness.store.result_file import load_result, stored_form
from tests.support import GOLDEN_RESULT, Edit, golden_result, run_cli, set_field

_FIX = "Re-run `python -m harness run --json` to write a complete one."


def _example() -> dict[str, Any]:
    """The golden result as the current schema stores it (weights paths relative to ``tests/data``)."""
    stored: dict[str, Any] = json.loads(json.dumps(stored_form(golden_result(), GOLDEN_RESULT)))  # a copy: edits stay in the test
    return stored


def test_a_real_result_passes() -> None:
    """The golden result (a real run, ``tests/data/``) has every field, each of its type, in its current form and as stored."""
    check_result_shape(_example(), "example.json")
    check_upgradable_shape(json.loads(GOLDEN_RESULT.read_text()), "golden.json")


def test_a_timing_without_its_floor_passes() -> None:
    """A timing stored before the noise floor was measured (no ``floor``, no ``samples.floor_seconds``) is still a result."""
    data = _example()
    timing = data["cells"][0]["timing"]
    del timing["floor"], timing["samples"]["floor_seconds"]
    check_result_shape(data, "example.json")


def _delete(*keys: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        target = data
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]

    return edit


def _a_trace(**changes: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        trace = {"pair": "with_autocast-default-cpu", "frontends": ["python", "r"], "points": [3, 3], "identical_points": 3,
                 "first_difference": None, "last_identical": [0, "loss"], "triggers": {}, "reproduced": True, "seconds": 0.1,
                 "error": None}
        data["traces"] = [trace | changes]

    return edit


#: Each hand edit, and the field and clause its one line names (the golden cells: 0 default-python, 1 default-r, ...).
_CASES: dict[str, tuple[Edit, str]] = {
    "no spec": (_delete("spec"),
        "spec must be an object (a complete, validated run description), but it is missing."),
    "cells not a list": (set_field("cells", value="nope"),
        "cells must be a non-empty list of objects (one cell of the matrix), but got 'nope'."),
    "no cells": (set_field("cells", value=[]),
        "cells must be a non-empty list of objects (one cell of the matrix), but got []."),
    "lr text": (set_field("spec", "lr", value="fast"),
        "spec.lr must be a number, but got 'fast'."),
    "spec value out of range": (set_field("spec", "epochs", value=0),
        "spec.epochs must be a whole number >= 1, but got 0."),
    "cell not an object": (set_field("cells", 1, value=7),
        "cells[1] must be an object (one cell of the matrix), but got 7."),
    "no status": (_delete("cells", 0, "status"),
        "cells[0].status must be one of ('ok', 'unsupported', 'skipped', 'numerical_failure', 'error'), but it is missing."),
    "unknown status": (set_field("cells", 0, "status", value="great"),
        "cells[0].status must be one of ('ok', 'unsupported', 'skipped', 'numerical_failure', 'error'), but got 'great'."),
    "losses text": (set_field("cells", 0, "record", "losses", value="0.1,0.2"),
        "cells[0].record.losses must be a list of numbers, but got '0.1,0.2'."),
    "warnings text": (set_field("warnings", value="none"),
        "warnings must be a list of strings, but got 'none'."),
    "traces not a list": (set_field("traces", value={"a": 1}),
        "traces must be a list of objects (a pair traced point by point), but got {'a': 1}."),
    "a trace with no frontends": (_a_trace(frontends=[]),
        "traces[0].frontends must be a list of two strings, but got []."),
    "a trace without its frontends": (_a_trace(frontends=None),
        "traces[0].frontends must be a list of two strings, but got None."),
    "a trace's points as text": (_a_trace(points="3"),
        "traces[0].points must be a list of two whole numbers, but got '3'."),
    "frontends as a string": (set_field("frontends", value="python,r"),
        "frontends must be a non-empty list of strings, but got 'python,r'."),
    "a frontend named twice": (set_field("frontends", value=["python", "r", "python"]),
        "frontends must be a list naming each frontend once"),
    "a cell of no frontend": (set_field("frontends", value=["python"]),
        "cells[1].frontend must be one of the result's frontends (python), but got 'r'."),
    "an unknown baseline": (set_field("baseline", value="julia"),
        "baseline must be one of the result's frontends (python, r), but got 'julia'."),
    "a baseline not a string": (set_field("baseline", value=3),
        "baseline must be a string, but got 3."),
    "installation facts of the wrong type": (set_field("cells", 0, "installation", value={"name": "python", "language": "python",
                                                                                      "libtorch_build": 5}),
        "cells[0].installation.libtorch_build must be a string or null, but got 5."),
    "an installation of no language": (set_field("cells", 0, "installation", value={"name": "python", "language": "julia"}),
        "cells[0].installation.language must be one of ('python', 'r'), but got 'julia'."),
    "installation env not strings": (set_field("cells", 0, "installation", value={"name": "python", "language": "python",
                                                                             "env": {"X": 1}}),
        "cells[0].installation.env.X must be a string, but got 1."),
    "text for a number": (set_field("cells", 0, "efficiency", "tflops", value="fast"),
        "cells[0].efficiency.tflops must be a number or null, but got 'fast'."),
    "timing stats missing": (_delete("cells", 0, "timing", "loop"),
        "cells[0].timing.loop must be an object (statistics of one clock's samples), but it is missing."),
    "a floor as text": (set_field("cells", 0, "timing", "floor", value="quiet"),
        "cells[0].timing.floor must be an object (statistics of one clock's samples) or null, but got 'quiet'."),
    "floor seconds as text": (set_field("cells", 0, "timing", "samples", "floor_seconds", value="few"),
        "cells[0].timing.samples.floor_seconds must be a list of numbers, but got 'few'."),
    "memory text": (set_field("cells", 0, "memory", value="lots"),
        "cells[0].memory must be an object (the record call's memory) or null, but got 'lots'."),
    "a peak's samples as text": (set_field("peaks", "by_dtype", "float32", "samples_tflops", value="many"),
        "peaks.by_dtype.float32.samples_tflops must be a list of numbers, but got 'many'."),
    "reference losses as text": (set_field("reference", "trajectories", 0, "losses", value="1,2"),
        "reference.trajectories[0].losses must be a list of numbers, but got '1,2'."),
    "a cell without its optimizer": (_delete("cells", 0, "optimizer"),
        "cells[0].optimizer must be a string, but it is missing."),
    "a trace file's points as text": (set_field("cells", 0, "trace", value={"path": "t", "sha256": "0", "points": "many"}),
        "cells[0].trace.points must be a whole number, but got 'many'."),
    "kept weights as a list": (set_field("cells", 0, "weights", value=[]),
        "cells[0].weights must be an object (one cell's final weights as the result keeps them) or null, but got []."),
    "provenance of another source": (set_field("provenance", "source", value="a friend"),
        "provenance.source must be one of ('checkout', 'installed', 'unknown'), but got 'a friend'."),
    "a pair trace's switches as text": (set_field("traces", value=[{"pair": "p", "frontends": ["python", "r"], "points": [1, 1],
                                                               "identical_points": 1, "switches": "all"}]),
        "traces[0].switches must be a list of strings, but got 'all'."),
    "protocol rounds 0": (set_field("protocol", "rounds", value=0),
        "protocol.rounds must be an integer ≥ 1 (≥ 3 for a spread), but got 0."),
    "workers text": (set_field("workers", value="two"),
        "workers must be an object of objects (a worker's start-ups), but got 'two'."),
    "a source's cells as text": (set_field("sources", value=[{"file": "a.json", "created": "", "host": "", "frontends": [],
                                                         "devices": [], "cells": "all", "environment": {}}]),
        "sources[0].cells must be a list of strings, but got 'all'."),
    "a gemm profile's share as text": (set_field("cells", 0, "gemm_profile", value={"half_share": "most"}),
        "cells[0].gemm_profile.half_share must be a number or null, but got 'most'."),
    "a record's skipped as numbers": (set_field("cells", 4, "record", "skipped", value=[0, 1]),
        "cells[4].record.skipped[0] must be true or false, but got 0."),
    "the R environment as text": (set_field("environment", "r", value="x"),
        "environment.r must be an object or null, but got 'x'."),
    "a peak's layout without its layouts": (set_field("peaks", "by_dtype", "float32", "layouts_tflops", value=None),
        "peaks.by_dtype.float32.layouts_tflops must be an object of each layout's TFLOP/s"),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_each_malformed_field_is_named(case: str) -> None:
    """Each planted defect is refused with a ResultError naming the field, what it must be and what it is."""
    edit, message = _CASES[case]
    result = _example()
    edit(result)
    with pytest.raises(ResultError) as caught:
        check_result_shape(copy.deepcopy(result), "r.json")
    assert str(caught.value).startswith(f"r.json is not a result a report can be drawn from: {message}")
    assert str(caught.value).endswith(_FIX) and "\n" not in str(caught.value)


@pytest.mark.parametrize("case", list(_CASES))
def test_report_refuses_each_hand_edit_in_one_line(case: str, tmp_path: Path) -> None:
    """``report`` on the golden result with one field edited exits non-zero with one ``error:`` line and writes nothing: never
    an ``unexpected …`` line or a traceback (a non-list ``traces`` gave ``unexpected TypeError``)."""
    edit, message = _CASES[case]
    data = json.loads(json.dumps(stored_form(golden_result(), tmp_path / "golden.json")))
    edit(data)
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    done = run_cli("report", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.startswith(f"error: {path} is not a result a report can be drawn from: {message}"), done.stderr
    assert len(done.stderr.splitlines()) == 1 and "unexpected" not in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("edit", "message"), [
    (set_field("reference", "trajectories", 0, "losses", value=[1.0, 0.5]), "reference.trajectories[0].losses is 2 losses but the spec "
                                                                          "runs 8 steps"),
    (set_field("cells", 2, "record", "weights_path", value="golden.weights/with_autocast-default-python-cpu.safetensors"),
     "cells[2].record.weights_path is '/"),
    (set_field("cells", 1, "installation", value={"name": "r", "language": "python"}),
     "cells[1].installation.language is 'python' but the cell's frontend is 'r'"),
    (set_field("cells", 0, "installation", value={"name": "py28", "language": "python"}),
     "cells[0].installation.name is 'py28' but the cell's frontend is 'python'"),
], ids=["reference-shorter-than-the-run", "two-cells-one-weights-file", "r-running-python", "installation-of-another-name"])
def test_a_value_that_cannot_be_is_refused_naming_the_field(tmp_path: Path, edit: Edit, message: str) -> None:
    """A field of the right type whose value contradicts the rest of the result is refused on load: a reference shorter than
    the run (it ended in ``unexpected IndexError``), a cell reading another cell's weights (the pair then read as identical)."""
    data = _example()
    edit(data)
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "golden.weights").symlink_to(GOLDEN_RESULT.parent / "golden.weights")  # the weights paths are relative
    with pytest.raises(ResultError) as refused:
        load_result(path)
    assert str(refused.value).startswith(f"{path}: {message}"), str(refused.value)
    assert "\n" not in str(refused.value)
    if "weights_path" in message:
        assert "but cells[0] names that file already" in str(refused.value)


def test_stored_verdicts_of_any_shape_are_not_read(tmp_path: Path) -> None:
    """Stored verdicts are judged again on load, never read: pairs, targets and a cell's verdict of the wrong shape load."""
    data = json.loads(json.dumps(stored_form(golden_result(), tmp_path / "golden.json")))
    data["pairs"], data["targets"] = "none", [1, 2]
    data["cells"][0]["verdict"] = {"outcome": 7}
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    loaded = load_result(path)
    assert [p.verdict for p in loaded.pairs] == [p.verdict for p in golden_result().pairs]
    assert loaded.cells[0].verdict is not None and loaded.cells[0].verdict.outcome == "pass"


def test_nan_and_infinite_numbers_are_numbers() -> None:
    """A NaN loss is a number (what a diverged run records): the shape check leaves it to the consistency check."""
    data = _example()
    data["cells"][0]["record"]["losses"][0] = math.nan
    check_result_shape(data, "r.json")
