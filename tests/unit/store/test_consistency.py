"""A loaded result whose derived numbers disagree with their inputs is refused on load, in one line naming the field.

Each case plants one hand edit into a copy of the golden result (a real run, schema 3) and runs ``report``
on it: before the check, every one of these was reported as if measured (exit 0).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ExitCode, ResultError
from harness.store.result_file import WEIGHTS_MARKER, load_result
from tests.support import GOLDEN_RESULT, Edit, run_cli, set_field

_FIX = "a result edited by hand? Re-run `python -m harness run --json`, or restore the file."

# The golden cells, in order: 0 default-python, 1 default-r, 2 autocast-python, 3 autocast-r,
# 4 autocast_scaler-python (skipped step 2: an inf was planted there), 5 its r twin (unsupported), 6 clip-python, 7 clip-r.


def _golden_copy(folder: Path, *edits: Edit) -> Path:
    """The golden result in ``folder`` under its own name, weights paths pointing at the real golden weights."""
    data: dict[str, Any] = json.loads(GOLDEN_RESULT.read_text(encoding="utf-8"))
    for cell in data["cells"]:
        if cell["record"] and cell["record"]["weights_path"]:
            cell["record"]["weights_path"] = str(GOLDEN_RESULT.parent / cell["record"]["weights_path"])
    for edit in edits:
        edit(data)
    path = folder / GOLDEN_RESULT.name  # the weights folder's marker names golden.json
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _nan_in_both_default_cells(data: dict[str, Any]) -> None:
    for k in (0, 1):
        data["cells"][k]["record"]["losses"][5] = math.nan


def _no_trajectories(data: dict[str, Any]) -> None:
    data["reference"] |= {"losses": None, "losses_clipped": None, "replayed": []}  # schema 3's: no trajectory once upgraded


def _duplicate_cell(data: dict[str, Any]) -> None:
    data["cells"].append(data["cells"][0])


_CASES: dict[str, tuple[Edit, str]] = {
    "final loss not the last loss": (set_field("cells", 3, "record", "final_loss", value=1.5),
                                     "cells[3].record.final_loss is 1.5 but its last loss is "),
    "NaN in both loss series": (_nan_in_both_default_cells,
                                "cells[0].record.losses[5] is NaN but the cell's status is ok (loss is NaN at step 5 (python))"),
    "NaN at a step the scaler did not skip": (set_field("cells", 4, "record", "losses", 4, value=math.inf),
                                              "cells[4].record.losses[4] is inf but step 4 was not skipped"),
    "share of peak 5.0": (set_field("cells", 0, "efficiency", "share_of_peak", value=5.0),
                          "cells[0].efficiency.share_of_peak is 5 but its TFLOP/s over the measured peak is "),
    "negative overhead": (set_field("cells", 0, "timing", "overhead_seconds", value=-1.0),
                          "cells[0].timing.overhead_seconds is -1 but recomputed from its samples, it is "),
    "negative timed round": (set_field("cells", 2, "timing", "samples", "loop_seconds", 0, value=-0.5),
                             "cells[2].timing.samples.loop_seconds[0] is -0.5 but it must be 0 or more"),
    "infinite timed round": (set_field("cells", 2, "timing", "samples", "call_seconds", 1, value=math.inf),
                             "cells[2].timing.samples.call_seconds[1] is inf but it must be finite"),
    "median not its samples'": (set_field("cells", 2, "timing", "loop", "median", value=1e-6),
                                "cells[2].timing.loop.median is 1e-06 but the median of its samples is "),
    "time_vs_default -3": (set_field("cells", 2, "speedup_vs_default", value=-1 / 3),
                           "cells[2].time_vs_default is -3 but it must be above 0"),
    "time_vs_default not its ratio": (set_field("cells", 2, "speedup_vs_default", value=10.0),
                                      "cells[2].time_vs_default is 0.1 but "),
    "peak 1e-9 TFLOP/s": (set_field("peaks", "by_dtype", "float32", "tflops", value=1e-9),
                          "peaks.by_dtype.float32.tflops is 1e-09 but a measured matmul peak is between 0.0001 and 100000 TFLOP/s"),
    "peak not its best sample": (set_field("peaks", "by_dtype", "float32", "tflops", value=50.0),
                                 "peaks.by_dtype.float32.tflops is 50 but the best of its samples_tflops is "),
    "duplicate cell": (_duplicate_cell,
                       "cells[8].id is 'with_autocast-default-sgd-python-cpu' but cells[0] is that cell already"),
    "record of another optimizer": (set_field("cells", 2, "record", "optimizer", value="adam"),
                                    "cells[2].record.optimizer is 'adam' but the cell's optimizer is 'sgd'"),
    "record that did not inject where asked": (
        set_field("cells", 4, "record", "injected_steps", value=[]),
        "cells[4].record is a record with 8 losses but the cell's status is ok (the python script put an overflow at steps [], "
        "but was asked for [2] (overflow_steps)"),
    "reference distance not its losses'": (set_field("cells", 0, "reference_distance", "max_rel_loss_error", value=0.0),
                                           "cells[0].reference_distance.max_rel_loss_error is 0 but recomputed from its losses"),
    "skipped_steps miscounted": (set_field("cells", 4, "record", "skipped_steps", value=7),
                                 "cells[4].record.skipped_steps is 7 but the number of true in its skipped is 1"),
    "record of another mode": (set_field("cells", 0, "record", "mode", value="autocast"),
                               "cells[0].record.mode is 'autocast' but the cell's mode is 'default'"),
    "negative matrix wall time": (set_field("wall_seconds", value=-5), "wall_seconds is -5 but it must be 0 or more"),
    "negative peak memory": (set_field("cells", 1, "memory", "peak_rss_bytes", value=-1),
                             "cells[1].memory.peak_rss_bytes is -1 but it must be 0 or more"),
    # Issue 48 (14): float64 evidence deleted read "not judged" and passed
    "reference made unavailable": (set_field("reference", "available", value=False),
                                   "reference.available is False but cells[0] (with_autocast-default-sgd-python-cpu) ran ok with "
                                   "the spec's float64 reference within its budget, and was measured against its sgd trajectory"),
    "reference trajectories deleted": (_no_trajectories,
                                       "reference.trajectories is 0 trajectories but none is the one cells[0] "
                                       "(with_autocast-default-sgd-python-cpu) ran ok"),
    "a replayed trajectory deleted": (set_field("reference", "replayed", value=[]),
                                      "reference.trajectories is 2 trajectories but none is the one cells[4] "
                                      "(cuda_amp_grad_scaler-autocast_scaler-sgd-python-cpu) ran ok with the spec's float64 "
                                      "reference within its budget, and was measured against its sgd trajectory (clipped: false, "
                                      "skipped steps [2], feature none)"),
    "reference distance deleted": (set_field("cells", 2, "reference_distance", value=None),
                                   "cells[2].reference_distance is None but the cell ran ok and the reference holds its float64"),
    # Issue 48 (15): a loop feature no row has read "not judged" and passed
    "unknown loop feature": (set_field("cells", 0, "feature", value="warp_drive"),
                             "cells[0].feature is 'warp_drive' but it must be one of the features none, "),
    "a cell that ran edited to skipped": (set_field("cells", 1, "status", value="skipped"),
                                          "cells[1].status is 'skipped' but cells[3] (with_autocast-autocast-sgd-r-cpu), of the "
                                          "same frontend in the same run, is ok: a frontend that cannot run skips every cell"),
    "wrong type in a schema-3 field": (set_field("cells", 2, "speedup_vs_default", value="fast"),
                                       "cells[2].speedup_vs_default must be a number or null, but got 'fast'"),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_report_refuses_an_inconsistent_number_naming_its_field(case: str, tmp_path: Path) -> None:
    """``report`` on a golden copy with one number edited exits 4 (a usage error) with one line naming the field, and writes nothing."""
    edit, message = _CASES[case]
    path = _golden_copy(tmp_path, edit)
    done = run_cli("report", str(path), "--out", str(tmp_path / "out"))
    assert (done.returncode, done.stdout) == (ExitCode.USAGE_ERROR, "")
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {path}: {message}"), lines[0]
    assert lines[0].endswith(_FIX) and "unexpected" not in lines[0]
    assert not (tmp_path / "out").exists()


def test_the_unedited_golden_copy_loads(tmp_path: Path) -> None:
    """The check refuses only what cannot be: the golden result, copied as it is, loads with every cell."""
    stored = json.loads(GOLDEN_RESULT.read_text())["cells"]
    # stored in schema 3, upgraded on load: each id names the optimizer every cell then ran, plain SGD
    assert [c.id for c in load_result(_golden_copy(tmp_path)).cells] == [
        c["id"].replace(f"-{c['frontend']}-", f"-sgd-{c['frontend']}-") for c in stored]


def test_a_non_finite_loss_at_a_skipped_step_is_what_a_scaler_does(tmp_path: Path) -> None:
    """A scaler cell whose loss is inf at the step it skipped loads: that is why the step was skipped (the step is not judged,
    so its distance from float64 is the largest over the other steps)."""
    golden = json.loads(GOLDEN_RESULT.read_text(encoding="utf-8"))
    reference = golden["reference"]["replayed"][0]["losses"]
    losses = golden["cells"][4]["record"]["losses"]
    others = max(abs(a - b) / abs(b) for k, (a, b) in enumerate(zip(losses, reference, strict=True)) if k != 2)
    path = _golden_copy(tmp_path, set_field("cells", 4, "record", "losses", 2, value=math.inf),
                        set_field("cells", 4, "reference_distance", "max_rel_loss_error", value=others))
    loaded = load_result(path)
    record = loaded.cells[4].record
    assert record is not None and math.isinf(record.losses[2]) and 2 in record.skipped_step_indices  # type: ignore[arg-type]


def _weights_swapped(folder: Path, owner: str, name: str = "a.json") -> Path:
    """``name`` beside a weights folder whose marker names ``owner`` (a folder moved over from another run)."""
    weights = folder / name.replace(".json", ".weights")
    shutil.copytree(GOLDEN_RESULT.parent / "golden.weights", weights)
    (weights / WEIGHTS_MARKER).write_text(json.dumps({"result": owner}) + "\n", encoding="utf-8")
    data = json.loads(GOLDEN_RESULT.read_text(encoding="utf-8"))
    for cell in data["cells"]:
        if cell["record"] and cell["record"]["weights_path"]:
            cell["record"]["weights_path"] = cell["record"]["weights_path"].replace("golden.weights", weights.name)
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_report_refuses_a_weights_folder_whose_marker_names_another_result(tmp_path: Path) -> None:
    """``a.weights`` replaced by ``b.json``'s folder: one line naming the folder and its owner, nothing written (it said "identical")."""
    path = _weights_swapped(tmp_path, "b.json")
    done = run_cli("report", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == ExitCode.USAGE_ERROR and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"error: {path}: cells[0].record.weights_path is in {tmp_path / 'a.weights'}, which holds the "
                                  "weights of 'b.json', not of 'a.json'")
    assert not (tmp_path / "out").exists()


