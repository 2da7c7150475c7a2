"""Why cells did not run, one line per reason: how many cells, the first of them, and the reason (its install line).

Without R torch every R cell of the main job is skipped for the same reason: 119 rows saying so buried the Python
results. Every view (terminal, markdown summary, HTML page) tells each reason once, from :func:`reasons`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.model.result import MatrixResult

__all__ = ["Reason", "reasons"]

#: Where a reason names its cell (``r script with_autocast (mode default, preset tiny, ...)``): left out when grouping.
_CELL_NAMED = re.compile(r"\b\w+ script \w+ \([^)]*\)")


@dataclass(frozen=True)
class Reason:
    """One reason cells did not run (or stopped), told once: the cells it covers, in matrix order."""

    text: str
    cells: tuple[str, ...]
    statuses: tuple[str, ...]
    #: The proven R torch bugs that excuse these cells (their crash is the bug's), joined; empty for any other reason.
    bugs: str = ""

    @property
    def who(self) -> str:
        """``with_autocast-default-sgd-r-cpu``, or ``119 cells (with_autocast-default-sgd-r-cpu, ...)``."""
        return self.cells[0] if len(self.cells) == 1 else f"{len(self.cells)} cells ({self.cells[0]}, ...)"

    @property
    def headline(self) -> str:
        """The reason's first line: what the terminal and the page's summary show (a C++ backtrace may follow it)."""
        return self.text.partition("\n")[0]

    @property
    def detail(self) -> str:
        """What follows the first line (R torch's C++ backtrace), for the report to fold; empty for a one-line reason."""
        return self.text.partition("\n")[2].strip()

    @property
    def status(self) -> str:
        """The cells' status (``skipped``), or each one they had, joined."""
        return " or ".join(dict.fromkeys(self.statuses))


def reasons(result: MatrixResult) -> list[Reason]:
    """Every reason a cell of ``result`` did not end ``ok``, with its cells; a crash a proven R torch bug explains is told
    as that bug's (one line per bug, not one per cell). Reasons that differ only in the cell they name are one."""
    excused = result.excused()
    groups: dict[str, tuple[str, list[str], list[str], str]] = {}
    for cell in result.cells:
        if cell.ok or not cell.reason:
            continue
        pair = excused.get(cell.id)
        bug = ", ".join(pair.details.get("excused_by") or ()) if pair is not None else ""
        text = f"R torch bug {bug}, proven (excused): {cell.reason}" if bug else cell.reason
        _, ids, statuses, _ = groups.setdefault(_CELL_NAMED.sub("", text), (text, [], [], bug))
        ids.append(cell.id)
        statuses.append(str(cell.status))
    return [Reason(text, tuple(ids), tuple(statuses), bug) for text, ids, statuses, bug in groups.values()]
