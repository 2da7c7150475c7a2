"""The report's plots: losses per step and their differences as small multiples, and the time ratios as a heatmap.

The matrix is optimizers (and loop features) × script modes × frontends: 17 × 7 × 2 at the main job, and 23 loop features
each over a few optimizers in a few modes. One panel per optimizer (and feature) × mode drew 959 panels, 65 % of them
empty: 9 MB of pictures, most of the time the report took. So the loss plots are small multiples of a row per optimizer
family (:func:`panel_row`) and a column per script · mode (aligned as the at-a-glance grid's: :mod:`harness.views.glance`),
a panel only where a cell ran; in a panel each optimizer has its colour (its loop features' cells thin lines of it) and
each frontend its line style, and the panel names what did not run in it. The time ratios keep the grid's rows, each loop
feature folded into one. Each figure is drawn once, as a PNG (:func:`figure_png`): the report's file and the page's picture.

Drawn on ``matplotlib.figure.Figure`` objects rendered by the Agg canvas: no pyplot, no global backend switch, no
display, so it works on a headless CI machine and never touches another caller's matplotlib state.
Each file is written atomically.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import LogLocator, MaxNLocator, NullLocator
from PIL import Image

from harness.contract.models import DEFAULT_MODEL
from harness.files.atomic import atomic_path
from harness.model.result import CellResult, MatrixResult
from harness.model.timing import ratio
from harness.views.formatting import frontend_order
from harness.views.glance import column_key, fold_key, folded_label, row_key
from harness.workload.optimizers import OPTIMIZERS

__all__ = [
    "LEGEND_MAX_ENTRIES", "PICTURE_MAX_BYTES", "RATIO_MAX_PANELS", "figure_png", "loss_diff_figure", "losses_figure", "panel_row",
    "plot_loss_diff", "plot_losses", "plot_timing", "ratio_cells", "save_png", "timing_figure", "timing_samples",
]

_STYLE: dict[str, dict[str, Any]] = {
    "python": {"color": "tab:blue", "linestyle": "-"},
    "r": {"color": "tab:orange", "linestyle": "--"},
}
#: Styles for the installations a user named (``py28``, ``r28``), in the order the result lists them.
_MORE_STYLES: tuple[dict[str, Any], ...] = (
    {"color": "tab:green", "linestyle": "-."},
    {"color": "tab:purple", "linestyle": ":"},
    {"color": "tab:brown", "linestyle": "-"},
    {"color": "tab:pink", "linestyle": "--"},
    {"color": "tab:olive", "linestyle": "-."},
    {"color": "tab:cyan", "linestyle": ":"},
)
_REFERENCE_STYLE: dict[str, Any] = {"color": "black", "linestyle": ":", "linewidth": 1.2}
#: A frontend against the baseline in the |Δ loss| plot: solid, a little wider than the lines against float64.
_PAIR_LINE: dict[str, Any] = {"linestyle": "-", "linewidth": 1.3}
#: Its colour where one optimizer is drawn (where several are, the optimizer's).
_PAIR_COLOR = "tab:red"
#: The optimizers' colours where a panel draws several: tab10, then the dark half of tab20b (the main job has 17
#: optimizers; the light half of tab20 was too faint to tell on white).
_PALETTE: tuple[Any, ...] = tuple(tuple(float(v) for v in rgba) for rgba in (*matplotlib.colormaps["tab10"](np.arange(10)),
                                                                              *matplotlib.colormaps["tab20b"](np.arange(0, 20, 2))))
#: A legend lists at most this many lines; past it, the last entry says how many more there are. A merge of 100 inputs
#: drew a legend of 100 entries, far taller than its panel (the report's tables list every one).
LEGEND_MAX_ENTRIES = 12
#: The ratio heatmap draws one panel per frontend against the baseline, at most this many: a merge of 100 inputs would
#: draw 99. The figure's title names how many more there are; the report's speed table has every one.
RATIO_MAX_PANELS = 4
#: A small-multiples panel, in inches: wide enough for 20 steps and a few tick labels, short enough that 17 optimizers
#: fit a page's scroll. A grid of few columns gets wider panels (up to :data:`_PANEL_MAX_WIDTH`).
_PANEL_WIDTH, _PANEL_HEIGHT, _PANEL_MAX_WIDTH = 1.9, 1.25, 4.2
#: The small multiples' margins (left: the row's name and the y ticks; top: the title and the first row's column names;
#: bottom: the step axis, the legend below it) and the gaps between panels (the y ticks; the step axis and the next
#: row's column names), in inches.
_MARGINS, _GAPS = (0.95, 0.15, 0.75, 0.25), (0.45, 0.5)
#: The PNGs' resolution: a 17-inch figure is 1,900 pixels wide, sharp at the page's 1,500.
_DPI = 110
#: The PNGs' palette: anti-aliased lines in 17 optimizers' colours need no more to look as drawn.
_PNG_COLORS = 128
#: Each picture of the main job's report stays below this (issue 47: the loss plots were 4.8 and 4.1 MB; the page
#: carries them too: :data:`harness.views.page.PAGE_MAX_BYTES`). ``tests/unit/views/test_report_sizes.py`` holds it.
PICTURE_MAX_BYTES = 1_000_000
#: The ratio's colour scale reaches at least this far (log2 of R over Python: twice as slow or as fast), further where a
#: ratio does (to the next power of two).
_RATIO_SATURATION = 1.0


def plot_losses(result: MatrixResult, target: Path) -> Path:
    """The loss curves as a PNG (:func:`losses_figure`)."""
    return _save(losses_figure(result), target)


def plot_loss_diff(result: MatrixResult, target: Path) -> Path:
    """The loss differences as a PNG (:func:`loss_diff_figure`)."""
    return _save(loss_diff_figure(result), target)


def plot_timing(result: MatrixResult, target: Path) -> Path:
    """The time ratios as a PNG (:func:`timing_figure`)."""
    return _save(timing_figure(result), target)


def losses_figure(result: MatrixResult) -> Figure:
    """Loss per step as small multiples (:func:`panel_row` × script · mode, only where a cell ran): each cell that ran, its
    colour its optimizer's (its frontend's where one optimizer ran) and its line its frontend's, and float64 dotted."""
    def draw(ax: Axes, cells: list[CellResult], look: _Look) -> str | None:
        missing_reference = False
        lines = _Lines()
        for own in _by_optimizer(cells).values():
            for cell in own:
                lines.add(_losses(cell), look.color(cell), look.linestyle(cell.frontend), _width(cell))
            reference = _reference(result, own)
            if reference is None:
                missing_reference = True
                continue
            lines.add(reference, _REFERENCE_STYLE["color"], _REFERENCE_STYLE["linestyle"], _width(own[0]))
            look.mark("float64", _REFERENCE_STYLE)
        lines.draw(ax)
        if missing_reference:
            ax.text(0.98, 0.03, "no float64 reference", ha="right", va="bottom", transform=ax.transAxes, fontsize=6, color="0.3")
        return None

    return _small_multiples(result, "Loss per step", draw)


