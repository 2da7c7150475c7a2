"""A fake second frontend on the golden result: typed twins of its real cells, each with one planted difference.

The golden result (``tests/data``, a real run of both frontends) is read once into the model; a test
edits its copy with :func:`dataclasses.replace` only. A twin is a copy of a real cell relabelled as
another frontend, with its own weights file into which exactly one difference is planted (a nudged
weight, a loss trajectory that splits, an extra skipped step, another dtype, a failed status), so what
the comparison must find is known exactly. NumPy and safetensors only: no torch. — httpx ``MockTransport``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from harness.model.record import RunRecord
from harness.model.result import CellResult, MatrixResult, Status
from harness.model.timing import RoundLoad, RoundLog, Timing
from harness.workload.matrix import Cell
from tests.support import golden_result

__all__ = [
    "WeightsEdit",
    "by_mode",
    "extra_skip",
    "golden",
    "nudge_one_ulp",
    "replace_cells",
    "split_losses",
    "steady_timing",
    "twin_cell",
    "with_record",
    "with_status",
]


#: A change planted into a twin's final weights (edits the arrays in place).
WeightsEdit = Callable[[dict[str, np.ndarray]], None]


def golden() -> MatrixResult:
    """The golden result as the model (immutable, so one copy serves every test)."""
    return golden_result()


def by_mode(result: MatrixResult, frontend: str = "python") -> dict[str, CellResult]:
    """``frontend``'s cells of ``result`` by mode, without what the result kept of their weights (their comparisons name
    the result's other cells, which a twin replaces: a twin is judged from the weights files)."""
    return {c.mode: dataclasses.replace(c, weights=None) for c in result.cells if c.frontend == frontend}


def with_record(cell: CellResult, **changes: Any) -> CellResult:
    """``cell`` with record fields replaced (``losses=...``, ``output_dtype=...``); sequences become tuples."""
    assert cell.record is not None, "only a cell that ran has a record"
    typed = {k: tuple(v) if isinstance(v, list) else v for k, v in changes.items()}
    return dataclasses.replace(cell, record=dataclasses.replace(cell.record, **typed))


def twin_cell(cell: CellResult, folder: Path, frontend: str = "r", edit: WeightsEdit | None = None, **record_changes: Any) -> CellResult:
    """A copy of ``cell`` as if ``frontend`` had run it, with ``edit`` applied to its own copy of the weights."""
    key = Cell(frontend, cell.script, cell.mode, cell.optimizer, cell.device)
    twin = dataclasses.replace(cell, cell=key, weights=None)  # nothing kept of its own weights: judged from its file
    if cell.record is None:
        return twin
    weights = load_file(str(cell.record.weights_path))
    if edit is not None:
        edit(weights)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{key.id}.safetensors"
    save_file(weights, str(target))
    return with_record(twin, **{"frontend": frontend, "weights_path": str(target), **record_changes})


def with_status(cell: CellResult, status: str, reason: str) -> CellResult:
    """``cell`` ended with ``status``: no record, timing or verdict unless it is a numerical failure, as the runner does."""
    changed = dataclasses.replace(cell, status=Status(status), reason=reason, reference_distance=None, verdict=None,
                                  time_vs_default=None, time_vs_default_note=f"cell {status}")
    if status == "numerical_failure":
        return changed
    return dataclasses.replace(changed, record=None, wall_seconds=None, memory=None, timing=None, efficiency=None)


def replace_cells(result: MatrixResult, cells: Mapping[str, CellResult]) -> MatrixResult:
    """``result`` with the cells of the given ids replaced (or, for an id it lacks, added after its pair's cells)."""
    known = {c.id for c in result.cells}
    out: list[CellResult] = []
    for cell in result.cells:
        out.append(cells.get(cell.id, cell))
        out += [c for cid, c in cells.items() if cid not in known and c.pair == cell.pair and cell is _last_of_pair(result, cell.pair)]
    return dataclasses.replace(result, cells=tuple(out))


def _last_of_pair(result: MatrixResult, pair: str) -> CellResult:
    return [c for c in result.cells if c.pair == pair][-1]


def nudge_one_ulp(name: str, index: tuple[int, ...]) -> WeightsEdit:
    """Move one element of tensor ``name`` to the next float32 up (one ULP)."""

    def edit(weights: dict[str, np.ndarray]) -> None:
        tensor = weights[name]
        tensor[index] = np.nextafter(tensor[index], np.float32(np.inf), dtype=np.float32)

    return edit


def split_losses(record: RunRecord, step: int, offset: float = 1.0) -> list[float]:
    """The record's trajectory with ``offset`` added from ``step`` on: it splits from the original at ``step``."""
    return [v + offset if i >= step and v is not None else v for i, v in enumerate(record.losses)]  # type: ignore[misc]


def extra_skip(record: RunRecord, step: int) -> dict[str, Any]:
    """Record changes for one more skipped step at ``step``: the scale is halved from that step on."""
    assert record.skipped is not None and record.loss_scale is not None, "a scaler cell"
    skipped = list(record.skipped)
    skipped[step] = True
    scale = [s / 2 if i >= step else s for i, s in enumerate(record.loss_scale)]
    return {"skipped": skipped, "loss_scale": scale, "skipped_steps": sum(skipped)}


def steady_timing(loop_seconds: float, spread: float = 0.01, overhead: float = 0.001, setup: float | None = None,
                  floor: float | None = None, loads: Sequence[tuple[float, int]] | None = None) -> Timing:
    """A cell's timing from three rounds of ``loop_seconds`` × (1, 1 + spread, 1 − spread): its loop's CV is ``spread``.

    Each call is ``overhead`` longer than its loop: ``setup`` of it (default half) in the script, the rest the bridge.
    ``floor``: a calibration round after each, ``loop_seconds`` × (1, 1 + floor, 1 − floor), so the floor's CV is ``floor``
    (``None``: no floor measured). ``loads``: each round's (other processes' CPU seconds, the worker's page faults), none
    if not given (an older result).
    """
    log = RoundLog()
    round_loads: Sequence[RoundLoad | None] = [None] * 3 if loads is None else [RoundLoad(*load) for load in loads]
    setup = overhead / 2 if setup is None else setup
    for factor, floor_factor, load in zip((1.0, 1.0 + spread, 1.0 - spread), (1.0, 1.0 + (floor or 0.0), 1.0 - (floor or 0.0)),
                                          round_loads, strict=True):
        loop = loop_seconds * factor
        log.add(loop + overhead, {"seconds_total": loop, "seconds_workload": loop + setup, "gc_seconds": 0.0}, None, True, load)
        if floor is not None:
            log.add_floor(loop_seconds * floor_factor)
    return log.summary()
