"""Names declared once at the edges (issue 45): the verdict and status words live only where their types are declared
(``harness/model/``, and ``harness/contract/`` for what the scripts and workers answer), and a refusal is spelt once."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

from harness.contract.replies import Reply
from harness.files.paths import REPO_ROOT
from harness.model.result import Status
from harness.model.verdicts import Outcome, Verdict
from harness.workload.features import FEATURES

#: Every verdict, status, outcome and reply word.
WORDS = frozenset(str(v) for kind in (Verdict, Status, Outcome, Reply) for v in kind)
#: Where they are declared, and may be spelt.
DECLARED = (REPO_ROOT / "harness" / "model", REPO_ROOT / "harness" / "contract")
#: The same words in another sense, each with why: a field or key named like a status, never compared with one.
OTHER_SENSES = {
    ("harness/judge/explain.py", "skipped"): "the run record's `skipped` field, and how its flag reads",
    ("harness/judge/findings.py", "skipped"): "the run record's `skipped` field",
    ("harness/run/measure.py", "error"): "a GEMM profile's key for why it was not measured",
}


def _keys(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are keys, not values: a subscript, ``.get``/``.pop``'s key, an attribute's
    name, and the keys of a dict or set that holds other keys too (a record or a details object, not a table keyed by
    verdicts)."""
    keys: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            keys.add(id(node.slice))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop", "setdefault")
              and node.args and isinstance(node.args[0], ast.Constant)):
            keys.add(id(node.args[0]))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and isinstance(node.args[1], ast.Constant)):
            keys.add(id(node.args[1]))
        elif isinstance(node, (ast.Dict, ast.Set)):
            members = [k for k in (node.keys if isinstance(node, ast.Dict) else node.elts) if isinstance(k, ast.Constant)]
            if any(k.value not in WORDS for k in members):
                keys |= {id(k) for k in members}
    return keys


def spelt_words(root: Path) -> list[str]:
    """Each verdict or status word spelt out under ``root`` (outside the declarations): ``path:line: 'word'``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if any(path.is_relative_to(d) for d in DECLARED):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        keys = _keys(tree)
        where = path.relative_to(REPO_ROOT).as_posix()
        found += [f"{where}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in WORDS
                  and id(node) not in keys and (where, node.value) not in OTHER_SENSES]
    return found


def test_verdict_and_status_words_are_spelt_only_where_declared() -> None:
    """The harness and the scripts name a verdict, a cell's status or outcome, or a worker's reply by its enum member."""
    assert spelt_words(REPO_ROOT / "harness") + spelt_words(REPO_ROOT / "py_scripts") == []


def test_a_spelt_status_is_found(tmp_path: Path) -> None:
    """The check above can fail: a status compared as a string, or a table keyed by verdict words, is found; a record's
    field of the same name is not."""
    planted = tmp_path / "planted.py"
    planted.write_text('if cell.status == "skipped": pass\nSTYLE = {"identical": "green"}\nx = record["skipped"]\n'
                       'y = {"skipped": 1, "losses": 2}\n', encoding="utf-8")
    tree = ast.parse(planted.read_text(encoding="utf-8"))
    keys = _keys(tree)
    found = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in WORDS and id(n) not in keys]
    assert found == [1, 2]


def test_every_refusal_is_spelt_once() -> None:
    """A refusal a feature's cells share (R's scaler that cannot be checkpointed) reads the same in every feature: two
    reasons for one cause, where one begins the other or they share their first clause, are one text."""
    reasons = {why for feature in FEATURES.values() for why in feature.unsupported.values()}
    for a, b in itertools.combinations(sorted(reasons), 2):
        assert not (a.startswith(b) or b.startswith(a) or a.split(":")[0] == b.split(":")[0]), (a, b)