def loss_diff_figure(result: MatrixResult) -> Figure:
    """|Δloss| per step on a log scale, as small multiples like :func:`losses_figure`: each frontend against the baseline
    (solid), and each frontend against float64 (the baseline dotted, the others dashed).

    A log axis cannot show zero, so steps where two runs agree bitwise are left out of a line; a panel where every
    line is empty says "bitwise equal at every step" instead, and one with nothing to compare says so.
    """
    def draw(ax: Axes, cells: list[CellResult], look: _Look) -> str | None:
        compared = False
        lines = _Lines()
        for own in _by_optimizer(cells).values():
            reference = _reference(result, own)
            if reference is not None:
                for cell in own:
                    compared = True
                    lines.add_difference(_losses(cell), reference, look.color(cell), look.versus_float64(cell.frontend))
            first = own[0]
            for other in own[1:]:  # each frontend against the baseline (the first), on the baseline's device
                if other.device == first.device and first.frontend == look.baseline:
                    compared = True
                    lines.add_difference(_losses(first), _losses(other), look.pair_color(other), _PAIR_LINE, on_top=True)
        if lines:
            ax.set_yscale("log")
            lines.draw(ax)
            return None
        return "bitwise equal at every step" if compared else "nothing to compare: one frontend,\nno float64 reference"

    return _small_multiples(result, "|Δ loss| per step (log scale; steps where two runs are bitwise equal are not drawn)", draw)


