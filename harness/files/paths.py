"""Where the project's files live, so every module finds the scripts and caches the same way."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO_ROOT", "SCRIPTS_ENV", "fixtures_dir", "script_path", "scripts_root"]

REPO_ROOT = Path(__file__).resolve().parents[2]
_SCRIPT_DIRS = {"python": ("py_scripts", ".py"), "r": ("r_scripts", ".R")}
#: A folder holding ``py_scripts/`` and ``r_scripts/`` to run instead of the checkout's: how a test (or a
#: maintainer) runs a *copy* of the real scripts with one planted change, through the real workers.
SCRIPTS_ENV = "AMP_PARITY_SCRIPTS"


def fixtures_dir() -> Path:
    """The fixture cache: ``$AMP_PARITY_FIXTURES`` or ``fixtures/cache`` in the checkout.

    One cache for every process, so pytest-xdist workers and repeated runs share fixture files.
    """
    return Path(os.environ.get("AMP_PARITY_FIXTURES") or REPO_ROOT / "fixtures" / "cache")


def scripts_root() -> Path:
    """The folder whose ``py_scripts/`` and ``r_scripts/`` run: ``$AMP_PARITY_SCRIPTS`` or the checkout.

    Read on every call (not at import), so a worker started after the variable was set runs the copy.
    """
    return Path(os.environ.get(SCRIPTS_ENV) or REPO_ROOT).resolve()


def script_path(frontend: str, stem: str) -> Path:
    """``py_scripts/<stem>.py`` or ``r_scripts/<stem>.R`` under :func:`scripts_root`: pairs are found by stem."""
    folder, suffix = _SCRIPT_DIRS[frontend]
    return scripts_root() / folder / f"{stem}{suffix}"
