"""The report's plots: losses per step and their differences as small multiples, and the time ratios as a heatmap.

The matrix is optimizers (and loop features) × script modes × frontends: 17 × 7 × 2 at the main job. A plot that draws
a mode's 17 optimizers into one panel tells no line from another, so every plot is a grid laid out as the at-a-glance
grid is (:mod:`harness.views.glance`: one row per optimizer, one column per script · mode), and every panel says what
did not run in it rather than leaving it blank. The same figures are written as PNG (the markdown's) and as SVG (the
HTML page's, inline).

Drawn on ``matplotlib.figure.Figure`` objects rendered by the Agg canvas (or the SVG backend): no pyplot, no global
backend switch, no display, so it works on a headless CI machine and never touches another caller's matplotlib state.
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
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import LogLocator, MaxNLocator, NullLocator

from harness.files.atomic import atomic_path
from harness.model.result import CellResult, MatrixResult
from harness.model.timing import ratio
from harness.views.formatting import frontend_order
from harness.views.glance import column_key, row_key

__all__ = [
    "LEGEND_MAX_ENTRIES", "RATIO_MAX_PANELS", "figure_svg", "loss_diff_figure", "losses_figure", "plot_loss_diff",
    "plot_losses", "plot_timing", "ratio_cells", "save_png", "timing_figure", "timing_samples",
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
_PAIR_STYLE: dict[str, Any] = {"color": "tab:red", "linestyle": "-"}
#: A legend lists at most this many lines; past it, the last entry says how many more there are. A merge of 100 inputs
#: drew a legend of 100 entries, far taller than its panel (the report's tables list every one).
LEGEND_MAX_ENTRIES = 12
#: The ratio heatmap draws one panel per frontend against the baseline, at most this many: a merge of 100 inputs would
#: draw 99. The figure's title names how many more there are; the report's speed table has every one.
RATIO_MAX_PANELS = 4
#: A small-multiples panel, in inches: wide enough for 20 steps and a few tick labels, short enough that 17 optimizers
#: fit a page's scroll. A grid of few columns gets wider panels (up to :data:`_PANEL_MAX_WIDTH`).
_PANEL_WIDTH, _PANEL_HEIGHT, _PANEL_MAX_WIDTH = 1.9, 1.25, 4.2
#: The small multiples' margins (left: the row's name and the y ticks; top: the title and the column names; bottom: the
#: step axis and the legend) and the gaps between panels (the y ticks; the panel's notes), in inches.
_MARGINS, _GAPS = (0.95, 0.15, 0.85, 0.8), (0.45, 0.2)
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
    """Loss per step, one panel per optimizer (and feature) × script · mode: every frontend that ran, and float64."""
    def draw(ax: Axes, cells: list[CellResult], reference: np.ndarray | None) -> str | None:
        for cell in cells:
            losses = _losses(cell)
            ax.plot(np.arange(losses.size), losses, label=cell.frontend, linewidth=1.1, **_style(cell.frontend, result))
        if reference is not None:
            ax.plot(np.arange(reference.size), reference, label="float64", **_REFERENCE_STYLE)
        elif cells:
            ax.text(0.98, 0.03, "no float64 reference", ha="right", va="bottom", transform=ax.transAxes, fontsize=6, color="0.3")
        return None if cells else ""

    return _grid(result, "Loss per step", "loss", draw)


def loss_diff_figure(result: MatrixResult) -> Figure:
    """|Δloss| per step on a log scale, per panel: each frontend vs float64, and each frontend vs the baseline.

    A log axis cannot show zero, so steps where two runs agree bitwise are left out of a line; a panel where every
    line is empty says "bitwise equal at every step" instead, and one with nothing to compare says so.
    """
    def draw(ax: Axes, cells: list[CellResult], reference: np.ndarray | None) -> str | None:
        drawn = False
        if reference is not None:
            for cell in cells:
                drawn |= _diff_line(ax, _losses(cell), reference, f"{cell.frontend} vs float64", _style(cell.frontend, result))
        for b in cells[1:]:  # each frontend against the baseline (the first), on the baseline's device
            a = cells[0]
            if b.device == a.device:
                style = _PAIR_STYLE if len(cells) == 2 else {**_PAIR_STYLE, "color": _style(b.frontend, result)["color"]}
                drawn |= _diff_line(ax, _losses(a), _losses(b), f"{a.frontend} vs {b.frontend}", style)
        if drawn:
            ax.set_yscale("log")
            return None
        if cells and (reference is not None or len(cells) > 1):
            return "bitwise equal at every step"
        return "nothing to compare: one frontend,\nno float64 reference" if cells else ""

    return _grid(result, "|Δ loss| per step (log scale; steps where two runs are bitwise equal are not drawn)", "|Δ loss|", draw)


def timing_figure(result: MatrixResult) -> Figure:
    """Each frontend's loop time ÷ the baseline's, one heatmap per frontend: optimizer (and feature) × script · mode.

    The colour is the ratio of the two loop medians (red: slower than the baseline); the text is the ratio and its
    spread (the two sides' coefficients of variation combined). A ratio the spread does not support
    (:func:`harness.model.timing.ratio`) is hatched and starred; a cell where a side did not run is grey and says which.
    """
    frontends = frontend_order(result)
    base = frontends[0] if frontends else result.baseline
    others = frontends[1:]
    shown = others[:RATIO_MAX_PANELS]
    rows, columns = _axes_keys(result)
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
    tables = {other: ratio_cells(result, other, base) for other in shown}
    # one colour scale for every panel, as wide as the largest ratio either way (a whole power of two), at least twice:
    # R torch runs the tiny preset 3 to 20 times slower than PyTorch, which a fixed scale to twice drew all in one colour
    logs = [abs(math.log2(v[0])) for table in tables.values() for v in table.values() if v[0]]
    saturation = max(_RATIO_SATURATION, float(math.ceil(max(logs, default=0.0))))
    norm = TwoSlopeNorm(vmin=-saturation, vcenter=0.0, vmax=saturation)
    image = None
    for ax, other in zip(axes, shown, strict=True):
        table = tables[other]
        values = np.full((len(rows), len(columns)), np.nan)
        for (r, c), (value, _spread, _supported, _why) in table.items():
            if value is not None:
                values[rows.index(r), columns.index(c)] = math.log2(value)
        image = ax.imshow(values, cmap="RdBu_r", norm=norm, aspect="auto")
        ax.set_facecolor("0.85")
        for (r, c), (value, spread, supported, why) in table.items():
            y, x = rows.index(r), columns.index(c)
            if value is None:
                ax.text(x, y, why, ha="center", va="center", fontsize=6, color="0.25")
                continue
            star = "" if supported else "*"
            text = f"{value:.2f}{star}" + (f"\n±{spread:.0%}" if spread is not None else "")
            ax.text(x, y, text, ha="center", va="center", fontsize=6.5,
                    color="white" if abs(math.log2(value)) > 0.6 * saturation else "black")
            if not supported:
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, hatch="//", edgecolor=(1, 1, 1, 0.35), linewidth=0))
        ax.set_xticks(range(len(columns)), [c.replace(" · ", "\n") for c in columns], fontsize=7)
        ax.set_yticks(range(len(rows)), rows, fontsize=7)
        ax.xaxis.tick_top()
        ax.set_title(f"{other} ÷ {base} (loop time, median of the timed rounds)", fontsize=9)
        ax.set_xlabel(f"the number: {other} ÷ {base} (above 1: {other} is slower); ±: its spread (the two sides' CVs combined)\n"
                      "* and hatched: the spread is too wide for the report to print the ratio; grey: a side did not run", fontsize=7)
    if image is not None:
        bar = fig.colorbar(image, ax=list(axes), shrink=0.6, pad=0.01)
        step = 1 if saturation <= 4 else 2
        ticks = [float(t) for t in range(-int(saturation), int(saturation) + 1) if t % step == 0]
        bar.set_ticks(ticks, labels=[f"{2 ** t:g}×" if t >= 0 else f"1/{2 ** -t:g}×" for t in ticks], fontsize=7)
    return fig


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


def figure_svg(fig: Figure) -> str:
    """``fig`` as an SVG document's text, its text kept as text (searchable, and a tenth of the size of glyph paths)."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "amp-parity"}):
        fig.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # the XML declaration and doctype have no place inside an HTML page


def _axes_keys(result: MatrixResult) -> tuple[list[str], list[str]]:
    """The grid's rows and columns, in matrix order, as :func:`harness.views.glance.glance` lays them out."""
    several = len({c.device for c in result.cells}) > 1
    rows = list(dict.fromkeys(row_key(c) for c in result.cells))
    columns = list(dict.fromkeys(column_key(c, several) for c in result.cells))
    return rows, columns


def _grid(result: MatrixResult, title: str, ylabel: str,
          draw: Callable[[Axes, list[CellResult], np.ndarray | None], str | None]) -> Figure:
    """Small multiples: one panel per row × column of the grid, drawn by ``draw`` (which returns ``None`` where it drew,
    else what the empty panel says); a panel names what did not run in it."""
    rows, columns = _axes_keys(result)
    if not rows:
        fig = Figure(figsize=(6, 2), layout="constrained")
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no cells", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        fig.suptitle(f"{title} · {_title(result)}", fontsize=10)
        return fig
    several = len({c.device for c in result.cells}) > 1
    cells: dict[tuple[str, str], list[CellResult]] = {}
    for cell in result.cells:
        cells.setdefault((row_key(cell), column_key(cell, several)), []).append(cell)
    width = min(_PANEL_MAX_WIDTH, max(_PANEL_WIDTH, 12.0 / len(columns)))
    # Laid out by hand, in inches: a layout engine measured every one of 119 panels' labels at each save (most of the
    # time a report took). The text is of fixed size, so fixed margins hold it.
    (left, right, top, bottom), (gap_x, gap_y) = _MARGINS, _GAPS
    fig_width = left + right + width * len(columns) + gap_x * (len(columns) - 1)
    fig_height = top + bottom + _PANEL_HEIGHT * len(rows) + gap_y * (len(rows) - 1)
    fig = Figure(figsize=(fig_width, fig_height))
    fig.subplots_adjust(left=left / fig_width, right=1 - right / fig_width, top=1 - top / fig_height, bottom=bottom / fig_height,
                        wspace=gap_x / width, hspace=gap_y / _PANEL_HEIGHT)
    axes = fig.subplots(len(rows), len(columns), squeeze=False)  # not sharex: 119 shared axes autoscale each other, quadratic
    order = frontend_order(result)
    for i, row in enumerate(rows):
        for j, column in enumerate(columns):
            ax = axes[i, j]
            here = cells.get((row, column), [])
            ran = sorted((c for c in here if c.ok and c.record), key=lambda c: (_rank(order, c.frontend), c.device))
            _panel(ax, here, draw(ax, ran, _reference(result, ran)))
            if i == 0:
                ax.set_title(column.replace(" · ", "\n", 1), fontsize=7)
            if j == 0:
                ax.set_ylabel(f"{row}\n{ylabel}", fontsize=7)
            if i == len(rows) - 1:
                ax.set_xlabel("step", fontsize=7)
    fig.suptitle(f"{title} · {_title(result)}", fontsize=10, y=1 - 0.08 / fig_height, va="top")
    _figure_legend(fig, axes.flat, (0.5, 0.04 / fig_height))
    return fig


def _panel(ax: Axes, cells: Sequence[CellResult], empty: str | None) -> None:
    """Ticks small, and the frontends that did not run named inside the panel (nothing is left out silently); an
    ``empty`` panel (nothing drawn) has no ticks and says why in its middle."""
    missing = [f"{c.frontend} {c.status}" for c in cells if not c.ok] if cells else ["not in this result"]
    if empty is not None:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.text(0.5, 0.5, "\n".join([*([empty] if empty else []), *missing]), ha="center", va="center", transform=ax.transAxes,
                fontsize=6.5, color="0.3")
        return
    ax.tick_params(which="both", labelsize=6)
    ax.xaxis.set_major_locator(MaxNLocator(4, integer=True))
    if ax.get_yscale() == "linear":
        ax.yaxis.set_major_locator(MaxNLocator(3))
    else:  # a log axis's minor ticks and their labels were half the time of drawing 119 panels
        ax.yaxis.set_major_locator(LogLocator(numticks=4))
        ax.yaxis.set_minor_locator(NullLocator())
    ax.grid(alpha=0.3)
    if missing:
        ax.text(0.02, 0.97, "\n".join(missing), ha="left", va="top", transform=ax.transAxes, fontsize=6, color="tab:red")


def _figure_legend(fig: Figure, axes: Any, anchor: tuple[float, float]) -> None:
    """One legend for the figure: each label once (every panel draws the same lines), at most :data:`LEGEND_MAX_ENTRIES`."""
    unique: dict[str, Any] = {}
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        for label, handle in zip(labels, handles, strict=True):
            unique.setdefault(label, handle)
    if not unique:
        return
    names, shown = list(unique), list(unique.values())
    if len(names) > LEGEND_MAX_ENTRIES:
        hidden = len(names) - (LEGEND_MAX_ENTRIES - 1)
        names = [*names[: LEGEND_MAX_ENTRIES - 1], f"… and {hidden} more (listed in the report's tables)"]
        shown = [*shown[: LEGEND_MAX_ENTRIES - 1], Line2D([], [], linestyle="none")]
    fig.legend(shown, names, loc="lower center", bbox_to_anchor=anchor, ncols=min(len(names), 6), fontsize=8, frameon=False)


def _rank(order: list[str], frontend: str) -> int:
    return order.index(frontend) if frontend in order else len(order)


def _title(result: MatrixResult) -> str:
    spec = result.spec
    return f"preset {spec.preset} · {spec.device} · {spec.amp_dtype} · {result.steps} steps"


def _diff_line(ax: Axes, a: np.ndarray, b: np.ndarray, label: str, style: Mapping[str, Any]) -> bool:
    n = min(a.size, b.size)
    diff = np.abs(a[:n] - b[:n])
    shown = np.where(diff > 0, diff, np.nan)
    if np.all(np.isnan(shown)):
        ax.plot([], [], label=label, **style)  # in the legend, though equal here: another panel may draw it
        return False
    ax.plot(np.arange(n), shown, label=label, linewidth=1.1, **style)
    return True


def _reference(result: MatrixResult, cells: list[CellResult]) -> np.ndarray | None:
    if not cells:
        return None
    reference, clip, optimizer = result.reference, cells[0].cell.properties.clip, cells[0].optimizer
    # A scaler run that skipped steps is drawn against the reference replayed over those steps.
    skipped = next((c.record.skipped_step_indices for c in cells if c.record), frozenset())
    losses = reference.losses_for(optimizer, clip, skipped) or reference.losses_for(optimizer, clip)
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
        fig.savefig(tmp, format="png", dpi=110)
    return target
