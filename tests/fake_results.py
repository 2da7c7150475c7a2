"""A fake frontend for the comparison and report tests: "r" twins of real Python cells.

A real Python result is built once (the tiny preset, every mode); each twin is a copy of a Python
cell relabelled as another frontend, with its own weights file, into which a test plants exactly one
difference (a nudged weight, a loss trajectory that splits, an extra skipped step, another dtype, a
failed status). What the comparison must find is then known exactly. — httpx ``MockTransport``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from harness.cell_verdict import judge_cell
from harness.matrix import Cell
from harness.measurements import with_time_vs_default
from harness.model import CellResult
from harness.outputs import ResultClaim
from harness.protocol import TimingProtocol
from harness.runner import MatrixRunner, collect_warnings
from harness.spec import MODES, WorkloadSpec
from harness.timing import RoundLog

__all__ = [
    "WeightsEdit",
    "add_times_vs_default",
    "build_python_result",
    "extra_skip",
    "nudge_one_ulp",
    "pair_result",
    "split_losses",
    "steady_timing",
    "twin_cell",
    "with_status",
]

#: A change planted into a twin's final weights (edits the arrays in place).
WeightsEdit = Callable[[dict[str, np.ndarray]], None]


def build_python_result(folder: Path, spec: WorkloadSpec | None = None) -> dict[str, Any]:
    """Run every mode with the Python frontend only; it is published as ``folder/python.json`` (weights beside it).

    Returned as its JSON form (what the views read until they read :class:`harness.model.MatrixResult`).
    """
    spec = spec or WorkloadSpec.from_preset("tiny")
    folder.mkdir(parents=True, exist_ok=True)
    with ResultClaim(folder / "python.json") as claim, MatrixRunner(spec, ("python",), staging=claim.staging) as runner:
        result = claim.publish(runner.run(MODES, protocol=TimingProtocol(rounds=3))).to_json()
    for cell in result["cells"]:  # known, steady rounds: the report's ratios are then exact
        cell["timing"] = steady_timing(cell["record"]["seconds_total"])
    add_times_vs_default(result["cells"])
    return result


def add_times_vs_default(cells: list[dict[str, Any]], paired: bool = False) -> None:
    """Set each cell's ``time_vs_default`` and its note in place, as the runner computes them."""
    timed = with_time_vs_default([CellResult.from_json(c) for c in cells], paired)
    for cell, typed in zip(cells, timed, strict=True):
        cell |= {"time_vs_default": typed.time_vs_default, "time_vs_default_note": typed.time_vs_default_note}


def steady_timing(loop_seconds: float, spread: float = 0.01, overhead: float = 0.001, setup: float | None = None) -> dict[str, Any]:
    """A cell's ``timing`` from three rounds of ``loop_seconds`` × (1, 1 + spread, 1 − spread).

    Each call is ``overhead`` longer than its loop: ``setup`` of it (default half) in the script, the rest the bridge.
    """
    log = RoundLog()
    setup = overhead / 2 if setup is None else setup
    for factor in (1.0, 1.0 + spread, 1.0 - spread):
        loop = loop_seconds * factor
        log.add(loop + overhead, {"seconds_total": loop, "seconds_workload": loop + setup, "gc_seconds": 0.0}, None, True)
    return log.summary().to_json()


def twin_cell(
    cell: dict[str, Any],
    folder: Path,
    frontend: str = "r",
    edit: WeightsEdit | None = None,
    **record_changes: Any,
) -> dict[str, Any]:
    """A copy of ``cell`` as if ``frontend`` had run it, with ``edit`` applied to a copy of its weights.

    ``record_changes`` replace record fields (``losses=...``, ``output_dtype=...``).
    """
    twin = copy.deepcopy(cell)
    twin_id = Cell(frontend, cell["script"], cell["mode"], cell["device"]).id
    twin |= {"id": twin_id, "frontend": frontend}
    record = twin.get("record")
    if record is None:
        return twin
    record |= {"frontend": frontend, **record_changes}
    weights = load_file(cell["record"]["weights_path"])
    if edit is not None:
        edit(weights)
    target = folder / f"{twin_id}.safetensors"
    folder.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(target))
    record["weights_path"] = str(target)
    return twin


def with_status(cell: dict[str, Any], status: str, reason: str) -> dict[str, Any]:
    """``cell`` ended with ``status`` (no record unless it is a numerical failure, as the runner does)."""
    changed = copy.deepcopy(cell) | {"status": status, "reason": reason, "reference_distance": None}
    not_judged = judge_cell(CellResult.from_json(changed), WorkloadSpec.from_preset("tiny"), None, None)  # not ok: not judged
    changed["verdict"] = not_judged.to_dict()
    if status != "numerical_failure":
        changed |= {"record": None, "wall_seconds": None, "memory": None, "timing": None, "efficiency": None}
    return changed


def pair_result(result: dict[str, Any], twins: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``result`` with each twin (keyed by the pair id) placed after its Python cell, as the runner orders them."""
    combined = copy.deepcopy(result)
    cells = []
    for cell in combined["cells"]:
        cells.append(cell)
        if cell["pair"] in twins:
            cells.append(copy.deepcopy(twins[cell["pair"]]))
    add_times_vs_default(cells)
    combined["cells"] = cells
    combined["warnings"] = collect_warnings([CellResult.from_json(c) for c in cells])
    return combined


def nudge_one_ulp(name: str, index: tuple[int, ...]) -> WeightsEdit:
    """Move one element of tensor ``name`` to the next float32 up (one ULP)."""

    def edit(weights: dict[str, np.ndarray]) -> None:
        tensor = weights[name]
        tensor[index] = np.nextafter(tensor[index], np.float32(np.inf), dtype=np.float32)

    return edit


def split_losses(losses: list[float], step: int, offset: float = 1.0) -> list[float]:
    """The trajectory with ``offset`` added from ``step`` on: it splits from the original at ``step``."""
    return [v + offset if i >= step else v for i, v in enumerate(losses)]


def extra_skip(record: dict[str, Any], step: int) -> dict[str, Any]:
    """Record changes for one more skipped step at ``step``: the scale is halved from that step on."""
    skipped = list(record["skipped"])
    skipped[step] = True
    scale = [s / 2 if i >= step else s for i, s in enumerate(record["loss_scale"])]
    return {"skipped": skipped, "loss_scale": scale, "skipped_steps": sum(skipped)}
