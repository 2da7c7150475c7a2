"""Typed results for the tests of the result's storage: the committed real results, read into the model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from harness.files.paths import REPO_ROOT
from harness.model.provenance import Provenance
from harness.model.result import RESULT_SCHEMA_VERSION, MatrixResult
from harness.store.result_file import load_result

__all__ = ["COMMITTED", "committed", "current_schema", "schema_7", "with_weights"]

#: The golden real result (schema 3: both frontends, all modes, with its weights) under tests/data/: test data
#: that stays put, unlike the measurements under docs/results/, which are re-measured in the current schema.
COMMITTED = REPO_ROOT / "tests" / "data"


def committed(name: str = "golden") -> MatrixResult:
    """The committed result ``name`` (upgraded to this schema on load)."""
    return load_result(COMMITTED / f"{name}.json")


def with_weights(result: MatrixResult, paths: list[Path | None]) -> MatrixResult:
    """``result`` cut to ``len(paths)`` cells: for a path, its next cell with a record, pointed at that path; for
    ``None``, its next cell that has none (an R scaler cell on CPU is ``unsupported``)."""
    ran = iter(c for c in result.cells if c.record is not None)
    not_run = iter(c for c in result.cells if c.record is None)
    cells = []
    for path in paths:
        if path is None:
            cells.append(next(not_run))
        else:
            cell = next(ran)
            assert cell.record is not None
            cells.append(dataclasses.replace(cell, record=dataclasses.replace(cell.record, weights_path=str(path))))
    return dataclasses.replace(result, cells=tuple(cells))


def schema_7(name: str) -> dict[str, Any]:
    """A committed schema-3 result as version 7 stored it: its cells' speed-ups turned into times (version 4), no traces and
    the spec's overflow point (version 5), targets and the worst tensor in each distance (version 6), the frontends, their
    baseline and no installation facts (version 7)."""
    data = json.loads((COMMITTED / f"{name}.json").read_text(encoding="utf-8"))
    data["schema_version"] = 7
    for cell in data["cells"]:
        speedup = cell.pop("speedup_vs_default")
        cell["time_vs_default"] = None if speedup is None else 1 / speedup
        cell["time_vs_default_note"] = cell.pop("speedup_note")
    data["traces"] = []
    spec = list(data["spec"].items())
    at = [k for k, _ in spec].index("overflow_steps") + 1
    data["spec"] = dict([*spec[:at], ("overflow_point", "backward"), *spec[at:]])
    for cell in data["cells"]:  # version 6: the worst tensor joins the distance, figures are targets
        float64 = (cell["verdict"] or {}).get("float64")
        if cell["reference_distance"] is not None and float64 is not None:
            cell["reference_distance"] |= {k: float64[k] for k in ("worst_tensor", "worst_tensor_rel_error")}
    data = {("targets" if k == "figures" else k): v for k, v in data.items()}
    data["targets"] = [{("name" if k == "figure" else k): v for k, v in t.items()} for t in data["targets"]]
    for cell in data["cells"]:  # version 7: installations as frontends (none reported before)
        cell["installation"] = None
    return data | {"frontends": ["python", "r"], "baseline": "python", "sources": []}


def _sgd_id(cell_id: str, frontend: str) -> str:
    """A cell id before schema 8 (``script-mode-frontend-device``) with the optimizer every such cell ran: plain SGD."""
    return cell_id.replace(f"-{frontend}-", f"-sgd-{frontend}-")


def current_schema(name: str) -> dict[str, Any]:
    """:func:`schema_7`'s result as the current version stores it, written out by hand: the spec's optimizer_args and static
    loss scale at their defaults, each cell's and pair's optimizer (plain SGD) and the ids that name it, the float64 reference
    as trajectories, no trace files, and the scaler cells' ratio to default not shown (version 8); no kept weights and an unknown provenance
    (version 9); no phases and no noise floor beside any timing (version 10: ``timing.floor`` and ``samples.floor_seconds``
    are optional on load)."""
    data = schema_7(name)
    data["schema_version"] = RESULT_SCHEMA_VERSION
    data["spec"] |= {"optimizer_args": {}, "static_loss_scale": 1024.0}
    for k, cell in enumerate(data["cells"]):
        at = list(cell).index("mode") + 1
        cell = dict([*list(cell.items())[:at], ("optimizer", "sgd"), *list(cell.items())[at:]])
        cell["id"], cell["pair"] = _sgd_id(cell["id"], cell["frontend"]), cell["pair"].replace("-cpu", "-sgd-cpu")
        if cell["verdict"]:
            cell["verdict"]["cell"] = cell["id"]
        if cell["script"] == "cuda_amp_grad_scaler" and cell["status"] == "ok":
            cell["time_vs_default"] = None
            cell["time_vs_default_note"] = "not shown: before schema 8 it divided by with_autocast's default cell"
        cell["trace"] = cell["reconciled"] = None  # no trace files before schema 8
        data["cells"][k] = cell
    for k, pair in enumerate(data["pairs"]):
        at = list(pair).index("mode") + 1
        data["pairs"][k] = dict([*list(pair.items())[:at], ("optimizer", "sgd"), *list(pair.items())[at:]])
        data["pairs"][k]["pair"] = pair["pair"].replace("-cpu", "-sgd-cpu")
    reference = data["reference"]
    trajectories = [{"optimizer": "sgd", "clip": False, "skipped_steps": [], "losses": reference["losses"]},
                    {"optimizer": "sgd", "clip": True, "skipped_steps": [], "losses": reference["losses_clipped"]}]
    trajectories += [{"optimizer": "sgd"} | r for r in reference["replayed"]]
    data["reference"] = {"available": True, "reason": reference["reason"], "trajectories": trajectories}
    for cell in data["cells"]:  # version 9: nothing kept of the weights, provenance unknown
        cell["weights"] = None
        if cell["timing"] is not None:  # the floor was not measured
            cell["timing"]["samples"]["floor_seconds"] = []
            cell["timing"]["floor"] = None
    return data | {"provenance": Provenance.unknown().to_json(), "phases": []}
