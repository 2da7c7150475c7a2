"""The docs name only what exists: every module path and dotted name in README.md and docs/ is in the tree."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from harness.files.paths import REPO_ROOT

#: The pages a reader is sent to (the measured results under docs/results/ quote runs of their own time).
PAGES = sorted([REPO_ROOT / "README.md", REPO_ROOT / "CHANGELOG.md", *(REPO_ROOT / "docs").glob("*.md")])
#: ``harness/judge/cells.py``, ``r_scripts/_bridge.R``, ``tests/integration/test_layers.py``: a path in the checkout.
_PATH = re.compile(r"\b((?:harness|py_scripts|r_scripts|tests|fixtures)/[\w/.-]*\w)")
#: ``harness.judge.assess.assess_result``: a module, or a name in one.
_DOTTED = re.compile(r"\bharness(?:\.\w+)+")
#: Paths that exist only once made, named by the docs, absent from a fresh clone: the fixture cache (git ignores it), and
#: where an installed package keeps the scripts (harness/files/paths.py: INSTALLED_PROJECT).
_GENERATED = ("fixtures/cache", "harness/_project")
#: Dotted names that are not modules: the logger R's console output goes to (harness/worker_side/r_handler.py).
_NOT_MODULES = {"harness.r"}


def _text(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    if page.name == "CHANGELOG.md":  # history names what existed then; only its newest section must be true today
        text = text.split("\n## ", 2)[1] if text.count("\n## ") >= 2 else text
    return text


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        target: object = module
        for name in parts[cut:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_path_a_page_names_exists(page: Path) -> None:
    """Each ``harness/...``, ``py_scripts/...``, ``r_scripts/...`` or ``tests/...`` path in the page is a file or folder here."""
    missing = sorted({m for m in _PATH.findall(_text(page))
                      if not (REPO_ROOT / m.split("::")[0]).exists() and not m.startswith(_GENERATED)})
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_dotted_name_a_page_uses_resolves(page: Path) -> None:
    """Each ``harness.x.y`` in the page is a module of the package or a name defined in one."""
    missing = sorted({m for m in _DOTTED.findall(_text(page)) if m not in _NOT_MODULES and not _resolves(m)})
    assert not missing, f"{page.name} names modules or objects that do not exist: {missing}"


def test_the_checker_catches_a_stale_name(tmp_path: Path) -> None:
    """A moved module's old name and a path that is gone are both caught."""
    assert not _resolves("harness.compare.compare_result") and _resolves("harness.judge.pairs.compare_result")
    assert _PATH.findall("see harness/outputs.py") == ["harness/outputs.py"] and not (REPO_ROOT / "harness/outputs.py").exists()


def test_the_readme_stays_short() -> None:
    """The README is the front page: at most 150 lines; detail goes to docs/."""
    assert len((REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


def test_the_glossary_defines_each_word_once() -> None:
    words = re.findall(r"^\| \*\*(.+?)\*\*", (REPO_ROOT / "docs" / "glossary.md").read_text(encoding="utf-8"), re.M)
    assert len(words) == len(set(words))
    required = {"cell", "pair", "script pair", "installation", "language", "point", "switch", "reconciled run", "proven",
                "excused", "lift", "floor"}
    assert required <= set(words), required - set(words)
