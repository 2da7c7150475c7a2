"""CI runs what the project claims: ``.ci/run`` lints (``.ci/lint``: ruff, mypy --strict, the import contracts) before the
tests, and the lint fails a copy of the tree with a planted type error or a planted upward import, naming it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.files.paths import REPO_ROOT


def _tree(dest: Path) -> Path:
    """A copy of what the lint reads: the code, the tests, pyproject.toml's settings and the CI scripts (and mypy's cache,
    where there is one: the copies keep their times, so only the planted file is checked again)."""
    for part in ("harness", "py_scripts", "tests", ".ci", ".mypy_cache"):
        if (REPO_ROOT / part).is_dir():
            shutil.copytree(REPO_ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_ci_runs_the_lint_before_the_tests() -> None:
    """``.ci/run`` runs ``.ci/lint`` (and tox's lint is the same script), before the test command."""
    run = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert run.index("bash .ci/lint") < run.index("python3 -m pytest -n 2 --dist loadgroup")
    assert "    bash .ci/lint" in (REPO_ROOT / "tox.ini").read_text(encoding="utf-8")
    assert [line for line in (REPO_ROOT / ".ci" / "lint").read_text().splitlines() if not line.startswith(("#", "echo", "set", "cd"))] == [
        "ruff check harness py_scripts tests", "mypy --strict", "lint-imports",
    ]


@pytest.mark.parametrize(
    ("module", "planted", "named"),
    [
        ("harness/files/atomic.py", 'def _planted() -> int:\n    return "not an int"\n',
         'harness/files/atomic.py:{line}: error: Incompatible return value type (got "str", expected "int")'),
        ("harness/store/lock.py", "from harness.views import table  # noqa: E402, F401\n", "harness.store.lock -> harness.views.table"),
    ],
    ids=["type-error", "broken-layer"],
)
def test_the_ci_lint_fails_a_planted_error(tmp_path: Path, module: str, planted: str, named: str) -> None:
    """A copy of the tree with a type error (mypy --strict) or an upward import (the layers) fails ``bash .ci/lint``, naming it."""
    for tool in ("ruff", "mypy", "lint-imports"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: pip install -e '.[lint]' (bash .ci/setup does)")
    root = _tree(tmp_path)
    target = root / module
    before = target.read_text(encoding="utf-8")
    target.write_text(f"{before}\n\n{planted}", encoding="utf-8")
    line = len(f"{before}\n\n".splitlines()) + 2  # the planted return line
    done = subprocess.run(["bash", ".ci/lint"], cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0, done.stdout[-3000:]
    assert named.format(line=line) in done.stdout + done.stderr, done.stdout[-3000:] + done.stderr[-2000:]
