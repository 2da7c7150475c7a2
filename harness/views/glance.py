"""The at-a-glance view of a result's pairs: optimizer × (script · mode), one symbol per pair.

A matrix of every optimizer in every mode is a few hundred cells; a maintainer asks first where R torch parts from
PyTorch. The grid answers that in one screen: each row an optimizer, each column a script's mode, each entry the
verdict of its pair (one symbol per pair where more than two frontends ran: each against the baseline). The terminal
and the report draw it from :func:`glance`; the legend is :data:`SYMBOLS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.model.result import MatrixResult
from harness.model.verdicts import PairVerdict, Verdict

__all__ = ["SYMBOLS", "Glance", "glance", "symbol"]

#: One symbol per pair verdict (``known_difference`` says whether the entries are proven and whether one is a bug).
SYMBOLS: dict[str, str] = {
    "identical": "=", "within_tolerance": "≈", "known": "K", "bug": "B", "matched": "k", "diverged": "✗",
    "stale_known_difference": "S", "error": "E", "unsupported": "U", "skipped": "·",
}
LEGEND = ("= identical · ≈ within tolerance · K known difference (proven) · B R torch bug (proven) · k known difference "
          "matched, not proven (identity not expected) · ✗ diverged · S stale known difference · E error · U unsupported · "
          "· skipped")


def symbol(pair: PairVerdict) -> str:
    """The symbol of one pair's verdict."""
    if pair.verdict == Verdict.KNOWN_DIFFERENCE:
        if not pair.details.get("proven"):
            return SYMBOLS["matched"]
        # a bug the reconciliation had to switch off counts though another entry matched the first point (the clip pair
        # of SGD with momentum parts first at the clip coefficient, then at the weight decay R torch gets wrong)
        bug = "bug" in (pair.details.get("known_kinds") or ()) or bool(pair.details.get("excused_by"))
        return SYMBOLS["bug"] if bug else SYMBOLS["known"]
    return SYMBOLS.get(pair.verdict, "?")


@dataclass(frozen=True)
class Glance:
    """The grid: its column labels (``script · mode``, per device where several ran), its rows (optimizer, one text per
    column, empty where the pair did not run) and the counts of each verdict."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]
    counts: dict[str, int]


def glance(result: MatrixResult) -> Glance:
    """The grid of ``result``'s pairs, in matrix order (scripts, their modes, optimizers as the cells ran them)."""
    several = len({c.device for c in result.cells}) > 1

    def column(script: str, mode: str, device: str) -> str:
        return f"{script} · {mode}" + (f" · {device}" if several else "")

    columns = tuple(dict.fromkeys(column(c.script, c.mode, c.device) for c in result.cells))
    optimizers = tuple(dict.fromkeys(c.optimizer for c in result.cells))
    entries: dict[tuple[str, str], str] = {}
    for pair in result.pairs:
        key = (pair.optimizer, column(pair.script, pair.mode, pair.device))
        entries[key] = entries.get(key, "") + symbol(pair)
    rows = tuple((opt, tuple(entries.get((opt, col), "") for col in columns)) for opt in optimizers)
    counts: dict[str, int] = {}
    for pair in result.pairs:
        counts[pair.verdict] = counts.get(pair.verdict, 0) + 1
    return Glance(columns, rows, counts)

