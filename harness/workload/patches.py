"""Patches of the bindings' own functions, as data: switches that reconcile a known difference, points that trace a value.

A patch replaces one statement of a function the binding ships (PyTorch's Python, R torch's R) by another, in the
script's process and for one run, after checking the statement is there exactly once (so a patch written for one
version of a binding refuses to touch another). Two kinds, both in ``harness/workload/patches.toml``:

- A **switch** removes one known difference's mechanism on one side: that side computes the one thing as the other
  binding does (R's clip coefficient as PyTorch's ``reciprocal() * max_norm``). The harness runs a cell again with the
  switches of the known differences that cover it (its *reconciled* run) and requires the pair to be bitwise identical
  for the whole run: then, and only then, the entries explain the whole difference (docs/known-differences.md).
- A **point** records, in a traced call, a value a binding's function computes inside itself and the step then uses
  (the clip coefficient, an optimizer's bias corrections and denominators), under the same name in both languages:
  the trace's points are the values used, never a recomputation beside them (docs/tracing.md). A point is defined for
  both languages at once; where one side cannot reach the value (libtorch's C++ optimizers), the point does not exist
  for that optimizer on either side.

The scripts receive their language's patches in the run spec (``patches``: replacements ``{id, target, old, new}``) and
apply them generically (``py_scripts/patches.py``, ``r_scripts/patches.R``); this module reads and checks the data and
says which patches a cell's run gets.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.workload.installations import LANGUAGES
from harness.workload.optimizers import OPTIMIZERS

__all__ = [
    "PATCHES_FILE", "POINTS", "POINT_CALL", "SWITCHES", "Point", "Replacement", "Switch", "check_switch", "load_patches", "patches_for",
    "switch_names",
]

#: The data.
PATCHES_FILE = Path(__file__).with_name("patches.toml")
#: What a point's statement calls, in both languages (``py_scripts/patches.py``, ``r_scripts/patches.R``): the trace
#: point of the value, named ``name`` (``{param}`` filled from the parameter index ``index``, where one is given).
POINT_CALL = "amp_parity_point"


@dataclass(frozen=True)
class Replacement:
    """One statement of ``target`` (``module:function`` in Python; a function of the torch namespace or
    ``<optimizer function>$<method>`` in R) replaced: ``old`` (as the language prints it) by ``new``."""

    id: str
    target: str
    old: str
    new: str

    def to_json(self) -> dict[str, str]:
        """Plain data for the run spec."""
        return {"id": self.id, "target": self.target, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class Switch:
    """A known difference's mechanism removed on one side (``side``'s script computes it as the other binding does), in
    the function its replacement patches; ``optimizers``: the rows whose run calls that function (empty: every row)."""

    id: str
    side: str
    title: str
    replacement: Replacement
    optimizers: tuple[str, ...] = ()

    def acts_on(self, optimizer: str) -> bool:
        """Whether a run with ``optimizer`` calls the function this switch patches."""
        return not self.optimizers or optimizer in self.optimizers


@dataclass(frozen=True)
class Point:
    """A value a binding's function computes inside itself, traced under ``name`` in both languages.

    ``sides``: per language, ``(target, anchor, where, value, index)``: the statement the point is recorded next to
    (``where``: ``before`` or ``after`` it; after: the value is final there), the expression that reads the value, and
    the variable holding the parameter's index (``{param}`` points), if any. ``optimizers``: the rows whose step computes
    it; ``clip``: a value of gradient clipping.
    """

    name: str
    sides: Mapping[str, tuple[str, str, str, str, str | None]]
    optimizers: tuple[str, ...] = ()
    clip: bool = False

    def call(self, language: str) -> str:
        """The statement that records the point, in ``language``."""
        _target, _anchor, _where, value, index = self.sides[language]
        return f"{POINT_CALL}({self.name!r}, {value}" + (f", {index})" if index else ")")


def load_patches(path: Path = PATCHES_FILE) -> tuple[dict[str, Switch], tuple[Point, ...]]:
    """The switches and points of ``path``, every field checked, each switch held to its declaration (:func:`check_switch`).
    A broken file is a harness bug: the committed one raises at import.

    Raises:
        ValueError: one line naming the file, the patch and what is wrong.
    """
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    switches: dict[str, Switch] = {}
    for raw in data.get("switch", []):
        side = _field(raw, "side", path)
        if side not in LANGUAGES:
            raise ValueError(f"{path}: switch {raw.get('id')!r}: side must be one of {LANGUAGES}")
        replacement = Replacement(*(_field(raw, name, path) for name in ("id", "target", "old", "new")))
        switch = Switch(replacement.id, side, _field(raw, "title", path), replacement, _optimizers(raw, path))
        problem = check_switch(side, replacement.old, replacement.new)
        if problem is not None:
            raise ValueError(f"{path}: switch {switch.id!r}: {problem}; a switch replaces one statement by one statement that "
                             "computes the same thing another way")
        if switch.id in switches:
            raise ValueError(f"{path}: switch {switch.id!r} is defined twice")
        switches[switch.id] = switch
    points = []
    for raw in data.get("point", []):
        sides = {}
        for language in LANGUAGES:
            side = raw[language]
            where = "before" if "before" in side else "after"
            sides[language] = (_field(side, "target", path), _field(side, where, path), where, _field(side, "value", path),
                               side.get("index"))
        points.append(Point(_field(raw, "name", path), sides, _optimizers(raw, path), bool(raw.get("clip", False))))
    return switches, tuple(points)


def _optimizers(raw: Mapping[str, Any], path: Path) -> tuple[str, ...]:
    """A patch's ``optimizers``, each a row of the table."""
    optimizers = tuple(raw.get("optimizers", ()))
    unknown = [o for o in optimizers if o not in OPTIMIZERS]
    if unknown:
        raise ValueError(f"{path}: {raw.get('id') or raw.get('name')!r}: unknown optimizer {unknown[0]!r}")
    return optimizers


