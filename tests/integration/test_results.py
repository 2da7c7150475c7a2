"""What git ignores of the results and caches (``git check-ignore``): the checkout's top-level results/, the final weights of
docs/results/, and fixture caches wherever they appear.

Reading and writing result files is in ``tests/unit/store/test_results.py``.
"""

from __future__ import annotations

import pytest


def test_measured_results_under_docs_results_are_committed_lean() -> None:
    """git ignores the checkout's top-level results/ and the final-weights files of docs/results/ (a result keeps what its
    verdicts read of them): a result, its weights folder's marker and small per-cell files, and its report can land."""
    import shutil
    import subprocess

    from harness.files.paths import REPO_ROOT

    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing decides what is ignored")
    weights = "docs/results/m/tiny.weights"
    paths = ["docs/results/m/tiny.json", f"{weights}/a.safetensors", f"{weights}/.amp-parity-weights.json", f"{weights}/a.trace.json",
             "docs/results/m/tiny/report.md", "results/a.json"]
    done = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.stdout.split() == ["docs/results/m/tiny.weights/a.safetensors", "results/a.json"]


@pytest.mark.parametrize("path", ["fixtures/cache/x/.lock", "harness/fixtures/cache/x/fixtures.safetensors", "elsewhere/fixtures/cache/a"])
def test_fixture_caches_are_ignored_wherever_they_appear(path: str) -> None:
    """A fixture cache (and its lock files) is ignored in the checkout's fixtures/, and in any other fixtures/cache/ a run made."""
    import shutil
    import subprocess

    from harness.files.paths import REPO_ROOT

    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing decides what is ignored")
    done = subprocess.run(["git", "check-ignore", "--no-index", path], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.stdout.split() == [path]
