"""The golden result under ``tests/data/`` is a real, complete result that the judging and reporting code replays.

It is what the compare, report, table and performance-target tests replay in milliseconds (``tests.support.golden_result``);
``tests/data/README.md`` says how it was made and how to make it again.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.store.result_file import load_result
from harness.views.report import write_report
from tests.support import GOLDEN_RESULT, golden_result

#: The modes the golden run ran (result schema 3): with_autocast's first two and the scaler script's two scaler modes.
_GOLDEN_MODES = ("default", "autocast", "autocast_scaler", "autocast_scaler_clip")

#: The golden data stays small enough to commit and to read in milliseconds (result, weights and spec).
_MAX_BYTES = 300_000


def test_golden_result_is_judged_on_load_as_its_run_judged_it_and_reported(tmp_path: Path) -> None:
    """Judged again on load, the golden result gets the verdicts its run stored; its report is written from them.

    (That judging and the views never import torch is :func:`tests.integration.test_layers.test_the_parent_never_imports_torch`.)
    """
    stored = json.loads(GOLDEN_RESULT.read_text(encoding="utf-8"))
    result = load_result(GOLDEN_RESULT)
    assert [p.verdict for p in result.pairs] == [p["verdict"] for p in stored["pairs"]] == [
        "identical", "identical", "unsupported", "unsupported"]
    # The stored verdicts name their cell by its schema-3 id; upgraded, every cell ran plain SGD and its id says so.
    renamed = [c["verdict"] | {"cell": c["verdict"]["cell"].replace(f"-{c['frontend']}-", f"-sgd-{c['frontend']}-")}
               if c["verdict"] else None for c in stored["cells"]]
    assert [c.verdict.to_json() if c.verdict else None for c in result.cells] == renamed
    written = write_report(result, tmp_path / "report")
    assert sorted(p.name for p in written) == ["loss_diff.png", "losses.png", "report.html", "report.md", "summary.md", "timing.png"]
    text = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    record = golden_result().cells[0].record
    assert record is not None
    final = record.final_loss
    assert f"{final:.7g}" in text and "`outputs` device must be \"cuda\", got \"cpu\"" in text


def test_golden_result_has_data_for_every_section() -> None:
    """Both frontends in the four modes it ran, all plain SGD, the float64 reference, a scaler back-off and growth, timing,
    efficiency and figures."""
    result = golden_result()
    assert [(c.frontend, c.mode) for c in result.cells] == [(f, m) for m in _GOLDEN_MODES for f in ("python", "r")]
    assert {c.optimizer for c in result.cells} == {p.optimizer for p in result.pairs} == {"sgd"}
    assert [c.status for c in result.cells] == ["ok"] * 5 + ["unsupported", "ok", "unsupported"]
    assert result.reference.available and result.judging == "strict"
    scaler = result.cell("cuda_amp_grad_scaler-autocast_scaler-sgd-python-cpu")
    assert scaler.record is not None and scaler.record.skipped is not None and scaler.verdict and scaler.verdict.scaler
    assert scaler.record.skipped_steps == 1 and scaler.record.skipped[2] is True  # the planted overflow at step 2
    assert scaler.verdict.scaler.passed and "1 growths, 1 back-offs" in scaler.verdict.scaler.message
    for cell in (c for c in result.cells if c.ok):
        assert cell.verdict and cell.verdict.outcome == "pass" and cell.timing and cell.timing.rounds >= 3
        assert cell.efficiency and cell.efficiency.tflops and cell.efficiency.share_of_peak
        assert cell.efficiency.tflops > 0 and 0 < cell.efficiency.share_of_peak < 1
        assert cell.record and Path(str(cell.record.weights_path)).is_file()
    assert result.targets and {f.name for f in result.targets} >= {"overhead per call"}


def test_golden_files_are_stored_relative_and_small() -> None:
    """The stored result (schema 3) names its weights relative to itself, so the folder moves; the whole stays small."""
    stored = json.loads(GOLDEN_RESULT.read_text(encoding="utf-8"))
    assert stored["schema_version"] == 3
    paths = [c["record"]["weights_path"] for c in stored["cells"] if c["record"]]
    assert len(paths) == 6 and all(p.startswith("golden.weights/") for p in paths)
    # the golden files only: tests/data/durations.json beside them is the suite's measurement (tests/unit/test_row_costs.py)
    total = sum(p.stat().st_size for p in GOLDEN_RESULT.parent.rglob("golden*") for p in ([p] if p.is_file() else p.rglob("*"))
                if p.is_file())
    assert total <= _MAX_BYTES, f"tests/data's golden files hold {total} bytes; keep the golden data under {_MAX_BYTES}"


def test_golden_result_cannot_be_edited_in_place() -> None:
    """The model is immutable: a test edits its copy with dataclasses.replace, and the next test's copy is untouched."""
    first = golden_result()
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.cells[0].reason = "edited"  # type: ignore[misc]
    edited = dataclasses.replace(first, cells=first.cells[1:])
    assert len(edited.cells) == 7 and len(golden_result().cells) == 8
