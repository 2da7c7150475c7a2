"""The report's PNG plots: losses per step, their differences on a log scale, and time per cell.

Drawn on ``matplotlib.figure.Figure`` objects rendered by the Agg canvas: no pyplot, no global
backend switch, no display, so it works on a headless CI machine and never touches another
caller's matplotlib state. Each file is written atomically.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from harness.contract.modes import all_mode_names
from harness.files.atomic import atomic_path
from harness.model.result import CellResult, MatrixResult
from harness.views.formatting import frontend_order

__all__ = ["LEGEND_MAX_ENTRIES", "TIMING_MAX_ROWS", "plot_loss_diff", "plot_losses", "plot_timing", "timing_samples"]

_STYLE: dict[str, dict[str, Any]] = {
    "python": {"color": "tab:blue", "linestyle": "-", "marker": "o"},
    "r": {"color": "tab:orange", "linestyle": "--", "marker": "x"},
}
#: Styles for the installations a user named (``py28``, ``r28``), in the order the result lists them.
_MORE_STYLES: tuple[dict[str, Any], ...] = (
    {"color": "tab:green", "linestyle": "-.", "marker": "^"},
    {"color": "tab:purple", "linestyle": ":", "marker": "v"},
    {"color": "tab:brown", "linestyle": "-", "marker": "D"},
    {"color": "tab:pink", "linestyle": "--", "marker": "P"},
    {"color": "tab:olive", "linestyle": "-.", "marker": "*"},
    {"color": "tab:cyan", "linestyle": ":", "marker": "h"},
)
_REFERENCE_STYLE: dict[str, Any] = {"color": "black", "linestyle": ":", "linewidth": 1.5}
#: A legend lists at most this many lines; past it, the last entry says how many more there are. A merge of 100 inputs
#: drew a legend of 100 entries, far taller than its panel (the report's tables list every one).
LEGEND_MAX_ENTRIES = 12
#: The timing plot draws at most this many cells, one row each (0.45 inch a row): a merge of 100 inputs made a figure
#: of hundreds of rows. The rest are named in the last row; the report's timing table has every one.
TIMING_MAX_ROWS = 48
_PAIR_STYLE: dict[str, Any] = {"color": "tab:red", "linestyle": "-", "marker": "s"}


def plot_losses(result: MatrixResult, target: Path) -> Path:
    """Loss per step, one panel per mode: every frontend that ran, and the float64 reference."""
    fig, panels = _panels(result, "Loss per step")
    for mode, ax in panels.items():
        cells = _ok_cells(result, mode)
        reference = _reference(result, mode)
        for cell in cells:
            losses = _losses(cell)
            ax.plot(np.arange(losses.size), losses, label=cell.frontend, markersize=3, **_style(cell.frontend, result))
        if reference is not None:
            ax.plot(np.arange(reference.size), reference, label="float64", **_REFERENCE_STYLE)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        _finish(ax, result, mode, bool(cells))
    return _save(fig, target)


def plot_loss_diff(result: MatrixResult, target: Path) -> Path:
    """|Δloss| per step on a log scale: each frontend vs float64, and frontend vs frontend.

    A log axis cannot show zero, so steps where two runs agree bitwise are left out of a line, and a
    line that would be empty says so in the legend instead ("equal at every step").
    """
    fig, panels = _panels(result, "|Δ loss| per step (log scale; steps where two runs are bitwise equal are not drawn)")
    for mode, ax in panels.items():
        cells = _ok_cells(result, mode)
        reference = _reference(result, mode)
        drawn = False
        if reference is not None:
            for cell in cells:
                drawn |= _diff_line(ax, _losses(cell), reference, f"{cell.frontend} vs float64", _style(cell.frontend, result))
        for b in cells[1:]:  # each frontend against the baseline (the first), on the baseline's device
            a = cells[0]
            if b.device != a.device:
                continue
            style = _PAIR_STYLE if len(cells) == 2 else {**_PAIR_STYLE, "color": _style(b.frontend, result)["color"]}
            drawn |= _diff_line(ax, _losses(a), _losses(b), f"{a.frontend} vs {b.frontend}", style)
        ax.set_xlabel("step")
        ax.set_ylabel("|Δ loss|")
        if drawn:
            ax.set_yscale("log")
        empty = "no float64 reference and one frontend: nothing to compare" if cells and reference is None and len(cells) < 2 else None
        _finish(ax, result, mode, bool(cells) and empty is None, empty)
    return _save(fig, target)


def plot_timing(result: MatrixResult, target: Path) -> Path:
    """Time per cell with its spread (median, min–max whiskers, every sample as a dot)."""
    ran = [c for c in result.cells if c.ok and c.record]
    cells = ran[:TIMING_MAX_ROWS]
    rounds = bool(cells) and all(timing_samples(c)[1] == "round" for c in cells)
    fig = Figure(figsize=(9, 1.2 + 0.45 * max(len(cells) + (len(ran) > len(cells)), 1)), layout="constrained")
    ax = fig.add_subplot()
    for row, cell in enumerate(cells):
        samples, _unit = timing_samples(cell, rounds)
        if not samples:
            continue
        median = float(np.median(samples))
        style = _style(cell.frontend, result)
        ax.errorbar(
            [median], [row], xerr=[[median - min(samples)], [max(samples) - median]],
            fmt="D", color=style["color"], capsize=4, label=cell.frontend,
        )
        ax.plot(samples, [row] * len(samples), "|", color=style["color"], alpha=0.6, markersize=10)
    more = [f"… and {len(ran) - len(cells)} more cells (the report's timing table lists them)"] if len(ran) > len(cells) else []
    ax.set_yticks(range(len(cells) + len(more)), [f"{c.mode} · {c.frontend}" for c in cells] + more)
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    unit = "loop seconds per timed round" if rounds else "seconds per epoch (the script's own clock)"
    ax.set_xlabel(f"{unit}: ◆ median, whiskers min–max, | each sample")
    ax.grid(axis="x", alpha=0.3)
    if not cells:
        ax.text(0.5, 0.5, "no cell ran", ha="center", va="center", transform=ax.transAxes)
    _dedupe_legend(ax)
    fig.suptitle(f"Time per cell · {_title(result)}")
    return _save(fig, target)


def timing_samples(cell: CellResult, prefer_rounds: bool = True) -> tuple[list[float], str]:
    """A cell's timing samples and their unit: the loop time of each timed round, else seconds per epoch.

    The timed rounds are ``cell.timing.samples.loop_seconds`` (:mod:`harness.model.timing`); a cell that was
    not timed falls back to the spread of its record call's epochs.
    """
    samples = cell.timing.samples.loop_seconds if cell.timing else ()
    if prefer_rounds and samples:
        return [float(s) for s in samples], "round"
    return [float(s) for s in (cell.record.seconds_per_epoch if cell.record else ())], "epoch"


def _modes(result: MatrixResult) -> list[str]:
    present = {c.mode for c in result.cells}
    return [m for m in all_mode_names() if m in present] + sorted(present - set(all_mode_names()))


def _panels(result: MatrixResult, title: str) -> tuple[Figure, dict[str, Axes]]:
    modes = _modes(result) or ["(no cells)"]
    cols = min(2, len(modes))
    rows = math.ceil(len(modes) / cols)
    fig = Figure(figsize=(6.0 * cols, 3.8 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[len(modes):]:
        ax.set_visible(False)
    fig.suptitle(f"{title} · {_title(result)}")
    return fig, dict(zip(modes, axes.flat, strict=False))


def _title(result: MatrixResult) -> str:
    spec = result.spec
    return f"preset {spec.preset} · {spec.device} · {spec.amp_dtype} · {result.steps} steps"


def _finish(ax: Axes, result: MatrixResult, mode: str, has_data: bool, empty: str | None = None) -> None:
    missing = [f"{c.frontend} {c.status}" for c in result.cells if c.mode == mode and not c.ok]
    ax.set_title(f"{mode} ({', '.join(missing)})" if missing else mode)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    if not has_data:
        why = empty or "; ".join(f"{c.frontend} {c.status}" for c in result.cells if c.mode == mode) or "no cells"
        ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, wrap=True)
        ax.set_xticks([])
        ax.set_yticks([])
    _legend(ax)


def _diff_line(ax: Axes, a: np.ndarray, b: np.ndarray, label: str, style: Mapping[str, Any]) -> bool:
    n = min(a.size, b.size)
    diff = np.abs(a[:n] - b[:n])
    shown = np.where(diff > 0, diff, np.nan)
    if np.all(np.isnan(shown)):
        ax.plot([], [], label=f"{label}: equal at every step", **style)
        return False
    ax.plot(np.arange(n), shown, label=label, markersize=3, **style)
    return True


def _ok_cells(result: MatrixResult, mode: str) -> list[CellResult]:
    """The mode's cells that ran, baseline first; a merged result's other devices' cells are drawn as frontends of their own."""
    order = frontend_order(result)
    cells = [c for c in result.cells if c.mode == mode and c.ok and c.record]
    return sorted(cells, key=lambda c: (order.index(c.frontend) if c.frontend in order else len(order), c.device))


def _reference(result: MatrixResult, mode: str) -> np.ndarray | None:
    cells = _ok_cells(result, mode)
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


def _dedupe_legend(ax: Axes) -> None:
    _legend(ax)


def _legend(ax: Axes) -> None:
    """The axes' legend, each label once, at most :data:`LEGEND_MAX_ENTRIES` entries (the last then says how many more)."""
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if not unique:
        return
    names, shown = list(unique), list(unique.values())
    if len(names) > LEGEND_MAX_ENTRIES:
        hidden = len(names) - (LEGEND_MAX_ENTRIES - 1)
        names = [*names[: LEGEND_MAX_ENTRIES - 1], f"… and {hidden} more (listed in the report's tables)"]
        shown = [*shown[: LEGEND_MAX_ENTRIES - 1], Line2D([], [], linestyle="none")]
    ax.legend(shown, names, fontsize="small", loc="best")


def _save(fig: Figure, target: Path) -> Path:
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return target
