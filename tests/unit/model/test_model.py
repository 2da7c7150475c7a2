"""The typed result model: real stored results read into it and written back byte for byte."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from typing import Any

import pytest

from harness.errors import ResultError
from harness.model.record import RunRecord
from harness.model.result import CellResult, MatrixResult, Memory, Status
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec
from tests.model_results import current_schema


@pytest.mark.parametrize("name", ["golden"])
def test_a_real_result_round_trips_byte_for_byte(name: str) -> None:
    """A real result read into the model and written back is the same JSON text, key order included."""
    data = current_schema(name)
    result = MatrixResult.from_json(data)
    assert json.dumps(result.to_json()) == json.dumps(data)
    assert MatrixResult.from_json(result.to_json()) == result


def test_the_model_types_what_it_reads() -> None:
    """Cells, statuses, records, timing and the spec come back as types, not dicts."""
    result = MatrixResult.from_json(current_schema("golden"))
    assert isinstance(result.spec, WorkloadSpec) and result.steps == result.spec.steps == 8
    cell = result.cell("with_autocast-autocast-sgd-r-cpu")
    assert cell.cell == Cell("r", "with_autocast", "autocast", "sgd", "cpu") and cell.pair == "with_autocast-autocast-sgd-cpu"
    assert cell.optimizer == "sgd" and cell.cell.properties.autocast
    assert cell.status is Status.OK and cell.ok
    assert isinstance(cell.record, RunRecord) and len(cell.record.losses) == 8
    assert cell.timing is not None and cell.timing.loop.n == len(cell.timing.samples.loop_seconds) == 5
    assert cell.verdict is not None and cell.verdict.outcome == "pass"
    unsupported = result.cell("cuda_amp_grad_scaler-autocast_scaler-sgd-r-cpu")
    assert unsupported.status is Status.UNSUPPORTED and unsupported.record is None and not unsupported.ok
    assert [p.verdict for p in result.pairs] == ["identical", "identical", "unsupported", "unsupported"]
    with pytest.raises(KeyError):
        result.cell("no-such-cell")


def test_the_model_is_immutable() -> None:
    """A result, its cells and records cannot be changed in place; a stage builds a new cell."""
    result = MatrixResult.from_json(current_schema("golden"))
    cell = result.cells[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.status = Status.ERROR  # type: ignore[misc]
    failed = dataclasses.replace(cell, status=Status.ERROR, reason="planted")
    assert failed.to_json()["status"] == "error" and cell.to_json()["status"] == "ok"


def test_a_record_keeps_what_the_script_wrote() -> None:
    """Integer seconds, non-finite losses and fields this version does not know survive a round trip."""
    record = current_schema("golden")["cells"][1]["record"] | {"future_field": [1, 2]}
    record["losses"] = [math.nan, math.inf, None, *record["losses"][3:]]
    back = RunRecord.from_json(record).to_json()
    assert json.dumps(back) == json.dumps(record)
    assert isinstance(back["gc_seconds"], int)


def test_memory_keeps_what_a_worker_reports_beyond_the_known_fields() -> None:
    """A worker's extra memory fields are stored, not dropped."""
    data = {"peak_rss_bytes": 1, "rss_before_bytes": 0, "scope": "call", "rss_after_bytes": 2, "cuda_peak_bytes": None}
    assert Memory.from_json(data).to_json() == data


def test_status_is_a_closed_set_of_strings() -> None:
    """Every status is its JSON token, and an unknown token is refused."""
    assert [str(s) for s in Status] == ["ok", "unsupported", "skipped", "numerical_failure", "error"]
    with pytest.raises(ValueError):
        Status("crashed")


def test_a_cell_not_run_needs_only_its_key_and_status() -> None:
    """A skipped cell is a key, a status and a reason; every measurement is absent."""
    cell = CellResult(Cell("r", "with_autocast", "default", "adam", "cpu"), Status.SKIPPED, "R torch is not installed")
    data = cell.to_json()
    assert data["id"] == "with_autocast-default-adam-r-cpu" and data["record"] is None and data["time_vs_default"] is None
    assert (data["pair"], data["optimizer"]) == ("with_autocast-default-adam-cpu", "adam")
    assert CellResult.from_json(data) == cell


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda d: d.pop("protocol"), "protocol"),
        (lambda d: d["cells"][0].update(status="crashed"), "crashed"),
        (lambda d: d["spec"].update(batch_size="many"), "batch_size"),
    ],
)
def test_a_damaged_result_is_refused_in_one_line_naming_the_cause(damage: Any, named: str) -> None:
    """A missing section, an unknown status or a bad spec field is a ResultError naming it, not a KeyError."""
    data = copy.deepcopy(current_schema("golden"))
    damage(data)
    with pytest.raises(ResultError, match=named) as caught:
        MatrixResult.from_json(data, "r.json")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("r.json")


def test_another_schema_version_is_not_read_as_this_one() -> None:
    """``from_json`` reads the current version only and says where older ones are upgraded."""
    data = current_schema("golden") | {"schema_version": 3}
    with pytest.raises(ResultError, match="load_result, which upgrades"):
        MatrixResult.from_json(data)


def test_a_version_5_record_keeps_its_optimizer_injections_and_switches() -> None:
    """A record of this version stores the optimizer it built, where it injected and the switches it applied, and comes back
    the same; an older record lacks them (plain SGD, injections not said) and is stored again without them, as it came."""
    old = current_schema("golden")["cells"][4]["record"]
    assert old["schema_version"] < 5 and "optimizer" not in old
    typed = RunRecord.from_json(old)
    assert (typed.optimizer, typed.injected_steps, typed.switches) == ("sgd", None, ())
    assert json.dumps(typed.to_json()) == json.dumps(old)
    new = old | {"schema_version": 5, "lifted_check": None, "optimizer": "adam", "injected_steps": [2], "switches": ["clip_coef_division"]}
    again = RunRecord.from_json(new)
    assert (again.optimizer, again.injected_steps, again.switches) == ("adam", (2,), ("clip_coef_division",))
    assert again.to_json() == new
