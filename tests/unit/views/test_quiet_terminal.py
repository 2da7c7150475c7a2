"""A quiet terminal: a skip is told once per reason, the cell table lists only the cells that need a look and fits the
terminal's width, and a target missed on many cells is one line. Without R torch the main job printed 119 rows of
`skipped` under "the 119 that need a look", and a line per cell for each target it missed."""

from __future__ import annotations

import dataclasses
import io
import re
from typing import Any

import pytest
from rich.console import Console

from harness.contract.models import DEFAULT_MODEL
from harness.model.verdicts import TargetCheck
from harness.views.glance import glance
from harness.views.table import QUIET_GLANCE_MAX_ROWS, RUN_MAX_LINES, print_result
from harness.workload.features import FEATURES
from harness.workload.model_designs import PRESET_MODELS
from tests.twins import golden, replace_cells, with_status
from tests.wide_results import R_MISSING, main_job, wide, without_r


def _printed(result: object, width: int = 120, verbose: bool = False) -> list[str]:
    console = Console(record=True, width=width, file=io.StringIO())
    print_result(result, console, verbose=verbose)  # type: ignore[arg-type]
    return console.export_text().splitlines()


def test_without_r_torch_the_skipped_cells_are_one_line_with_the_install_line() -> None:
    result = without_r(wide())
    lines = _printed(result)
    skipped = [line for line in lines if "skipped" in line]
    assert len([line for line in lines if R_MISSING in line]) == 1
    assert f"{len(result.cells) // 2} cells (with_autocast-default-sgd-r-cpu, ...) skipped: {R_MISSING}" in lines
    assert not any(line.startswith("│") and "skipped" in line for line in lines), "no table row of a skipped cell"
    assert len(skipped) <= 3, skipped  # the heading's count, the reason, the pairs not compared


def test_a_small_matrix_without_r_lists_only_the_cells_that_ran() -> None:
    """Below the full table's size too, a skipped cell is its reason's line, not a row."""
    lines = _printed(without_r(golden()))
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == 4 and all("python" in row for row in rows)


def test_the_cell_table_fits_the_terminal_leaving_out_the_least_needed_columns() -> None:
    """At 90 columns the table is no wider than the terminal, and its key columns are whole (not cut to "optimiz…")."""
    lines = _printed(golden(), width=90)
    table = [line for line in lines if line.startswith(("┃", "│", "┏"))]
    assert table and max(len(line) for line in table) <= 90
    header = next(line for line in lines if line.startswith("┃") and "script · mode" in line)
    assert "optimizer" in header and "frontend" in header and "status" in header and "…" not in header
    wide_lines = _printed(golden(), width=200)
    assert "TFLOP/s" in next(line for line in wide_lines if line.startswith("┃") and "script · mode" in line)


def test_a_target_missed_on_many_cells_is_one_line() -> None:
    result = golden()
    checks = tuple(TargetCheck("overhead per call", c.id, "bridge ≤ 5 ms per call", f"bridge {k + 6} ms", False, "slow bridge")
                   for k, c in enumerate(result.cells))
    lines = _printed(dataclasses.replace(result, targets=checks))
    missed = [line for line in lines if line.startswith("target missed")]
    assert missed == [f"target missed: overhead per call, on {len(checks)} ({result.cells[0].id}, ...; the report lists each): "
                      "the first bridge 6 ms; target bridge ≤ 5 ms per call"]


def test_an_error_with_a_backtrace_is_its_first_line_on_the_terminal() -> None:
    """R torch's C++ errors carry a backtrace of dozens of lines: the terminal shows the error's first line, once per
    reason, and says the report has the rest."""
    from tests.wide_results import replace_cells, with_status

    base = golden()
    cell = next(c for c in base.cells if c.frontend == "r")
    reason = "r script failed: tensor does not have a device\nException raised from device_default\nframe #0: c10::Error"
    lines = _printed(replace_cells(base, {cell.id: with_status(cell, "error", reason)}))
    assert any("tensor does not have a device (the report has the rest)" in line for line in lines), lines
    assert not any("frame #0" in line or "Exception raised" in line for line in lines)


#: What ``run`` prints around the table: its header, the result's and the report's places, the matrix's line.
_RUN_OWN_LINES = 4


@pytest.mark.parametrize("with_r", [True, False], ids=["with R torch", "without R torch"])
def test_the_main_job_prints_at_most_its_budget_by_default(with_r: bool) -> None:
    """Issue 47: the main job printed 1,398 lines for 6 cells that needed a look (a grid of 137 rows, a table of 236 proven
    known differences, a line per note that holds by design). Now: the verdict counts, the grid of optimizers × modes with
    each loop feature one row, its entries counted, and one line for the notes that hold by design."""
    result = main_job() if with_r else without_r(main_job())
    lines = _printed(result, width=150)
    assert len(lines) + _RUN_OWN_LINES <= RUN_MAX_LINES, "\n".join(lines)
    assert not any("sgd · lr_step" in line for line in lines), "a feature's rows are folded"
    assert not any(re.search(r"no default cell of \w+ with \w+ to compare with", line) for line in lines), "one line, not one per note"
    if with_r:
        assert sum(line.startswith("│ +") for line in lines) == len(FEATURES)
        # each model beside the MLP one row, its pairs counted (issue 47: feature and model rows folded)
        models = [f"@{m}" for m in PRESET_MODELS["tiny"] if m != DEFAULT_MODEL]
        assert [line.split()[1] for line in lines if line.startswith("│ @")] == models
        assert not any("@transformer " in line and not line.startswith("│ @") for line in lines)
        folded = next(line for line in lines if line.startswith("│ +lr_step "))
        assert re.search(r"\d+B \d+U", folded), folded
        assert any(line.startswith("parity: ") and "bitwise identical" in line and "proven known difference" in line for line in lines)
        assert not any("known_difference" in line for line in lines), "no row per proven known difference"
    assert sum("×default: none, by design" in line for line in lines) == 1