def _field(table: Mapping[str, Any], name: str, path: Path) -> str:
    value = table.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{path}: {table.get('id') or table.get('name')!r}: `{name}` must be a non-empty string")
    return value


#: R's assignment operators, as ``deparse()`` prints them (``=`` inside a call names an argument).
_R_ASSIGN = re.compile(r"<<-|<-|->>|->")
#: An R name at the start of an assignment's target (``group$lr``, ``state(param)[["mu"]]``: ``group``, ``state``).
_R_NAME = re.compile(r"[A-Za-z.][A-Za-z0-9._]*")


def check_switch(side: str, old: str, new: str) -> str | None:
    """Why the switch replacing ``old`` by ``new`` (in ``side``'s language) does more than its declaration, or ``None``.

    A switch is one statement for one statement: each is a single simple statement (no second statement, no block, no
    compound statement), and ``new`` writes only what ``old`` writes (the names it assigns or changes in place), so it can
    change how one value is computed and nothing beside it (a hidden ``group$lr <- 0.05`` is refused).
    """
    read = _python_statement if side == "python" else _r_statement
    before, after = read(old), read(new)
    if isinstance(before, str):
        return f"`old` {before}"
    if isinstance(after, str):
        return f"`new` {after}"
    (_old_assigns, old_names), (new_assigns, new_names) = before, after
    # What ``old`` writes: the names it assigns, and those it changes in place (``step$add_(1)``, ``buf.mul_(m)``).
    written = set(old_names) | set(re.findall(r"([A-Za-z_.][A-Za-z0-9_.]*)(?:\$|\.)[A-Za-z0-9_]+_\(", old))
    extra = sorted(set(new_names) - written)
    if extra:
        return f"`new` assigns {extra[0]!r}, which `old` does not write"
    if new_assigns > len(written):
        return f"`new` makes {new_assigns} assignments, where `old` writes {len(written)} name(s)"
    return None


