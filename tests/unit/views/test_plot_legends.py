"""A merge of many inputs draws readable plots: the legend has a bounded number of entries (the last says how many more),
and the ratio heatmap a bounded number of panels. A merge of 100 inputs drew a legend of a hundred entries over its panel."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from harness.model.result import MatrixResult
from harness.views import plots
from harness.workload.matrix import Cell
from tests.twins import golden


def _many(count: int) -> MatrixResult:
    """The golden Python cells as ``count`` labelled inputs would merge them (``m0.python`` … ``mN.python``)."""
    base = [c for c in golden().cells if c.frontend == "python"]
    names = [f"m{k}.python" for k in range(count)]
    cells = tuple(dataclasses.replace(c, cell=Cell(name, c.script, c.mode, c.optimizer, c.device)) for name in names for c in base)
    return dataclasses.replace(golden(), cells=cells, frontends=tuple(names), baseline=names[0], pairs=(), traces=())


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the plots draw, kept instead of written."""
    figures: list[Figure] = []

    def keep(fig: Figure, target: Path) -> Path:
        figures.append(fig)
        return target

    monkeypatch.setattr(plots, "_save", keep)
    return figures


@pytest.mark.parametrize("plot", [plots.plot_losses, plots.plot_loss_diff])
def test_a_merge_of_a_hundred_inputs_keeps_every_legend_bounded(drawn: list[Figure], tmp_path: Path, plot: Any) -> None:
    """The figure's one legend lists at most LEGEND_MAX_ENTRIES entries, the last saying how many more there are."""
    plot(_many(100), tmp_path / "plot.png")
    (fig,) = drawn
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in fig.axes), "one legend for the figure, none per panel"
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(texts) == plots.LEGEND_MAX_ENTRIES
    if plot is plots.plot_losses:  # 100 frontends and float64: 11 entries, then the 90 others counted
        assert texts[:2] == ["m0.python", "m1.python"] and texts[-1] == "… and 90 more (listed in the report's tables)"


def test_the_ratio_heatmap_of_a_hundred_inputs_has_bounded_panels(drawn: list[Figure], tmp_path: Path) -> None:
    """99 frontends against the baseline: RATIO_MAX_PANELS heatmaps, and the title says how many more the table lists."""
    plots.plot_timing(_many(100), tmp_path / "timing.png")
    (fig,) = drawn
    heatmaps = [ax for ax in fig.axes if ax.get_images()]
    assert len(heatmaps) == plots.RATIO_MAX_PANELS
    assert "(and 95 more frontends: the report's speed table lists them)" in fig.get_suptitle()


def test_a_few_inputs_are_all_in_the_legend(drawn: list[Figure], tmp_path: Path) -> None:
    """Below the bound nothing changes: three inputs and the float64 reference in the figure's legend."""
    plots.plot_losses(_many(3), tmp_path / "losses.png")
    texts = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert texts == ["m0.python", "m1.python", "m2.python", "float64"]
