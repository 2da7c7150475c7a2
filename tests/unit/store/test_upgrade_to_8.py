"""Result schema 7 → 8 (the optimizer axis): a stored schema-7 result loads with every cell, pair, trace and source named for
the optimizer it ran (plain SGD), its float64 reference as SGD's trajectories, and no ×default of a scaler cell.

The input is the golden result (tests/data, stored in schema 3) as schema 7 stored it (:func:`tests.model_results.schema_7`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.model.pair_trace import PairTrace
from harness.store.result_file import load_result, save_result
from tests.model_results import COMMITTED, current_schema, schema_7

_NOT_SHOWN = "not shown: before schema 8 it divided by with_autocast's default cell"


def _v7_file(folder: Path, *edits: Callable[[dict[str, Any]], None]) -> tuple[Path, dict[str, Any]]:
    """The golden result as a schema-7 file in ``folder`` (weights paths at the real golden weights), after ``edits``."""
    data = schema_7("golden")
    for cell in data["cells"]:
        if cell["record"] and cell["record"]["weights_path"]:
            cell["record"]["weights_path"] = str(COMMITTED / cell["record"]["weights_path"])
    for edit in edits:
        edit(data)
    path = folder / "v7.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path, data


def test_every_cell_and_pair_is_named_for_plain_sgd(tmp_path: Path) -> None:
    """Each cell gets the optimizer every earlier result ran (``sgd``) and the ids that name it; the pairs likewise."""
    path, stored = _v7_file(tmp_path)
    assert stored["schema_version"] == 7
    loaded = load_result(path)
    assert [c.id for c in loaded.cells] == [c["id"].replace(f"-{c['frontend']}-", f"-sgd-{c['frontend']}-") for c in stored["cells"]]
    assert [c.pair for c in loaded.cells] == [c["pair"].removesuffix("-cpu") + "-sgd-cpu" for c in stored["cells"]]
    assert {c.optimizer for c in loaded.cells} == {p.optimizer for p in loaded.pairs} == {"sgd"}
    assert [p.pair for p in loaded.pairs] == [
        "with_autocast-default-sgd-cpu", "with_autocast-autocast-sgd-cpu", "cuda_amp_grad_scaler-autocast_scaler-sgd-cpu",
        "cuda_amp_grad_scaler-autocast_scaler_clip-sgd-cpu"]
    assert [p.verdict for p in loaded.pairs] == [p["verdict"] for p in stored["pairs"]]


def test_the_reference_becomes_sgds_trajectories_plain_clipped_and_replayed(tmp_path: Path) -> None:
    """The plain and clipped losses and each replay over skipped steps become SGD's trajectories; the cells are judged against
    them as before (every cell's own verdict passes); no other optimizer has one."""
    path, stored = _v7_file(tmp_path)
    loaded = load_result(path)
    reference, before = loaded.reference, stored["reference"]
    assert [dict(t) for t in reference.trajectories] == current_schema("golden")["reference"]["trajectories"]
    assert reference.losses_for("sgd", False) == tuple(before["losses"])
    assert reference.losses_for("sgd", True) == tuple(before["losses_clipped"])
    for replay in before["replayed"]:
        assert reference.losses_for("sgd", replay["clip"], replay["skipped_steps"]) == tuple(replay["losses"])
    assert reference.losses_for("adam", False) is None and reference.losses_for("sgd", False, [5]) is None
    assert [c.verdict.outcome for c in loaded.cells if c.verdict] == ["pass" if c.ok else "not_judged" for c in loaded.cells]


def test_an_unavailable_reference_stays_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result without a float64 reference keeps only why, and loads with none (its spec over the reference's budget: one
    within it ran its reference, and a result without it is refused, tests/unit/store/test_consistency.py)."""
    monkeypatch.setattr("harness.judge.reference.REFERENCE_MAX_FLOPS", 1.0)
    reason = "float64 reference skipped: 123 GiB of weights"

    def no_reference(data: dict[str, Any]) -> None:
        data["reference"] = {"available": False, "reason": reason}
        for cell in data["cells"]:
            cell["reference_distance"] = None

    loaded = load_result(_v7_file(tmp_path, no_reference)[0])
    assert (loaded.reference.available, loaded.reference.reason, loaded.reference.trajectories) == (False, reason, ())


def test_only_the_scaler_scripts_ratios_to_default_are_withdrawn(tmp_path: Path) -> None:
    """×default now divides by the cell's own script's default: a scaler cell's ratio (and its note) spoke of with_autocast's
    default, so neither is shown; with_autocast's ratios and the notes of cells that did not run are kept."""
    def scaler_ratio(data: dict[str, Any]) -> None:
        data["cells"][4] |= {"time_vs_default": 1.3, "time_vs_default_note": "median of 5 interleaved rounds, CV 1.0%"}

    path, stored = _v7_file(tmp_path, scaler_ratio)
    loaded = load_result(path)
    for before, after in zip(stored["cells"], loaded.cells, strict=True):
        if after.script == "cuda_amp_grad_scaler" and after.ok:
            assert (after.time_vs_default, after.time_vs_default_note) == (None, _NOT_SHOWN), after.id
        else:
            assert (after.time_vs_default, after.time_vs_default_note) == (before["time_vs_default"], before["time_vs_default_note"])
    assert loaded.cells[0].time_vs_default == 1.0 and loaded.cells[5].time_vs_default_note == "cell unsupported"


def test_traces_and_a_merges_sources_name_the_new_ids(tmp_path: Path) -> None:
    """A stored trace's pair id and a merge's list of its inputs' cell ids are renamed like the cells they name."""
    trace = PairTrace("cuda_amp_grad_scaler-autocast_scaler_clip-cpu", ("python", "r"), (300, 300), 300, None, (7, "param.stepped"))
    old_ids = ["with_autocast-default-python-cpu", "cuda_amp_grad_scaler-autocast_scaler_clip-r-cpu"]

    def traced_and_merged(data: dict[str, Any]) -> None:
        data["traces"] = [trace.to_json()]
        data["sources"] = [{"file": "a.json", "created": data["created"], "host": "h", "frontends": ["python", "r"],
                            "devices": ["cpu"], "cells": old_ids, "environment": {}}]

    loaded = load_result(_v7_file(tmp_path, traced_and_merged)[0])
    assert [t.pair for t in loaded.traces] == ["cuda_amp_grad_scaler-autocast_scaler_clip-sgd-cpu"]
    assert loaded.sources[0]["cells"] == ["with_autocast-default-sgd-python-cpu", "cuda_amp_grad_scaler-autocast_scaler_clip-sgd-r-cpu"]
    assert {k: v for k, v in loaded.sources[0].items() if k != "cells"} == {
        "file": "a.json", "created": loaded.created, "host": "h", "frontends": ["python", "r"], "devices": ["cpu"], "environment": {}}


@pytest.mark.parametrize("edits", [(), ("traced",)])
def test_an_upgraded_result_saves_as_the_current_schema_and_loads_back_the_same(tmp_path: Path, edits: tuple[str, ...]) -> None:
    """What the upgrades make is a whole result of the current schema: saved, it is stored as that version and loads back equal."""
    def traced(data: dict[str, Any]) -> None:
        data["traces"] = [PairTrace("with_autocast-default-cpu", ("python", "r"), (10, 10), 10).to_json()]

    loaded = load_result(_v7_file(tmp_path, *([traced] if edits else []))[0])
    (tmp_path / "out").mkdir()
    save_result(loaded, tmp_path / "out" / "v8.json")
    assert json.loads((tmp_path / "out" / "v8.json").read_text())["schema_version"] == 10
    assert load_result(tmp_path / "out" / "v8.json") == loaded
