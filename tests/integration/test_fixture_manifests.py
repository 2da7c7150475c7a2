"""What git ignores of the fixtures: the built cache, never the committed manifests (``git check-ignore``).

The manifests themselves are checked in ``tests/unit/workload/test_fixture_manifests.py``.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from harness.files.paths import REPO_ROOT


def test_git_ignores_the_fixture_cache_but_not_the_manifests() -> None:
    """``fixtures/cache/`` (built files) is ignored; ``fixtures/manifests/`` (the committed truth) is not."""
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing decides what is ignored")
    paths = ["fixtures/cache/abc/fixtures.safetensors", "fixtures/manifests/tiny.json"]
    done = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.stdout.split() == ["fixtures/cache/abc/fixtures.safetensors"]
