"""Formatting shared by the terminal table and the markdown report: numbers, sizes, table-safe text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.model.result import CellResult, MatrixResult

__all__ = ["LIFT_MARK", "cell_text", "frontend_order", "lift_footnote", "mib", "num", "provenance_lines", "status_text"]

#: Marks a cell that ran with a check of its binding lifted (R torch's CUDA-only scaler on CPU).
LIFT_MARK = "†"


def num(value: Any, fmt: str) -> str:
    """``value`` formatted with ``fmt``, or an em dash for a missing value."""
    return "—" if value is None else format(value, fmt)


def mib(value: Any) -> str:
    """Bytes as MiB, or an em dash."""
    return "—" if value is None else f"{value / 2**20:.1f} MiB"


def cell_text(text: Any) -> str:
    """Text safe inside a markdown table cell: one line, pipes escaped."""
    return "" if text is None else " ".join(str(text).split()).replace("|", "\\|")


def status_text(cell: CellResult) -> str:
    """A cell's status, marked when its script lifted a check of the binding to run (``ok†``)."""
    return f"{cell.status}{LIFT_MARK}" if cell.record is not None and cell.record.lifted_check else str(cell.status)


def lift_footnote(cells: Sequence[CellResult]) -> str | None:
    """The one footnote line for every marked cell (what was lifted, and how to run without it), or None."""
    lifted = [c for c in cells if c.record is not None and c.record.lifted_check]
    if not lifted:
        return None
    what = lifted[0].record.lifted_check if lifted[0].record else ""
    return (f"{LIFT_MARK} {_cells(lifted)}: {what}; run with --no-scaler-lift to use R torch's scaler as it ships "
            "(then unsupported on CPU)")


def _cells(cells: Sequence[CellResult]) -> str:
    """A few cells by id, or many counted with the first one named."""
    return ", ".join(c.id for c in cells) if len(cells) <= 3 else f"{len(cells)} cells ({cells[0].id}, ...)"


def frontend_order(result: MatrixResult) -> list[str]:
    """The frontends as every view lists them: the baseline first, then the result's order, then any other a cell names."""
    ran = {c.frontend for c in result.cells}
    named = [result.baseline, *result.frontends, *sorted(ran - {result.baseline, *result.frontends})]
    return [name for name in dict.fromkeys(named) if name in ran]


def provenance_lines(result: MatrixResult) -> list[str]:
    """Where the result came from, for the terminal and the report's header: one line, or one per input of a merged result."""
    from harness.model.provenance import Provenance

    if not result.sources:
        return [f"provenance: {result.provenance.describe()}"]
    lines = []
    for source in result.sources:
        stored = source.get("provenance")
        provenance = Provenance.from_json(stored) if isinstance(stored, dict) else Provenance.unknown()
        lines.append(f"provenance of {source.get('file')}: {provenance.describe()}")
    return lines