def test_a_weights_folder_that_names_its_result_is_read(tmp_path: Path) -> None:
    """The same folder with its own marker loads, weights found (the check refuses only another result's folder)."""
    loaded = load_result(_weights_swapped(tmp_path, "a.json"))
    folders = {Path(str(c.record.weights_path)).parent for c in loaded.cells if c.record and c.record.weights_path}
    assert folders == {tmp_path / "a.weights"}


def test_a_copied_result_reads_the_weights_of_its_original(tmp_path: Path) -> None:
    """``cp a.json c.json``: the copy points at ``a.weights`` (marker ``a.json``), its original's own weights, and loads."""
    path = _weights_swapped(tmp_path, "a.json")
    copied = tmp_path / "c.json"
    shutil.copyfile(path, copied)
    assert load_result(copied).cells[0].record is not None


def test_an_unreadable_marker_is_refused(tmp_path: Path) -> None:
    """A marker that is not the JSON the harness writes is refused in one line, not read past."""
    path = _weights_swapped(tmp_path, "a.json")
    (tmp_path / "a.weights" / WEIGHTS_MARKER).write_text("{half", encoding="utf-8")
    with pytest.raises(ResultError, match=r"a.json: the marker .*a.weights/.amp-parity-weights.json cannot be read \(Expecting"):
        load_result(path)