def timing_figure(result: MatrixResult) -> Figure:
    """Each frontend's loop time ÷ the baseline's, one heatmap per frontend: optimizer × script · mode, and each loop
    feature folded into one row (:func:`harness.views.glance.fold_key`: the median of its optimizers' ratios).

    The colour is the ratio of the two loop medians (red: slower than the baseline); the text is the ratio and its
    spread (the two sides' coefficients of variation combined), or for a feature how many ratios its median is of. A
    ratio the spread does not support (:func:`harness.model.timing.ratio`) is hatched and starred; a cell where a side
    did not run is grey and says which. A row per optimizer and feature drew the main job's heatmap 59 inches tall.
    """
    frontends = frontend_order(result)
    base = frontends[0] if frontends else result.baseline
    others = frontends[1:]
    shown = others[:RATIO_MAX_PANELS]
    rows, columns = _axes_keys(result)
    folded = {row_key(c): folded_label(fold) for c in result.cells if (fold := fold_key(c)) is not None}
    rows = list(dict.fromkeys(folded.get(row, row) for row in rows))
    width = max(6.0, 1.6 + 1.35 * len(columns))
    height = 1.6 + 0.42 * max(len(rows), 1)
    fig = Figure(figsize=(width, height * max(len(shown), 1)), layout="constrained")
    more = f" (and {len(others) - len(shown)} more frontends: the report's speed table lists them)" if len(others) > len(shown) else ""
    fig.suptitle(f"Loop time ÷ {base}'s · {_title(result)}{more}", fontsize=10)
    if not shown:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, f"one frontend only ({base}): no time ratio to draw", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    axes = fig.subplots(len(shown), 1, squeeze=False)[:, 0]
    tables = {other: _folded_ratios(ratio_cells(result, other, base), folded) for other in shown}
    # one colour scale for every panel, as wide as the largest ratio either way (a whole power of two), at least twice:
    # R torch runs the tiny preset 3 to 20 times slower than PyTorch, which a fixed scale to twice drew all in one colour
    logs = [abs(math.log2(v[0])) for table in tables.values() for v in table.values() if v[0]]
    saturation = max(_RATIO_SATURATION, float(math.ceil(max(logs, default=0.0))))
    norm = TwoSlopeNorm(vmin=-saturation, vcenter=0.0, vmax=saturation)
    image = None
    for ax, other in zip(axes, shown, strict=True):
        table = tables[other]
        values = np.full((len(rows), len(columns)), np.nan)
        for (r, c), (value, _spread, _supported, _why, _n) in table.items():
            if value is not None:
                values[rows.index(r), columns.index(c)] = math.log2(value)
        image = ax.imshow(values, cmap="RdBu_r", norm=norm, aspect="auto")
        ax.set_facecolor("0.85")
        for (r, c), (value, spread, supported, why, n) in table.items():
            y, x = rows.index(r), columns.index(c)
            if value is None:
                ax.text(x, y, why, ha="center", va="center", fontsize=6, color="0.25")
                continue
            star = "" if supported else "*"
            text = f"{value:.2f}{star}" + (f"\nmedian of {n}" if n > 1 else f"\n±{spread:.0%}" if spread is not None else "")
            ax.text(x, y, text, ha="center", va="center", fontsize=6.5,
                    color="white" if abs(math.log2(value)) > 0.6 * saturation else "black")
            if not supported:
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, hatch="//", edgecolor=(1, 1, 1, 0.35), linewidth=0))
        ax.set_xticks(range(len(columns)), [c.replace(" · ", "\n") for c in columns], fontsize=7)
        ax.set_yticks(range(len(rows)), rows, fontsize=7)
        ax.xaxis.tick_top()
        ax.set_title(f"{other} ÷ {base} (loop time, median of the timed rounds)", fontsize=9)
        ax.set_xlabel(f"the number: {other} ÷ {base} (above 1: {other} is slower); ±: its spread (the two sides' CVs combined)\n"
                      "* and hatched: the spread is too wide for the report to print the ratio; grey: a side did not run; a loop feature's "
                      "row: the median of its optimizers' ratios", fontsize=7)
    if image is not None:
        bar = fig.colorbar(image, ax=list(axes), shrink=0.6, pad=0.01)
        step = 1 if saturation <= 4 else 2
        ticks = [float(t) for t in range(-int(saturation), int(saturation) + 1) if t % step == 0]
        bar.set_ticks(ticks, labels=[f"{2 ** t:g}×" if t >= 0 else f"1/{2 ** -t:g}×" for t in ticks], fontsize=7)
    return fig