def _python_statement(text: str) -> tuple[int, list[str]] | str:
    """(assignments, assigned root names) of one simple Python statement, or what is wrong with it."""
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        return f"is not Python ({err.msg})"
    if len(tree.body) != 1:
        return f"holds {len(tree.body)} statements, not one"
    statement = tree.body[0]
    if not isinstance(statement, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return f"is a compound statement ({type(statement).__name__}), not one simple statement"
    targets: list[ast.expr] = []
    for node in ast.walk(statement):
        if isinstance(node, ast.Assign):
            targets += node.targets
        elif isinstance(node, ast.NamedExpr):
            return "assigns inside an expression (`:=`): only the statement itself may assign"
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets.append(node.target)
    names = []
    for target in targets:
        while isinstance(target, (ast.Attribute, ast.Subscript, ast.Starred)):
            target = target.value
        names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return len(targets), names


def _r_statement(text: str) -> tuple[int, list[str]] | str:
    """(assignments, assigned root names) of one R statement as ``deparse()`` prints it on one line, or what is wrong."""
    code, depths, depth, quote = [], [], 0, ""
    for char in text:
        depths.append(depth)
        if quote:
            quote = "" if char == quote else quote
            code.append(" ")
            continue
        if char in "\"'`":
            quote = char
            code.append(" ")
            continue
        if char == "#":
            return "holds a comment"
        if char in ";\n":
            return "holds a second statement (`;` or a new line)"
        depth += char in "([{"
        depth -= char in ")]}"
        if depth < 0:
            return "has unbalanced brackets"
        code.append(char)
    if quote or depth:
        return "has an unclosed string or bracket"
    bare = "".join(code)
    if bare.strip().startswith("{"):
        return "is a block (`{ ... }`), not one statement"
    assigns = list(_R_ASSIGN.finditer(bare))
    if any(m.group() in ("->", "->>") or depths[m.start()] for m in assigns):
        return "assigns inside an expression or to the right (`->`): only the statement itself may assign"
    if len(assigns) > 1:
        return f"makes {len(assigns)} assignments in one statement"
    found = _R_NAME.match(bare.strip()) if assigns else None
    return len(assigns), [found.group()] if found else []


SWITCHES, POINTS = load_patches()


def patches_for(optimizer: str, switches: tuple[str, ...] = ()) -> dict[str, list[dict[str, str]]]:
    """The run spec's ``patches``: per language, the replacements a run with ``optimizer`` gets: the ``switches`` asked for
    (every run), and the points its step computes and clipping's (a mode that does not clip never calls the function they
    patch). A statement several patches touch is replaced once, by the points before it, the statement (switched or
    not) and the points after it; a replacement holding only points is applied only when the call is traced.

    Raises:
        KeyError: an unknown switch.
    """
    out: dict[str, list[dict[str, str]]] = {}
    for language in LANGUAGES:
        anchors: dict[tuple[str, str], dict[str, Any]] = {}
        for name in switches:
            switch = SWITCHES[name]
            if switch.side == language and switch.acts_on(optimizer):
                r = switch.replacement
                # R: a "$method" target is that method of the optimizer the row builds, as a point's is
                target = f"{OPTIMIZERS[optimizer].r}{r.target}" if r.target.startswith("$") else r.target
                anchors[(target, r.old)] = {"ids": [r.id], "kind": "switch", "before": [], "statement": r.new, "after": []}
        for point in POINTS:
            if not ((point.optimizers and optimizer in point.optimizers) or point.clip):
                continue
            target, anchor, where, _value, _index = point.sides[language]
            if target.startswith("$"):  # R: that method of the optimizer this row builds
                target = f"{OPTIMIZERS[optimizer].r}{target}"
            slot = anchors.setdefault((target, anchor), {"ids": [], "kind": "point", "before": [], "statement": anchor, "after": []})
            slot["ids"].append(f"point:{point.name}")
            slot[where].append(point.call(language))
        sep = "\n" if language == "python" else "; "
        out[language] = [
            {"id": "+".join(slot["ids"]), "target": target, "old": old, "kind": slot["kind"],
             "new": sep.join([*slot["before"], slot["statement"], *slot["after"]])}
            for (target, old), slot in anchors.items()
        ]
    return out


def switch_names(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` sorted, each once (the order a cell's switches are applied and recorded in)."""
    return tuple(sorted(set(names)))