@pytest.mark.parametrize(
    ("edit", "index", "outcome"),
    [
        (set_field("cells", 0, "verdict", "outcome", value="fail"), 0, "pass"),
        (set_field("cells", 2, "verdict", "float64", "passed", value=False), 2, "pass"),
        (set_field("cells", 4, "record", "loss_scale", 3, value=12345.0), 4, "fail"),
    ],
    ids=["a-stored-fail", "a-stored-float64-failure", "a-scale-history-off-the-rule"],
)
def test_stored_verdicts_are_never_read_back(tmp_path: Path, edit: Any, index: int, outcome: str) -> None:
    """A verdict edited in the file is judged again on load (a stored 'fail' of a passing cell loads as 'pass'), and a
    record edited off GradScaler's rule loads as the failing cell it now is: verdicts come from the facts only."""
    loaded = load_result(_golden_copy(tmp_path, edit))
    verdict = loaded.cells[index].verdict
    assert verdict is not None and verdict.outcome == outcome
    if outcome == "fail":
        assert verdict.scaler is not None and not verdict.scaler.passed and "step 3" in verdict.reason


@pytest.mark.parametrize(("field", "value"), [("lr", 0.5), ("optimizer_args", {"sgd": {"lr": 0.5}})])
def test_a_spec_edited_after_the_run_is_refused(tmp_path: Path, field: str, value: object) -> None:
    """Issue 37 (8): the stored spec is hashed again on load; one edited by hand (lr, an optimizer's arguments) no longer
    hashes to its spec_digest and the result is refused in one line, not reported as what ran."""
    data = json.loads(GOLDEN_RESULT.read_text(encoding="utf-8"))
    data["spec"][field] = value
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ResultError, match=r"edited\.json: spec is 'edited' but it hashes to \w+, not the spec_digest af6db19d3ad1d7cb"):
        load_result(edited)