def _folded_ratios(table: Mapping[tuple[str, str], tuple[float | None, float | None, bool, str]],
                   folded: Mapping[str, str]) -> dict[tuple[str, str], tuple[float | None, float | None, bool, str, int]]:
    """:func:`ratio_cells`' entries with each loop feature's rows folded into one (``folded``: grid row → its row): the
    median of the ratios there, supported where each is, and how many it is of (1: the entry as it was)."""
    groups: dict[tuple[str, str], list[tuple[float | None, float | None, bool, str]]] = {}
    for (row, column), entry in table.items():
        groups.setdefault((folded.get(row, row), column), []).append(entry)
    out: dict[tuple[str, str], tuple[float | None, float | None, bool, str, int]] = {}
    for key, entries in groups.items():
        if len(entries) == 1:
            out[key] = (*entries[0], 1)
            continue
        values = [e[0] for e in entries if e[0] is not None]
        if not values:
            out[key] = (None, None, False, "; ".join(dict.fromkeys(e[3] for e in entries)), len(entries))
            continue
        out[key] = (float(np.median(values)), None, all(e[2] for e in entries if e[0] is not None), "", len(values))
    return out


def ratio_cells(result: MatrixResult, other: str, base: str) -> dict[tuple[str, str], tuple[float | None, float | None, bool, str]]:
    """Per grid entry (row, column): ``other``'s loop median ÷ ``base``'s, their combined spread, whether
    :func:`harness.model.timing.ratio` supports the ratio, and why there is none (``"r skipped"``) where a side did not run."""
    several = len({c.device for c in result.cells}) > 1
    by_key: dict[tuple[str, str], dict[str, CellResult]] = {}
    for cell in result.cells:
        by_key.setdefault((row_key(cell), column_key(cell, several)), {})[cell.frontend] = cell
    table: dict[tuple[str, str], tuple[float | None, float | None, bool, str]] = {}
    for key, cells in by_key.items():
        a, b = cells.get(other), cells.get(base)
        if a is None and b is None:
            continue
        missing = [c for c in (b, a) if c is None or not c.ok or c.timing is None]
        if missing:
            why = "; ".join(f"{c.frontend} {c.status if not c.ok else 'not timed'}" for c in missing if c is not None)
            table[key] = (None, None, False, why or "not run")
            continue
        assert a is not None and b is not None and a.timing is not None and b.timing is not None
        value = a.timing.loop.median / b.timing.loop.median if b.timing.loop.median > 0 else None
        cvs = [a.timing.loop.cv, b.timing.loop.cv]
        spread = math.hypot(*cvs) if all(cv is not None for cv in cvs) else None  # type: ignore[arg-type]
        supported = ratio(a.timing, b.timing, result.protocol.interleave)[0] is not None
        table[key] = (value, spread, supported, "" if value is not None else "zero time")
    return table


def timing_samples(cell: CellResult, prefer_rounds: bool = True) -> tuple[list[float], str]:
    """A cell's timing samples and their unit: the loop time of each timed round, else seconds per epoch.

    The timed rounds are ``cell.timing.samples.loop_seconds`` (:mod:`harness.model.timing`); a cell that was
    not timed falls back to the spread of its record call's epochs.
    """
    samples = cell.timing.samples.loop_seconds if cell.timing else ()
    if prefer_rounds and samples:
        return [float(s) for s in samples], "round"
    return [float(s) for s in (cell.record.seconds_per_epoch if cell.record else ())], "epoch"


