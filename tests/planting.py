"""Planting real differences: copies of the real scripts with one small change, run by the real workers.

A checker is tested by what it catches: a test copies ``py_scripts/`` and ``r_scripts/``, changes one
line in one copy with :func:`plant`, and points ``$AMP_PARITY_SCRIPTS`` at the copy (monkeypatch the
variable before the runner starts its workers).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.files.paths import REPO_ROOT

__all__ = ["copy_scripts", "plant"]


def copy_scripts(dest: Path) -> Path:
    """The checkout's ``py_scripts/`` and ``r_scripts/`` copied under ``dest`` (caches left out)."""
    for folder in ("py_scripts", "r_scripts"):
        shutil.copytree(REPO_ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def plant(root: Path, relative: str, old: str, new: str) -> None:
    """Replace the one occurrence of ``old`` in ``root/relative`` by ``new``; fail if it is not there exactly once.

    Exactly once, so a refactor of the real script that moves the line makes the planting test fail loudly
    instead of silently testing an unchanged copy.
    """
    path = root / relative
    source = path.read_text()
    count = source.count(old)
    if count != 1:
        raise AssertionError(f"{relative}: expected {old!r} exactly once, found it {count} times")
    path.write_text(source.replace(old, new))
