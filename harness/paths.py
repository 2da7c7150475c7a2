"""Where the project's files live, so every module finds the scripts and caches the same way."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO_ROOT", "fixtures_dir", "script_path"]

REPO_ROOT = Path(__file__).resolve().parent.parent
_SCRIPT_DIRS = {"python": ("py_scripts", ".py"), "r": ("r_scripts", ".R")}


def fixtures_dir() -> Path:
    """The fixture cache: ``$AMP_PARITY_FIXTURES`` or ``fixtures/cache`` in the checkout.

    One cache for every process, so pytest-xdist workers and repeated runs share fixture files.
    """
    return Path(os.environ.get("AMP_PARITY_FIXTURES") or REPO_ROOT / "fixtures" / "cache")


def script_path(frontend: str, stem: str) -> Path:
    """``py_scripts/<stem>.py`` or ``r_scripts/<stem>.R``: pairs are found by stem."""
    folder, suffix = _SCRIPT_DIRS[frontend]
    return REPO_ROOT / folder / f"{stem}{suffix}"
