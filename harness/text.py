"""Formatting shared by the terminal table and the markdown report: numbers, sizes, table-safe text."""

from __future__ import annotations

from typing import Any

__all__ = ["cell_text", "mib", "num"]


def num(value: Any, fmt: str) -> str:
    """``value`` formatted with ``fmt``, or an em dash for a missing value."""
    return "—" if value is None else format(value, fmt)


def mib(value: Any) -> str:
    """Bytes as MiB, or an em dash."""
    return "—" if value is None else f"{value / 2**20:.1f} MiB"


def cell_text(text: Any) -> str:
    """Text safe inside a markdown table cell: one line, pipes escaped."""
    return "" if text is None else " ".join(str(text).split()).replace("|", "\\|")
