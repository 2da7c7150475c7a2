"""The plots scale with the matrix: one panel per optimizer × script · mode (the grid's layout), each naming what it
shows and what did not run in it; the time ratios as a heatmap whose every entry has its number, spread or reason.
The main job drew 17 optimizers into one panel per mode, and cut its timing plot after 55 of 238 cells."""

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


def test_the_loss_curves_have_one_panel_per_optimizer_and_mode() -> None:
    result = without_r(wide(_OPTIMIZERS))
    grid = glance(result)
    fig = plots.losses_figure(result)
    assert len(fig.axes) == len(_OPTIMIZERS) * len(grid.columns)
    rows = [ax.get_ylabel().splitlines()[0] for ax in fig.axes if ax.get_ylabel()]
    assert rows == list(_OPTIMIZERS)
    assert [ax.get_title().replace("\n", " · ") for ax in fig.axes if ax.get_title()] == list(grid.columns)
    # every panel says R did not run in it; the reference exists for sgd only (the golden result's), and says so elsewhere
    assert _texts(fig).count("r skipped") == len(fig.axes)
    assert _texts(fig).count("no float64 reference") == (len(_OPTIMIZERS) - 1) * len(grid.columns)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["python", "float64"]


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
