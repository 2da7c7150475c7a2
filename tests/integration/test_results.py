"""What git ignores of the results: the checkout's top-level results/ only (``git check-ignore``).

Reading and writing result files is in ``tests/unit/store/test_results.py``.
"""

from __future__ import annotations

import pytest


def test_measured_results_under_docs_results_can_be_committed() -> None:
    """git ignores the checkout's top-level results/ only: a result, its weights and report under docs/results/ can land."""
    import shutil
    import subprocess

    from harness.files.paths import REPO_ROOT

    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing decides what is ignored")
    paths = ["docs/results/m/tiny.json", "docs/results/m/tiny.weights/a.safetensors", "docs/results/m/tiny/report.md", "results/a.json"]
    done = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.stdout.split() == ["results/a.json"]
