"""The provenance of a run, taken when it starts (:class:`harness.model.provenance.Provenance`).

What ran is read from disk, never listed by hand, so a shared file someone adds is covered without a word: every
file under the scripts root's ``py_scripts/`` and ``r_scripts/`` (what either language's scripts can load), and every
data file of the harness's package (``harness/judge/known_differences.toml``, what the results are judged against;
``harness/workload/patches.toml``, what a trace records inside the bindings and what reconciliation switches).
The commit and dirty state come from git, where the harness runs from a checkout; an installed harness has none, and
says so.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from harness.files.paths import CHECKOUT, INSTALLED_PROJECT, PACKAGE_DIR, scripts_root
from harness.files.version import __version__
from harness.model.provenance import Provenance

__all__ = ["SCRIPT_FOLDERS", "describe_provenance", "file_digests"]

#: The folders under the scripts root whose every file the scripts can load (both languages).
SCRIPT_FOLDERS = ("py_scripts", "r_scripts")
#: What is not a file that runs: caches the interpreters write beside the scripts.
_NOT_RUN = ("__pycache__",)
_NOT_RUN_SUFFIXES = (".pyc", ".pyo")
#: What in the package is code, not data (the data files are digested; the code is the version and commit's). Hidden
#: files and caches (an old ``harness/fixtures/cache/`` left in a checkout) are not data either.
_CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".typed")
#: Seconds git may take to answer (a network file system, a huge repository): past them, the commit is unknown.
_GIT_TIMEOUT_S = 20


def describe_provenance() -> Provenance:
    """Where a run about to start comes from: this harness's version, its checkout's commit, and every file's digest."""
    root = scripts_root()
    files = file_digests(root, SCRIPT_FOLDERS)
    data = [p for p in _walk(PACKAGE_DIR) if p.suffix not in _CODE_SUFFIXES and INSTALLED_PROJECT not in p.parents
            and not any(part.startswith(".") or part == "cache" for part in p.relative_to(PACKAGE_DIR).parts)]
    files |= {f"harness/{p.relative_to(PACKAGE_DIR).as_posix()}": _sha256(p) for p in data}
    if CHECKOUT is None:
        return Provenance(__version__, "installed", note="installed package: no checkout, so no commit", scripts_root=str(root),
                          files=files)
    commit, dirty, why = _git_state(CHECKOUT)
    return Provenance(__version__, "checkout", commit=commit, dirty=dirty, note=why, scripts_root=str(root), files=files)


def file_digests(root: Path, folders: tuple[str, ...]) -> dict[str, str]:
    """The SHA-256 of every file under ``root/<folder>`` for each folder, by its path relative to ``root`` (caches left out)."""
    return {p.relative_to(root).as_posix(): _sha256(p) for folder in folders for p in _walk(root / folder)}


def _walk(folder: Path) -> list[Path]:
    """Every regular file under ``folder``, sorted, without the interpreters' caches."""
    if not folder.is_dir():
        return []
    files = (p for p in folder.rglob("*") if p.is_file() and p.suffix not in _NOT_RUN_SUFFIXES)
    return sorted(p for p in files if not any(part in _NOT_RUN for part in p.relative_to(folder).parts))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _git_state(checkout: Path) -> tuple[str | None, bool | None, str | None]:
    """The checkout's commit, whether its tracked files differ from it, and why either is unknown (``None``: both known)."""
    try:
        head = _git(checkout, "rev-parse", "HEAD")
        status = _git(checkout, "status", "--porcelain", "--untracked-files=no")
    except FileNotFoundError:
        return None, None, "git not found: the checkout's commit is unknown"
    except subprocess.TimeoutExpired:
        return None, None, f"git did not answer in {_GIT_TIMEOUT_S} s: the checkout's commit is unknown"
    except subprocess.CalledProcessError as err:
        said = (err.stderr or "").strip().splitlines()
        return None, None, f"git could not tell the checkout's commit ({said[-1] if said else f'exit status {err.returncode}'})"
    return head.strip(), bool(status.strip()), None


def _git(checkout: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=_GIT_TIMEOUT_S, check=True)
    return done.stdout
