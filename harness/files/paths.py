"""Where the project's files live, so every module finds the scripts and caches the same way.

The harness runs from a checkout (``harness/`` beside ``py_scripts/``, ``r_scripts/`` and ``fixtures/``) or from an
installed package, where the wheel keeps those folders inside the package, in ``harness/_project/`` (pyproject.toml
maps them there: the checkout's top-level folders stay where they are). :data:`REPO_ROOT` is whichever holds them.
Outside a checkout, what the harness writes for itself (fixtures, the worker's import folder) goes to a user cache
folder: ``$AMP_PARITY_CACHE``, else the platform's (``$XDG_CACHE_HOME/amp-parity``, ``~/.cache/amp-parity``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from pathlib import Path

__all__ = [
    "CACHE_ENV", "CHECKOUT", "FIXTURES_ENV", "INSTALLED_PROJECT", "PACKAGE_DIR", "REPO_ROOT", "SCRIPTS_ENV", "bytecode_dir",
    "cache_dir", "fixtures_dir", "manifests_dir", "script_path", "scripts_root", "worker_import_root",
]

#: The ``harness`` package's own folder.
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: Where a wheel keeps the checkout's ``py_scripts/``, ``r_scripts/`` and ``fixtures/manifests/`` (pyproject.toml's
#: ``package-dir`` puts them there): what :data:`REPO_ROOT` is when the harness is installed.
INSTALLED_PROJECT = PACKAGE_DIR / "_project"


def _checkout(folder: Path) -> Path | None:
    """``folder`` if it is the harness's checkout (its pyproject.toml and scripts beside the package), else ``None``."""
    parts = ("pyproject.toml", "py_scripts", "r_scripts")
    return folder if all((folder / part).exists() for part in parts) else None


#: The checkout the harness runs from, or ``None`` when it was installed (from a wheel, or ``pip install .``).
CHECKOUT = _checkout(PACKAGE_DIR.parent)
#: The folder holding ``py_scripts/``, ``r_scripts/`` and ``fixtures/``: the checkout, or its copy in the installed package.
REPO_ROOT = CHECKOUT or INSTALLED_PROJECT
_SCRIPT_DIRS = {"python": ("py_scripts", ".py"), "r": ("r_scripts", ".R")}
#: A folder holding ``py_scripts/`` and ``r_scripts/`` to run instead of the checkout's: how a test (or a
#: maintainer) runs a *copy* of the real scripts with one planted change, through the real workers.
SCRIPTS_ENV = "AMP_PARITY_SCRIPTS"
#: The fixture cache, wherever the harness runs.
FIXTURES_ENV = "AMP_PARITY_FIXTURES"
#: The user cache folder of an installed harness (fixtures under ``fixtures/``, unless ``$AMP_PARITY_FIXTURES`` says).
CACHE_ENV = "AMP_PARITY_CACHE"


def cache_dir() -> Path:
    """The user cache folder: ``$AMP_PARITY_CACHE``, else the platform's cache folder's ``amp-parity/``.

    The XDG base directory rule on Linux (``$XDG_CACHE_HOME``, else ``~/.cache``) and ``~/Library/Caches`` on macOS,
    as platformdirs' ``user_cache_dir`` has it (the harness needs ``fcntl``, so these are the platforms it runs on).
    """
    chosen = os.environ.get(CACHE_ENV)
    if chosen:
        return Path(chosen)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "amp-parity"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "amp-parity"


def fixtures_dir() -> Path:
    """The fixture cache: ``$AMP_PARITY_FIXTURES``, else ``fixtures/cache`` in the checkout, else the user cache's ``fixtures/``.

    One cache for every process, so pytest-xdist workers and repeated runs share fixture files; never inside an
    installed package (site-packages may be read-only, and a cache there would go with the next upgrade).
    """
    chosen = os.environ.get(FIXTURES_ENV)
    if chosen:
        return Path(chosen)
    return CHECKOUT / "fixtures" / "cache" if CHECKOUT is not None else cache_dir() / "fixtures"


def bytecode_dir() -> Path:
    """Where the R worker keeps our R files byte-compiled (r_scripts/_bytecode.R): the user cache's ``r-bytecode/``.

    In the user cache even in a checkout: an entry is keyed by its file's content, so every checkout and copy of the
    scripts shares it, and a copy's first worker pays no compile when another already did.
    """
    return cache_dir() / "r-bytecode"


def manifests_dir() -> Path:
    """The committed fixture manifests (``fixtures/manifests/<preset>.json``), in the checkout or the installed package."""
    return REPO_ROOT / "fixtures" / "manifests"


def scripts_root() -> Path:
    """The folder whose ``py_scripts/`` and ``r_scripts/`` run: ``$AMP_PARITY_SCRIPTS`` or :data:`REPO_ROOT`.

    Read on every call (not at import), so a worker started after the variable was set runs the copy.
    """
    return Path(os.environ.get(SCRIPTS_ENV) or REPO_ROOT).resolve()


def script_path(frontend: str, stem: str) -> Path:
    """``py_scripts/<stem>.py`` or ``r_scripts/<stem>.R`` under :func:`scripts_root`: pairs are found by stem."""
    folder, suffix = _SCRIPT_DIRS[frontend]
    return scripts_root() / folder / f"{stem}{suffix}"


def worker_import_root() -> Path:
    """The folder a worker puts first on its ``PYTHONPATH`` to import this harness, and nothing else of this interpreter's.

    A worker may run another interpreter (a venv with another torch: docs/installations.md), which must import its
    own torch. The checkout holds the harness and no torch; an installed harness sits in site-packages beside this
    interpreter's torch, so the worker gets a folder of the user cache holding only a link to the package.
    """
    if CHECKOUT is not None:
        return CHECKOUT
    folder = cache_dir() / "import" / hashlib.sha256(str(PACKAGE_DIR).encode()).hexdigest()[:16]
    link = folder / "harness"
    if link.resolve() != PACKAGE_DIR:
        folder.mkdir(parents=True, exist_ok=True)
        fresh = folder / f".harness.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            fresh.unlink()
        fresh.symlink_to(PACKAGE_DIR, target_is_directory=True)
        fresh.replace(link)  # atomic: a worker starting beside this one sees the old link or the new
    return folder