def figure_png(fig: Figure) -> bytes:
    """``fig`` as PNG bytes, drawn once for the report's file and its page (a ``data:`` URI), in :data:`_PNG_COLORS`
    colours: a third of the bytes of matplotlib's own PNG (0.51 MB to 0.13 MB for the main job's |Δ loss|), the lines the
    same to the eye."""
    canvas: Any = FigureCanvasAgg(fig)  # its draw() and buffer_rgba() have no annotations
    fig.set_dpi(_DPI)
    canvas.draw()
    width, height = canvas.get_width_height()
    image = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1).convert("RGB")
    buffer = io.BytesIO()
    image.quantize(colors=_PNG_COLORS, method=Image.Quantize.FASTOCTREE).save(buffer, format="PNG")
    return buffer.getvalue()


def _axes_keys(result: MatrixResult) -> tuple[list[str], list[str]]:
    """The grid's rows and columns, in matrix order, as :func:`harness.views.glance.glance` lays them out."""
    several = len({c.device for c in result.cells}) > 1
    rows = list(dict.fromkeys(row_key(c) for c in result.cells))
    columns = list(dict.fromkeys(column_key(c, several) for c in result.cells))
    return rows, columns


#: The small multiples' row of each optimizer family (:data:`harness.workload.optimizers.FAMILIES`), in that order.
_FAMILY_ROWS = {"r": "R-code optimizers", "ignite": "ignite optimizers"}
#: A loop feature's cell is drawn thinner than its optimizer's plain cell, in the same colour: a variation of it.
_FEATURE_LINE_WIDTH = 0.6


def panel_row(item: CellResult) -> str:
    """The row of the loss plots a cell is drawn in: its optimizer's family (``R-code optimizers``, ``ignite optimizers``).

    One panel per optimizer (and loop feature) × mode drew 959 panels for the main job, 65 % of them empty (a feature
    covers a few optimizers in a few modes): 9 MB of pictures and most of the time its report took. A row per family,
    each optimizer its colour and each loop feature's cells thin lines in it, draws every line in 14 panels. A model beside
    the MLP (its covering design) is a row of its own: small multiples by family, then by model.
    """
    if item.cell.model != DEFAULT_MODEL:  # a model beside the MLP: a row of its own (its few cells, every family)
        return f"{item.cell.model} (model)"
    row = OPTIMIZERS.get(item.optimizer)
    return _FAMILY_ROWS.get(row.family, f"{row.family} optimizers") if row is not None else "other optimizers"


