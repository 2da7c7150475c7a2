"""The at-a-glance view of a result's pairs: optimizer (and loop feature) × (script · mode), one symbol per pair.

A matrix of every optimizer in every mode is a few hundred cells; a maintainer asks first where R torch parts from
PyTorch. The grid answers that in one screen: each row an optimizer (with its loop feature, where the cells have one:
:func:`row_key`), each column a script's mode, each entry the verdict of its pair (one symbol per pair where more than
two frontends ran: each against the baseline). The terminal, the markdown, the HTML page and the plots draw their rows
and columns from here; the legend is :data:`SYMBOLS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.contract.models import DEFAULT_MODEL
from harness.model.result import CellResult, MatrixResult
from harness.model.verdicts import PairVerdict, Verdict
from harness.workload.features import NO_FEATURE

__all__ = ["FOLDED_KINDS", "SYMBOLS", "Glance", "column_key", "fold_key", "folded_label", "glance", "legend_of", "proven_known", "row_key",
           "symbol"]

#: One symbol per pair verdict (``known_difference`` says whether the entries are proven and whether one is a bug).
SYMBOLS: dict[str, str] = {
    Verdict.IDENTICAL: "=", Verdict.WITHIN_TOLERANCE: "≈", "known": "K", "bug": "B", "matched": "k", Verdict.DIVERGED: "✗",
    Verdict.STALE_KNOWN_DIFFERENCE: "S", Verdict.ERROR: "E", Verdict.UNSUPPORTED: "U", Verdict.SKIPPED: "·",
}
LEGEND = ("= identical · ≈ within tolerance · K known difference (proven) · B R torch bug (proven) · k known difference "
          "matched, not proven (identity not expected) · ✗ diverged · S stale known difference · E error · U unsupported · "
          "· skipped")


def legend_of(grid: Glance) -> str:
    """The legend of the symbols ``grid`` shows, in :data:`SYMBOLS`' order (the whole :data:`LEGEND` was two lines of a
    terminal, most of it for verdicts the run did not have)."""
    shown = {ch for _, texts in grid.rows for text in texts for ch in text}
    return " · ".join(part for part in LEGEND.split(" · ") if part[:1] in shown and part[1:2] == " ")


def proven_known(pair: PairVerdict) -> bool:
    """Whether ``pair`` is a known difference (an R torch bug among them) proven by reconciliation: nothing to look at
    beyond its entry, so the views tell it in a line under that entry (or count it), not in an article of its own."""
    return pair.verdict == Verdict.KNOWN_DIFFERENCE and bool(pair.details.get("proven"))


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


def _part(item: CellResult | PairVerdict, name: str) -> str | None:
    """``item``'s ``feature`` or ``model``, read by attribute (its own, or its :class:`~harness.workload.matrix.Cell`'s)."""
    value = getattr(item, name, None) or getattr(getattr(item, "cell", None), name, None)
    return None if value is None else str(value)


def row_key(item: CellResult | PairVerdict) -> str:
    """The grid row of a cell or pair: its optimizer, with its loop feature where it has one (``adam · accumulation``) and
    its model where it is not the default (``adam@transformer``), as its id names it.

    Read by attribute, so a result whose cells name no feature or model (every one before them) has one row per optimizer.
    """
    feature, model = _part(item, "feature"), _part(item, "model")
    key = f"{item.optimizer} · {feature}" if feature and feature != NO_FEATURE else item.optimizer
    return f"{key}@{model}" if model and model != DEFAULT_MODEL else key


def fold_key(item: CellResult | PairVerdict) -> str | None:
    """The folded row a cell or pair belongs to where a view folds the grid (the terminal by default, the plots): its model
    where it is not the default (all its pairs, its loop features' too), else its loop feature; ``None`` for a plain
    optimizer row of the default model (shown as it is). :func:`folded_label` names the row.

    A loop feature covers a few optimizers in a few modes (the main job's 120 feature rows are 65 % empty), and a model
    beside the MLP a few of each (its covering design), so a view that must stay short tells each in one row with its
    counts; the report's grid keeps every row.
    """
    model = _part(item, "model")
    if model and model != DEFAULT_MODEL:
        return FOLDED_MODEL_ROW.format(model)
    feature = _part(item, "feature")
    return FOLDED_ROW.format(feature) if feature and feature != NO_FEATURE else None


def folded_label(key: str) -> str:
    """What a folded row (:func:`fold_key`) is, in words: ``transformer (model)``, ``lr_step (loop feature)``."""
    return f"{key[1:]} ({'model' if key.startswith('@') else 'loop feature'})"


def column_key(item: CellResult | PairVerdict, several_devices: bool) -> str:
    """The grid column of a cell or pair: ``script · mode``, and its device where the result ran on several."""
    return f"{item.script} · {item.mode}" + (f" · {item.device}" if several_devices else "")


@dataclass(frozen=True)
class Glance:
    """The grid: its column labels (``script · mode``, per device where several ran), its rows (:func:`row_key`, one
    text per column, empty where the pair did not run), the counts of each verdict, and the pairs behind each entry
    (``pairs[(row, column)]``, in the order of its symbols: what a page links each symbol to)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]
    counts: dict[str, int]
    pairs: dict[tuple[str, str], tuple[PairVerdict, ...]] = field(default_factory=dict)


#: How a folded row is named: the loop feature, or the model, marked as cell ids mark them (``sgd+lr_step@gru``).
FOLDED_ROW = "+{}"
FOLDED_MODEL_ROW = "@{}"
#: The rows of a grid folded by kind (:func:`glance`'s ``by_kind``): every loop feature's pairs, every model's.
FOLDED_KINDS = {"+": "+loop features", "@": "@models"}


def glance(result: MatrixResult, folded: bool = False, by_kind: bool = False) -> Glance:
    """The grid of ``result``'s pairs, in matrix order (scripts, their modes, optimizers as the cells ran them).

    ``folded``: each loop feature's rows are one row (:data:`FOLDED_ROW`), and each model's beside the MLP one row
    (:data:`FOLDED_MODEL_ROW`), each entry its pairs' symbols counted (``16= 1B``): the main job's grid is 137 rows, 120 of
    them a feature's, most of them empty. ``by_kind`` (with ``folded``): every loop feature's pairs in one row and every
    model's in one (:data:`FOLDED_KINDS`), for a view whose rows would not fit otherwise.
    """
    several = len({c.device for c in result.cells}) > 1
    columns = tuple(dict.fromkeys(column_key(c, several) for c in result.cells))

    def key_of(item: CellResult | PairVerdict) -> str:
        fold = fold_key(item) if folded else None
        if fold is not None and by_kind:
            return FOLDED_KINDS[fold[0]]
        return fold if fold is not None else row_key(item)

    keys = tuple(dict.fromkeys(key_of(c) for c in result.cells))
    counted = {key_of(c) for c in result.cells if folded and fold_key(c) is not None}
    pairs: dict[tuple[str, str], tuple[PairVerdict, ...]] = {}
    for pair in result.pairs:
        key = (key_of(pair), column_key(pair, several))
        pairs[key] = (*pairs.get(key, ()), pair)
    rows = tuple((key, tuple(_entry([symbol(p) for p in pairs.get((key, col), ())], key in counted) for col in columns))
                 for key in keys)
    counts: dict[str, int] = {}
    for pair in result.pairs:
        counts[pair.verdict] = counts.get(pair.verdict, 0) + 1
    return Glance(columns, rows, counts, pairs)



def _entry(symbols: list[str], counted: bool) -> str:
    """A grid entry: its pairs' symbols, or (a folded row's) each symbol once with how many pairs have it (``16= 1B``)."""
    if not counted:
        return "".join(symbols)
    order = list(SYMBOLS.values())
    counts = {s: symbols.count(s) for s in sorted(set(symbols), key=lambda s: order.index(s) if s in order else len(order))}
    return " ".join(f"{n}{s}" for s, n in counts.items())
