"""The main job's report fits its budgets (issue 47): ``report.html`` at most 2 MB, each picture at most 1 MB, ``report.md``
at most 1 MB and still a full listing (every cell and every pair a row). They were 9.5 MB, 4.8 and 4.1 MB, and 2.1 MB: the
loss plots drew 959 panels (65 % of them empty), and the page and the markdown an article and a whole explanation per
pair. Held on a result of the main job's shape (:func:`tests.wide_results.main_job`: 800 cells, 400 pairs); the time it
takes to write is a benchmark (``tests/benchmarks/test_report.py``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.model.result import MatrixResult
from harness.views import plots
from harness.views.page import PAGE_FILE, PAGE_MAX_BYTES
from harness.views.report import PLOT_FILES, REPORT_FILE, REPORT_MAX_BYTES, write_report
from tests.twins import with_status
from tests.wide_results import main_job


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[MatrixResult, Path]:
    result = main_job()
    folder = tmp_path_factory.mktemp("report")
    write_report(result, folder)
    return result, folder


def test_the_main_jobs_page_and_pictures_fit_their_budgets(written: tuple[MatrixResult, Path]) -> None:
    result, folder = written
    assert len(result.cells) == 800 and len(result.pairs) == 400
    assert (folder / PAGE_FILE).stat().st_size <= PAGE_MAX_BYTES
    sizes = {name: (folder / name).stat().st_size for name in PLOT_FILES}
    assert all(size <= plots.PICTURE_MAX_BYTES for size in sizes.values()), sizes


def test_the_markdown_report_lists_every_cell_and_pair_within_its_budget(written: tuple[MatrixResult, Path]) -> None:
    result, folder = written
    text = (folder / REPORT_FILE).read_text(encoding="utf-8")
    assert len(text.encode()) <= REPORT_MAX_BYTES
    assert all(f"| `{c.id}` |" in text for c in result.cells)
    assert all(f"| `{p.pair}` |" in text for p in result.pairs)
    page = (folder / PAGE_FILE).read_text(encoding="utf-8")
    assert '<a href="report.md">' in page


def test_the_loss_plots_draw_a_panel_only_where_a_cell_ran() -> None:
    """A row per optimizer family, then one per model beside the MLP, a panel per script · mode where one of its cells ran:
    (2 + 3) × 7 for the main job's 140 grid rows; a column where no cell of a row ran has no panel, and the figure says how
    many it left out."""
    result = main_job()
    for figure in (plots.losses_figure, plots.loss_diff_figure):
        assert len(figure(result).axes) == (2 + 3) * 7
    ignite = {c.id: with_status(c, "unsupported", "not here") for c in result.cells
              if c.optimizer.startswith("ignite") and c.mode == "default"}
    fewer = dataclasses.replace(result, cells=tuple(ignite.get(c.id, c) for c in result.cells))
    fig = plots.losses_figure(fewer)
    assert len(fig.axes) == (2 + 3) * 7 - 2  # a model's default panels keep its R-code cells
    assert any("2 script · mode columns of a row where no cell ran are not drawn" in t.get_text() for t in fig.texts)
    titles = [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()]
    assert titles == ["R-code optimizers", "ignite optimizers", "transformer (model)", "convnet (model)", "gru (model)"]