def _read_again_alone(call: float, workload: float, judged: float) -> Edit:
    """Cell 3's timing given a round that read its bridge again alone (``call``, ``workload``) and a stored ``judged`` bridge."""
    def edit(data: dict[str, Any]) -> None:
        timing = data["cells"][3]["timing"]
        timing["samples"] |= {"alone_call_seconds": [call], "alone_workload_seconds": [workload]}
        timing["bridge_alone_seconds"] = judged
    return edit


def test_a_bridge_read_again_alone_is_checked_against_its_round(tmp_path: Path) -> None:
    """The bridge read again with the machine to itself loads where it is its round's call − workload, and is what the overhead
    target judges; one edited by hand (a long side-by-side bridge "read again" shorter) is refused, naming the field."""
    loaded = load_result(_golden_copy(tmp_path, _read_again_alone(0.0525, 0.05, 0.0025)))
    timing = loaded.cells[3].timing
    assert timing is not None and timing.judged_bridge_seconds == pytest.approx(0.0025)
    (tmp_path / "edited").mkdir()
    with pytest.raises(ResultError,
                       match=r"cells\[3\]\.timing\.bridge_alone_seconds is 0\.001 but recomputed from its samples, it is 0\.0025"):
        load_result(_golden_copy(tmp_path / "edited", _read_again_alone(0.0525, 0.05, 0.001)))