class _Look:
    """How a figure's lines look, and what its legend lists (what was drawn, in the order it first was).

    Where the figure has one optimizer, a line's colour is its frontend's (:func:`_style`); where it has several, its
    optimizer's (:data:`_PALETTE`, in the optimizer table's order) and its frontend is told by the line alone.
    """

    def __init__(self, result: MatrixResult) -> None:
        self.result = result
        order = list(OPTIMIZERS)
        self.optimizers = sorted({c.optimizer for c in result.cells if c.ok and c.record},
                                 key=lambda name: (order.index(name) if name in order else len(order), name))
        self.many = len(self.optimizers) > 1
        self.baseline = (frontend_order(result) or [result.baseline])[0]
        #: Each legend entry drawn (label: line properties), optimizers apart from the rest.
        self.shown: dict[str, dict[str, Any]] = {}

    def color(self, cell: CellResult) -> Any:
        if self.many:
            return _PALETTE[self.optimizers.index(cell.optimizer) % len(_PALETTE)]
        return _style(cell.frontend, self.result)["color"]

    def linestyle(self, frontend: str) -> str:
        style = _style(frontend, self.result)
        self.mark(frontend, {"color": "0.3" if self.many else style["color"], "linestyle": style["linestyle"]})
        return str(style["linestyle"])

    def versus_float64(self, frontend: str) -> dict[str, Any]:
        """A frontend's distance from float64: its own line where one optimizer is drawn, else dotted (the baseline) or
        dashed (the others), thin: the pairs' solid lines are what the eye should find first."""
        if self.many:
            style: dict[str, Any] = {"linestyle": ":" if frontend == self.baseline else "--", "linewidth": 0.8}
            self.mark(f"{frontend} vs float64", {**style, "color": "0.3"})
            return style
        own = _style(frontend, self.result)
        self.mark(f"{frontend} vs float64", dict(own))
        return {"linestyle": own["linestyle"], "linewidth": 1.0}

    def pair_color(self, other: CellResult) -> Any:
        label = f"{self.baseline} vs {other.frontend}"
        if self.many:
            self.mark(label, {**_PAIR_LINE, "color": "0.3"})
            return self.color(other)
        several = len(frontend_order(self.result)) > 2
        color = _style(other.frontend, self.result)["color"] if several else _PAIR_COLOR
        self.mark(label, {**_PAIR_LINE, "color": color})
        return color

    def mark(self, label: str, style: Mapping[str, Any]) -> None:
        self.shown.setdefault(label, dict(style))

    def legend(self) -> tuple[list[Any], list[str]]:
        """The legend's handles and labels: each optimizer's colour (where several), then what else was drawn, at most
        :data:`LEGEND_MAX_ENTRIES` of those (the last entry says how many more)."""
        names = list(self.shown)
        handles = [Line2D([], [], **self.shown[name]) for name in names]
        if len(names) > LEGEND_MAX_ENTRIES:
            hidden = len(names) - (LEGEND_MAX_ENTRIES - 1)
            names = [*names[: LEGEND_MAX_ENTRIES - 1], f"… and {hidden} more (listed in the report's tables)"]
            handles = [*handles[: LEGEND_MAX_ENTRIES - 1], Line2D([], [], linestyle="none")]
        if self.many:
            colors = [Line2D([], [], color=_PALETTE[k % len(_PALETTE)], linewidth=2) for k in range(len(self.optimizers))]
            return [*colors, *handles], [*self.optimizers, *names]
        return handles, names


def _by_optimizer(cells: Sequence[CellResult]) -> dict[tuple[str, str, str], list[CellResult]]:
    """A panel's cells by optimizer, loop feature and model (a float64 reference each), in the order drawn."""
    out: dict[tuple[str, str, str], list[CellResult]] = {}
    for cell in cells:
        out.setdefault((cell.optimizer, cell.cell.feature, cell.cell.model), []).append(cell)
    return out


def _width(cell: CellResult) -> float:
    """A loop feature's line is thinner than its optimizer's plain one (:data:`_FEATURE_LINE_WIDTH`)."""
    return 1.0 if fold_key(cell) is None else _FEATURE_LINE_WIDTH


