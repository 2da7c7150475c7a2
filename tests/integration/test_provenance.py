"""A run's provenance from git: the checkout's commit, whether it is dirty, and why either is unknown.

Which files are digested is in ``tests/unit/run/test_provenance.py``; that a run records it, in
``tests/integration/test_runner.py``; an installed harness's (no commit), in ``tests/integration/test_wheel.py``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import harness.run.provenance
from harness.files.paths import REPO_ROOT
from harness.run.provenance import describe_provenance


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_a_checkouts_commit_and_dirty_state_are_git_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit is ``git rev-parse HEAD``; a change to a tracked file makes it dirty, a new untracked file does not."""
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    here = describe_provenance()
    assert (here.source, here.commit, here.note) == ("checkout", _git(REPO_ROOT, "rev-parse", "HEAD"), None)
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "tracked.txt").write_text("one")
    _git(repo, "add", "tracked.txt")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    monkeypatch.setattr(harness.run.provenance, "CHECKOUT", repo)
    clean = describe_provenance()
    assert (clean.commit, clean.dirty) == (_git(repo, "rev-parse", "HEAD"), False)
    (repo / "untracked.txt").write_text("new")
    assert describe_provenance().dirty is False
    (repo / "tracked.txt").write_text("two")
    assert describe_provenance().dirty is True and "(dirty: uncommitted changes)" in describe_provenance().describe()


def test_without_git_the_commit_is_unknown_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No git on the PATH: no commit, the note says git was not found, and the files are digested all the same."""
    monkeypatch.setenv("PATH", str(tmp_path))
    provenance = describe_provenance()
    assert (provenance.commit, provenance.dirty, provenance.note) == (None, None, "git not found: the checkout's commit is unknown")
    assert provenance.known and "git not found" in provenance.describe()
