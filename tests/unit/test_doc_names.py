"""The module and folder names the docs put in backticks exist (issue 45), beyond the full paths tests/unit/test_docs.py
checks: a bare module (`shape.py`), a bare folder (`commands/`), a name said to be in a module (`SCRIPTS` in
`harness/contract/modes.py`), and the packages and test folders docs/development.md lists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.files.paths import REPO_ROOT

#: The pages a reader is sent to (CHANGELOG.md's history names what existed then; tests/unit/test_docs.py reads its newest).
PAGES = sorted([REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")])
#: Every file and folder of the checkout the docs may name (relative paths, ``/``-separated).
TREE = sorted({p.relative_to(REPO_ROOT).as_posix() for top in ("harness", "py_scripts", "r_scripts", "tests", "fixtures", ".ci",
                                                               "docs") for p in (REPO_ROOT / top).rglob("*")
               if "__pycache__" not in p.parts} | {p.name for p in REPO_ROOT.iterdir() if not p.name.startswith(".git")})
#: ``shape.py``, ``model/phases.py``, ``_bridge.R``, ``patches.toml``: a module or data file, bare or partly qualified.
_MODULE = re.compile(r"`([\w/.-]*\w\.(?:py|R|toml))`")
#: ``commands/``, ``tests/unit/``: a folder.
_FOLDER = re.compile(r"`((?:[\w-]+/)+)`")
#: ```SCRIPTS`` in ``harness/contract/modes.py```: a name said to be defined in a module.
_DEFINED_IN = re.compile(r"`(\w+)`[^`]{0,12}?\s+in\s+`([\w/]+\.py)`")
#: Folders the docs name that are not in the checkout, each with where it is.
_ELSEWHERE = {
    "r-bytecode/": "in the user cache folder (harness/files/paths.py: bytecode_dir)",
    "shared/": "beside the checkout (../shared: the R torch installation and the house guides)",
    "harness/_project/": "inside an installed package only (harness/files/paths.py: INSTALLED_PROJECT)",
    "fixtures/cache/": "made by the first run in a checkout, and ignored by git (.gitignore): a fresh clone has none",
    "cache/": "fixtures/cache/, as above",
    "torch/optim/": "in the installed PyTorch package (its optimizers' source, read beside R torch's)",
}


def _find(name: str) -> list[str]:
    """The paths of the checkout that are ``name`` or end with ``/name``."""
    name = name.rstrip("/")
    return [p for p in TREE if p == name or p.endswith(f"/{name}")]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_module_a_page_names_exists(page: Path) -> None:
    """Each backticked ``name.py``/``.R``/``.toml`` (bare or partly qualified) is a file of the checkout."""
    missing = sorted({m for m in _MODULE.findall(page.read_text(encoding="utf-8")) if not _find(m)})
    assert not missing, f"{page.name} names modules that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_folder_a_page_names_exists(page: Path) -> None:
    """Each backticked ``name/`` is a folder of the checkout (or one the page says is elsewhere: :data:`_ELSEWHERE`)."""
    missing = sorted({m for m in _FOLDER.findall(page.read_text(encoding="utf-8"))
                      if m not in _ELSEWHERE and not any((REPO_ROOT / p).is_dir() for p in _find(m))})
    assert not missing, f"{page.name} names folders that do not exist: {missing}"


def _defines(source: str, name: str) -> bool:
    """Whether a module's source defines ``name``: a function, a class, a module-level or class-level assignment."""
    return re.search(rf"^(?:    )?(?:def|class) {name}\b|^(?:    )?{name}\s*[:=]", source, re.M) is not None


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_name_a_page_places_in_a_module_is_defined_there(page: Path) -> None:
    """"``X`` in ``path.py``": the module defines ``X`` (``SCRIPTS`` was placed in workload/spec.py after it moved)."""
    wrong = []
    for name, module in _DEFINED_IN.findall(page.read_text(encoding="utf-8")):
        found = [p for p in _find(module) if p.endswith(".py")]
        if len(found) != 1 or not _defines((REPO_ROOT / found[0]).read_text(encoding="utf-8"), name):
            wrong.append(f"{name} in {module}")
    assert not wrong, f"{page.name} places names where they are not defined: {wrong}"


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_developer_guide_lists_the_packages_and_test_folders_there_are() -> None:
    """docs/development.md's layers are harness's packages, every one of them, and the unit tests' folders it lists are
    tests/unit's (a ``frontends`` package and test folder were listed long after they were gone, and ``contract`` was not)."""
    text = (REPO_ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    layers = _section(text, "The layers")
    listed = set(re.findall(r"^- `(\w+)`(?: and `(\w+)`)?", layers, re.M))
    named = {n for pair in listed for n in pair if n}
    packages = {p.name for p in (REPO_ROOT / "harness").iterdir() if (p / "__init__.py").is_file()}
    assert named == packages
    tests = re.search(r"`tests/unit/<package>/` \(([^)]*)\)", text)
    assert tests is not None
    folders = set(re.findall(r"`(\w+)/?`", tests.group(1)))
    assert folders == {p.name for p in (REPO_ROOT / "tests" / "unit").iterdir() if (p / "__init__.py").is_file()}


def test_a_stale_name_is_found() -> None:
    """The checks above can fail: a module, a folder and a placement that are not there."""
    assert not _find("model/trace.py") and not _find("frontends/") and _find("model/shape.py")
    assert not _defines((REPO_ROOT / "harness" / "workload" / "spec.py").read_text(encoding="utf-8"), "SCRIPTS")
    assert _defines((REPO_ROOT / "harness" / "contract" / "modes.py").read_text(encoding="utf-8"), "SCRIPTS")
