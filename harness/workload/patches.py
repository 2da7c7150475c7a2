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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import PatchesError
from harness.files.bounded_read import FileFormatError, FileSyntaxError, read_toml_file
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

    The committed file is part of the harness, read as this module loads: a malformed entry stops every command with one
    line and its own exit status (:attr:`harness.errors.ExitCode.BROKEN_PATCHES`), never a traceback.

    Raises:
        PatchesError: one line naming the file, the switch or point, and what is wrong (a file that cannot be read or is not
            TOML, an unknown table or field, a field missing or of another kind, a switch that is not one statement for one).
    """
    shown = _shown(path)
    try:
        data = read_toml_file(path, _MAX_BYTES)
    except OSError as err:
        raise PatchesError(f"{shown}: cannot be read ({err.strerror or err}); restore it (git checkout {shown})") from err
    except (FileFormatError, FileSyntaxError) as err:
        raise PatchesError(f"{shown}: is not a patches table ({err})") from err
    unknown = sorted(set(data) - {"switch", "point"})
    if unknown:
        raise PatchesError(f"{shown}: unknown table {unknown[0]!r}; the file holds [[switch]] and [[point]] entries only")
    switches: dict[str, Switch] = {}
    for k, raw in enumerate(_entries(data, "switch", shown)):
        switch = _switch(raw, f"{shown}: switch {_label(raw, 'id', k)}")
        if switch.id in switches:
            raise PatchesError(f"{shown}: switch {switch.id!r} is defined twice")
        switches[switch.id] = switch
    # a point's name may come twice: one value, read in another function for other optimizers
    points = tuple(_point(raw, f"{shown}: point {_label(raw, 'name', k)}") for k, raw in enumerate(_entries(data, "point", shown)))
    return switches, points


#: Bound on the file's size: a few dozen reviewed entries.
_MAX_BYTES = 1 << 20
_SWITCH_FIELDS = frozenset({"id", "side", "title", "target", "old", "new", "optimizers"})
_POINT_FIELDS = frozenset({"name", "optimizers", "clip", *LANGUAGES})
_SIDE_FIELDS = frozenset({"target", "before", "after", "value", "index"})


def _shown(path: Path) -> str:
    """How messages name a patches file: the committed one by its path in the project, any other as given."""
    return "harness/workload/patches.toml" if path.resolve() == PATCHES_FILE.resolve() else str(path)


def _entries(data: Mapping[str, Any], kind: str, shown: str) -> list[Any]:
    entries = data.get(kind, [])
    if not isinstance(entries, list):
        raise PatchesError(f"{shown}: `{kind}` must be an array of tables ([[{kind}]]), got {entries!r:.80}")
    return entries


def _label(raw: object, key: str, index: int) -> str:
    """An entry as messages name it: its id (or name), else its place in the file."""
    value = raw.get(key) if isinstance(raw, Mapping) else None
    return repr(value) if isinstance(value, str) and value.strip() else f"{index + 1} (its {key} missing)"


def _switch(raw: object, where: str) -> Switch:
    table = _table(raw, where, _SWITCH_FIELDS)
    side = _field(table, "side", where)
    if side not in LANGUAGES:
        raise PatchesError(f"{where}: `side` must be one of {', '.join(LANGUAGES)}, got {side!r}")
    replacement = Replacement(*(_field(table, name, where) for name in ("id", "target", "old", "new")))
    switch = Switch(replacement.id, side, _field(table, "title", where), replacement, _optimizers(table, where))
    problem = check_switch(side, replacement.old, replacement.new)
    if problem is not None:
        raise PatchesError(f"{where}: {problem}; a switch replaces one statement by one statement that computes the same thing "
                           "another way")
    return switch


def _point(raw: object, where: str) -> Point:
    table = _table(raw, where, _POINT_FIELDS)
    sides = {}
    for language in LANGUAGES:
        side = _table(table.get(language), f"{where}: `{language}`", _SIDE_FIELDS)
        anchors = [w for w in ("before", "after") if w in side]
        if len(anchors) != 1:
            raise PatchesError(f"{where}: `{language}` must name exactly one of `before` and `after` (the statement the value "
                               f"is read beside), got {anchors or 'neither'}")
        index = side.get("index")
        if index is not None and (not isinstance(index, str) or not index.strip()):
            raise PatchesError(f"{where}: `{language}.index` must be a non-empty string (the variable holding the parameter's "
                               f"index), got {index!r:.80}")
        sides[language] = (_field(side, "target", f"{where}: `{language}`"), _field(side, anchors[0], f"{where}: `{language}`"),
                           anchors[0], _field(side, "value", f"{where}: `{language}`"), index)
    clip = table.get("clip", False)
    if not isinstance(clip, bool):
        raise PatchesError(f"{where}: `clip` must be true or false, got {clip!r:.80}")
    name, optimizers = _field(table, "name", where), _optimizers(table, where)
    per_param = "{param}" in name
    unindexed = [language for language in LANGUAGES if (sides[language][4] is None) is per_param]
    if unindexed:
        raise PatchesError(f"{where}: `{unindexed[0]}.index` must be given exactly where the name holds {{param}} (one value per "
                           "parameter), and the name " + ("holds it" if per_param else "does not"))
    if not optimizers and not clip:
        raise PatchesError(f"{where}: names no `optimizers` and is not `clip`, so no run would record it")
    return Point(name, sides, optimizers, clip)


def _table(raw: object, where: str, fields: frozenset[str]) -> Mapping[str, Any]:
    """``raw`` if it is a table holding no field but ``fields``."""
    if not isinstance(raw, Mapping):
        raise PatchesError(f"{where} must be a table, got {raw!r:.80}")
    extra = sorted(set(raw) - fields)
    if extra:
        raise PatchesError(f"{where}: unknown field {extra[0]!r} (its fields: {', '.join(sorted(fields))})")
    return raw


def _optimizers(raw: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """A patch's ``optimizers``, each a row of the table."""
    optimizers = raw.get("optimizers", [])
    if not isinstance(optimizers, list) or not all(isinstance(o, str) for o in optimizers):
        raise PatchesError(f"{where}: `optimizers` must be a list of optimizer names, got {optimizers!r:.80}")
    unknown = [o for o in optimizers if o not in OPTIMIZERS]
    if unknown:
        raise PatchesError(f"{where}: unknown optimizer {unknown[0]!r} (one of {', '.join(OPTIMIZERS)})")
    return tuple(optimizers)


def _field(table: Mapping[str, Any], name: str, where: str) -> str:
    value = table.get(name)
    if not isinstance(value, str) or not value.strip():
        raise PatchesError(f"{where}: `{name}` must be a non-empty string, got {value!r:.80}")
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