def _small_multiples(result: MatrixResult, title: str, draw: Callable[[Axes, list[CellResult], _Look], str | None]) -> Figure:
    """One row per :func:`panel_row`, one panel per script · mode where a cell of that row ran (columns aligned as the
    grid's), drawn by ``draw`` (which returns ``None`` where it drew a line, else what the panel says instead); each panel
    names the cells of it that did not run. Where no cell of a row and column ran there is no panel: the figure says how
    many."""
    several = len({c.device for c in result.cells}) > 1
    columns = list(dict.fromkeys(column_key(c, several) for c in result.cells))
    entries: dict[str, dict[str, list[CellResult]]] = {}
    for cell in result.cells:
        entries.setdefault(panel_row(cell), {}).setdefault(column_key(cell, several), []).append(cell)
    families = [name for name in _FAMILY_ROWS.values() if name in entries]
    order = frontend_order(result)
    rows = []
    for name in [*families, *(name for name in entries if name not in families)]:
        panels = [(columns.index(column), column, here, sorted((c for c in here if c.ok and c.record),
                                                                key=lambda c: (_rank(order, c.frontend), c.device)))
                  for column, here in entries[name].items()]
        rows.append((name, sorted(panels, key=lambda p: p[0])))
    not_drawn = sum(1 for _, panels in rows for panel in panels if not panel[3])
    rows = [(name, [p for p in panels if p[3]]) for name, panels in rows]
    rows = [(name, panels) for name, panels in rows if panels]
    if not rows:
        fig = Figure(figsize=(6, 2))
        fig.text(0.5, 0.5, "no cell ran" if result.cells else "no cells", ha="center", va="center")
        fig.suptitle(f"{title} · {_title(result)}", fontsize=10)
        return fig
    look = _Look(result)
    width = min(_PANEL_MAX_WIDTH, max(_PANEL_WIDTH, 12.0 / len(columns)))
    (left, right, top, bottom), (gap_x, gap_y) = _MARGINS, _GAPS
    fig_width = left + right + width * len(columns) + gap_x * (len(columns) - 1)
    fig = Figure(figsize=(fig_width, 1.0))
    drawn: list[tuple[Axes, int, int, list[CellResult], str | None]] = []
    for i, (name, panels) in enumerate(rows):
        for k, (j, column, here, ran) in enumerate(panels):
            ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))  # placed below, once the legend's height is known
            drawn.append((ax, i, j, here, draw(ax, ran, look)))
            if k == 0:
                ax.set_ylabel(name, fontsize=7)
            ax.set_title(column.replace(" · ", "\n", 1), fontsize=6.5, pad=2)
    handles, labels = look.legend()
    ncols = min(max(len(labels), 1), 9)
    legend_height = 0.2 * math.ceil(len(labels) / ncols) if labels else 0.0
    note_height = 0.2 if not_drawn else 0.0
    fig_height = top + bottom + legend_height + note_height + _PANEL_HEIGHT * len(rows) + gap_y * (len(rows) - 1)
    fig.set_size_inches(fig_width, fig_height)
    for ax, i, j, here, empty in drawn:
        x = left + j * (width + gap_x)
        y = fig_height - top - (i + 1) * _PANEL_HEIGHT - i * gap_y
        ax.set_position((x / fig_width, y / fig_height, width / fig_width, _PANEL_HEIGHT / fig_height))
        _panel(ax, here, empty)
    fig.suptitle(f"{title} · {_title(result)}", fontsize=10, y=1 - 0.08 / fig_height, va="top")
    if handles:
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, (0.05 + note_height) / fig_height), ncols=ncols,
                   fontsize=7.5, frameon=False)
    if not_drawn:
        fig.text(0.5, 0.06 / fig_height, f"{not_drawn} script · mode columns of a row where no cell ran are not drawn (the "
                 "report's tables list their cells and why)", ha="center", va="bottom", fontsize=7, color="0.3")
    return fig


def _panel(ax: Axes, cells: Sequence[CellResult], empty: str | None) -> None:
    """Ticks small, and the cells that did not run named inside the panel, counted by frontend and status (nothing is left
    out silently); a panel where nothing was drawn has no ticks and says why in its middle (``empty``)."""
    counts: dict[str, int] = {}
    for cell in cells:
        if not cell.ok:
            key = f"{cell.frontend} {cell.status}"
            counts[key] = counts.get(key, 0) + 1
    missing = [key if n == 1 else f"{key} ×{n}" for key, n in counts.items()]
    if empty is not None:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.text(0.5, 0.5, "\n".join([*([empty] if empty else []), *missing]), ha="center", va="center", transform=ax.transAxes,
                fontsize=6.5, color="0.3")
        return
    ax.tick_params(which="both", labelsize=6, pad=1.5)
    ax.xaxis.set_major_locator(MaxNLocator(4, integer=True))
    if ax.get_yscale() == "linear":
        ax.yaxis.set_major_locator(MaxNLocator(3))
    else:  # a log axis's minor ticks and their labels were half the time of drawing 119 panels
        ax.yaxis.set_major_locator(LogLocator(numticks=4))
        ax.yaxis.set_minor_locator(NullLocator())
    ax.grid(alpha=0.3)
    if missing:
        ax.text(0.02, 0.97, "\n".join(missing), ha="left", va="top", transform=ax.transAxes, fontsize=6, color="tab:red")