def test_a_matrix_past_the_grids_rows_folds_every_loop_feature_into_one_row_and_every_model_into_one() -> None:
    """Past :data:`QUIET_GLANCE_MAX_ROWS` (the main job's own rows: three loop features more are planted, each a copy of
    ``lr_step``'s cells and pairs), the quiet grid tells every loop feature's pairs in one row and every model's in one, each
    entry counted, so the main job stays within its budget as its matrix grows; -v keeps every row."""
    result = main_job()
    copies = [f"lr_step_copy{k}" for k in range(3)]

    def relabel(item: Any, feature: str) -> Any:
        cell = getattr(item, "cell", None)
        if cell is not None:
            return dataclasses.replace(item, cell=dataclasses.replace(cell, feature=feature))
        return dataclasses.replace(item, feature=feature, pair=item.pair.replace("+lr_step", f"+{feature}"))

    grown = dataclasses.replace(
        result, cells=(*result.cells, *(relabel(c, f) for f in copies for c in result.cells if c.cell.feature == "lr_step")),
        pairs=(*result.pairs, *(relabel(p, f) for f in copies for p in result.pairs if p.feature == "lr_step")))
    rows = len(glance(grown, folded=True).rows)
    assert rows == len(glance(result, folded=True).rows) + len(copies) > QUIET_GLANCE_MAX_ROWS  # a row per feature: past it
    lines = _printed(grown, width=150)
    assert len(lines) + _RUN_OWN_LINES <= RUN_MAX_LINES, "\n".join(lines)
    assert [line.split()[1] for line in lines if line.startswith(("│ +", "│ @"))] == ["+loop", "@models"]
    features = next(line for line in lines if line.startswith("│ +loop features "))
    assert re.search(r"\d+= \d+B", features) and re.search(r"\d+B \d+U", features), features
    assert any("+loop features, @models: every loop feature's, every model's pairs, counted" in line for line in lines)
    assert sum(line.startswith("│ +lr_step_copy") for line in _printed(grown, width=150, verbose=True)) == 0  # -v: per optimizer
    assert any(line.startswith("│ sgd · lr_step_copy2 ") for line in _printed(grown, width=150, verbose=True))


def test_minus_v_prints_every_row_and_note() -> None:
    """-v: every grid row (a feature's per optimizer), every pair that is not identical, each note with its cells."""
    result = main_job()
    lines = _printed(result, verbose=True, width=150)
    assert any(line.startswith("│ sgd · lr_step ") for line in lines)
    known = [p for p in result.pairs if p.verdict == "known_difference"]
    assert sum(1 for line in lines if "known_difference" in line) >= len(known)
    assert any(line.startswith("×default ") and "no default cell of" in line for line in lines)
    assert any(line.startswith("per call: ") for line in lines)


def test_a_worker_that_cannot_start_is_one_line_not_a_row_per_cell() -> None:
    """Every Python cell of the main job ended in the same error before a record (its worker could not start): one reason
    line with their count, no table row for each."""
    result = main_job()
    reason = "python worker could not start: ModuleNotFoundError: No module named 'blake3'"
    failed = replace_cells(result, {c.id: with_status(c, "error", reason) for c in result.cells if c.frontend == "python"})
    lines = _printed(failed, width=150)
    half = len(result.cells) // 2
    assert [line for line in lines if reason in line] == [f"{half} cells (with_autocast-default-sgd-python-cpu, ...) error: {reason}"]
    assert not any(line.startswith("│ with_autocast") for line in lines)
    # its reason line and no other beside what the main job prints where no cell needs a look (within RUN_MAX_LINES)
    assert len(lines) <= len(_printed(result, width=150)) + 1


def test_the_reasons_cells_are_unsupported_by_fold_into_one_line_unless_verbose() -> None:
    """Two reasons a matrix cannot run some cells by design (a binding's missing API, a feature a model cannot do) are one
    line with each reason's first clause counted; -v (no fold) prints each reason whole, with its fix."""
    from harness.model.result import Status
    from harness.views.reasons import Reason
    from harness.views.table import _print_reasons

    found = [Reason("R torch cannot checkpoint its scaler: run it with --feature none", ("a-r-cpu", "b-r-cpu"),
                    (Status.UNSUPPORTED, Status.UNSUPPORTED)),
             Reason("loop feature penalty cannot run on the transformer model: leave it out", ("c-python-cpu",),
                    (Status.UNSUPPORTED,))]
    for fold, expected in ((True, 1), (False, 2)):
        out = io.StringIO()
        _print_reasons(found, Console(file=out, width=300), fold=fold)
        lines = out.getvalue().splitlines()
        assert len(lines) == expected, lines
    assert lines[0].startswith("2 cells (a-r-cpu, ...) unsupported: R torch cannot checkpoint its scaler: run it with")
    out = io.StringIO()
    _print_reasons(found, Console(file=out, width=300), fold=True)
    assert out.getvalue().startswith("3 cells unsupported: R torch cannot checkpoint its scaler 2; loop feature penalty "
                                     "cannot run on the transformer model 1 (-v or the report")
