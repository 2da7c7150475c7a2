"""The pairs at a glance: optimizer × script · mode, one symbol per pair, drawn in the terminal and the report."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from harness.model.verdicts import PairVerdict
from harness.views.glance import SYMBOLS, glance, row_key, symbol
from harness.views.table import print_result
from tests.support import report_text
from tests.twins import golden


def _pair(verdict: str, **details: object) -> PairVerdict:
    return PairVerdict("with_autocast-default-sgd-cpu", "with_autocast", "default", "cpu", ("python", "r"), verdict, [], dict(details),
                       optimizer="sgd")


def test_each_verdict_has_its_symbol_and_a_proven_bug_is_told_from_a_difference() -> None:
    """``K`` a proven known difference, ``B`` one whose proof switched off an R torch bug (matched or not), ``k`` matched but
    not proven, and one symbol per other verdict."""
    assert symbol(_pair("known_difference", proven=True, known_kinds=["difference"])) == SYMBOLS["known"] == "K"
    assert symbol(_pair("known_difference", proven=True, known_kinds=["bug"])) == "B"
    assert symbol(_pair("known_difference", proven=True, known_kinds=["difference"], excused_by=["sgd-weight-decay-index"])) == "B"
    assert symbol(_pair("known_difference", proven=False, known_kinds=["difference"])) == "k"
    assert [symbol(_pair(v)) for v in ("identical", "within_tolerance", "diverged", "stale_known_difference", "error")] == [
        "=", "≈", "✗", "S", "E"]


def test_the_grid_has_a_row_per_optimizer_and_a_column_per_script_mode() -> None:
    """The golden result (plain SGD, four modes): one row, four columns, the symbols of its pairs in matrix order."""
    result = golden()
    grid = glance(result)
    assert grid.columns == ("with_autocast · default", "with_autocast · autocast", "cuda_amp_grad_scaler · autocast_scaler",
                            "cuda_amp_grad_scaler · autocast_scaler_clip")
    assert grid.rows == (("sgd", ("=", "=", "U", "U")),)
    assert grid.counts == {"identical": 2, "unsupported": 2}


def test_the_terminal_and_the_report_show_the_grid_of_a_wide_matrix() -> None:
    """Past a few pairs the grid is what a maintainer reads first: the terminal prints it with the legend of the symbols it
    shows (the whole legend was two lines, most of it verdicts the run did not have), the report has it as a table."""
    result = golden()
    wide = dataclasses.replace(result, pairs=tuple(dataclasses.replace(p, optimizer=o) for o in ("sgd", "adam", "rprop")
                                                   for p in result.pairs))
    console = Console(record=True, width=200)
    print_result(wide, console)
    text = console.export_text()
    assert "parity at a glance" in text and "= identical · U unsupported" in text and "B R torch bug" not in text
    report = report_text(result)
    assert "## At a glance" in report and "| sgd | = | = | U | U |" in report


def test_a_row_is_an_optimizer_and_its_loop_feature_where_cells_have_one() -> None:
    """The grid's rows are keyed generically: a cell (or pair) that names a loop feature gets a row of its own."""
    result = golden()

    @dataclasses.dataclass(frozen=True)
    class Featured:
        optimizer: str
        feature: str | None

    assert row_key(result.cells[0]) == "sgd" and row_key(result.pairs[0]) == "sgd"
    assert row_key(Featured("adam", "accumulation")) == "adam · accumulation"  # type: ignore[arg-type]
    assert row_key(Featured("adam", None)) == "adam"  # type: ignore[arg-type]