def _rank(order: list[str], frontend: str) -> int:
    return order.index(frontend) if frontend in order else len(order)


def _title(result: MatrixResult) -> str:
    spec = result.spec
    return f"preset {spec.preset} · {spec.device} · {spec.amp_dtype} · {result.steps} steps"


class _Lines:
    """A panel's lines, gathered by how they look and drawn as one ``LineCollection`` each: the main job draws 1,900
    lines in 28 panels, and a ``Line2D`` each was most of the time its loss plots took."""

    def __init__(self) -> None:
        #: (linestyle, linewidth, zorder) → the segments and their colours.
        self._groups: dict[tuple[str, float, float], tuple[list[np.ndarray], list[Any]]] = {}

    def __bool__(self) -> bool:
        return bool(self._groups)

    def add(self, values: np.ndarray, color: Any, linestyle: str, linewidth: float, on_top: bool = False) -> None:
        """``values`` per step, as one line broken where a value is missing (NaN, as ``Line2D`` breaks it)."""
        steps = np.arange(values.size, dtype=np.float64)
        finite = np.isfinite(values)
        # the runs of consecutive finite values: a line of each that has two points at least
        edges = np.flatnonzero(np.diff(np.concatenate(([0], finite.astype(np.int8), [0]))))
        segments, colors = self._groups.setdefault((linestyle, linewidth, 2.5 if on_top else 2.0), ([], []))
        for start, stop in zip(edges[0::2], edges[1::2], strict=True):
            if stop - start > 1:
                segments.append(np.column_stack((steps[start:stop], values[start:stop])))
                colors.append(color)

    def add_difference(self, a: np.ndarray, b: np.ndarray, color: Any, style: Mapping[str, Any], on_top: bool = False) -> None:
        """|a − b| per step, where it is not zero (a log axis cannot show zero: those steps break the line)."""
        n = min(a.size, b.size)
        diff = np.abs(a[:n] - b[:n])
        if np.any(diff > 0):
            self.add(np.where(diff > 0, diff, np.nan), color, str(style.get("linestyle", "-")), float(style.get("linewidth", 1.1)), on_top)

    def draw(self, ax: Axes) -> None:
        for (linestyle, linewidth, zorder), (segments, colors) in self._groups.items():
            if segments:
                ax.add_collection(LineCollection(segments, colors=colors, linestyles=linestyle, linewidths=linewidth, zorder=zorder))
        ax.autoscale_view()


def _reference(result: MatrixResult, cells: list[CellResult]) -> np.ndarray | None:
    """The float64 losses of ``cells`` (one optimizer, loop feature and script · mode), or ``None`` where the result has none."""
    if not cells:
        return None
    reference = result.run_of(cells[0]).reference or result.reference  # the cells' model's (a matrix of several models)
    clip, optimizer, feature = cells[0].cell.properties.clip, cells[0].optimizer, cells[0].cell.feature
    # A scaler run that skipped steps is drawn against the reference replayed over those steps.
    skipped = next((c.record.skipped_step_indices for c in cells if c.record), frozenset())
    losses = reference.losses_for(optimizer, clip, skipped, feature) or reference.losses_for(optimizer, clip, (), feature)
    return np.array([np.nan if v is None else v for v in losses], dtype=np.float64) if losses else None


def _losses(cell: CellResult) -> np.ndarray:
    assert cell.record is not None, "only cells that ran are drawn"
    return np.array([np.nan if v is None else v for v in cell.record.losses], dtype=np.float64)


def _style(frontend: str, result: MatrixResult | None = None) -> dict[str, Any]:
    if frontend in _STYLE:
        return _STYLE[frontend]
    others = [f for f in frontend_order(result) if f not in _STYLE] if result is not None else []
    return _MORE_STYLES[others.index(frontend) % len(_MORE_STYLES) if frontend in others else 0]


def save_png(fig: Figure, target: Path) -> Path:
    """``fig`` written to ``target`` as a PNG, atomically."""
    return _save(fig, target)


def _save(fig: Figure, target: Path) -> Path:
    with atomic_path(target) as tmp:
        tmp.write_bytes(figure_png(fig))
    return target
