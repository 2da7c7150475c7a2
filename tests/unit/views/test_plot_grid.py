"""The plots scale with the matrix: the loss plots a panel per optimizer family × script · mode where a cell ran, each
optimizer its colour, each panel naming what did not run in it; the time ratios as a heatmap whose every entry has its
number, spread or reason, each loop feature one row. The main job once drew 17 optimizers into one panel per mode, then
959 panels (one per optimizer and feature × mode, 65 % empty: tests/unit/views/test_report_sizes.py)."""

from __future__ import annotations

import dataclasses
import math

from matplotlib.figure import Figure

from harness.views import plots
from harness.views.glance import glance
from tests.twins import steady_timing
from tests.wide_results import wide, without_r

_OPTIMIZERS = ("sgd", "adam", "rprop")


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_the_loss_curves_have_a_panel_per_family_and_mode_and_a_colour_per_optimizer() -> None:
    """Three R-code optimizers, R skipped: one row, a panel per script · mode with each optimizer's line in its colour; each
    panel counts the R cells that did not run in it; the legend names the optimizers, then the frontend and float64."""
    result = without_r(wide(_OPTIMIZERS))
    grid = glance(result)
    fig = plots.losses_figure(result)
    assert len(fig.axes) == len(grid.columns)
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()] == ["R-code optimizers"]
    assert [ax.get_title().replace("\n", " · ") for ax in fig.axes] == list(grid.columns)
    assert _texts(fig).count(f"r skipped ×{len(_OPTIMIZERS)}") == len(fig.axes)
    colours = {tuple(color) for ax in fig.axes for collection in ax.collections for color in collection.get_colors()}
    assert len(colours - {(0.0, 0.0, 0.0, 1.0)}) == len(_OPTIMIZERS), "one colour per optimizer (float64 is black)"
    # the reference exists for sgd only (the golden result's): the other optimizers' panels say there is none
    assert _texts(fig).count("no float64 reference") == len(grid.columns)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [*_OPTIMIZERS, "python", "float64"]


def test_the_ratio_heatmap_gives_every_entry_its_ratio_and_spread_or_its_reason() -> None:
    """Each optimizer × mode where both ran: R's loop median ÷ Python's and the two CVs combined; where R did not: why."""
    result = wide(_OPTIMIZERS)
    steady = {c.id: dataclasses.replace(c, timing=steady_timing(0.2 if c.frontend == "r" else 0.1)) for c in result.cells
              if c.ok and c.timing is not None}
    result = dataclasses.replace(result, cells=tuple(steady.get(c.id, c) for c in result.cells))
    table = plots.ratio_cells(result, "r", "python")
    assert len(table) == len(_OPTIMIZERS) * len(glance(result).columns)
    ran = [v for v in table.values() if v[0] is not None]
    assert ran and all(math.isclose(v[0], 2.0) and v[2] for v in ran)  # type: ignore[arg-type]
    assert {v[3] for v in table.values() if v[0] is None} == {"r unsupported"}
    fig = plots.timing_figure(result)
    texts = _texts(fig)
    assert texts.count("r unsupported") == len(table) - len(ran)
    assert sum(t.startswith("2.00\n±") for t in texts) == len(ran)
