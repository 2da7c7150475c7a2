"""Script lookup: the checkout's scripts unless $AMP_PARITY_SCRIPTS names a copy.

That the workers really run the copy is in ``tests/integration/test_paths.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.files.paths import REPO_ROOT, SCRIPTS_ENV, script_path, scripts_root
from harness.run.runner import collect_warnings


def test_scripts_root_defaults_to_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the variable the checkout's scripts run and no warning is added."""
    monkeypatch.delenv(SCRIPTS_ENV, raising=False)
    assert scripts_root() == REPO_ROOT
    assert script_path("r", "with_autocast") == REPO_ROOT / "r_scripts" / "with_autocast.R"
    assert collect_warnings([]) == []


def test_an_installed_harness_caches_in_the_user_cache_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Outside a checkout the fixtures go to the user cache ($AMP_PARITY_CACHE, else $XDG_CACHE_HOME/amp-parity); a checkout keeps
    its fixtures/cache/; $AMP_PARITY_FIXTURES wins everywhere. The R byte-code cache is the user cache's everywhere."""
    from harness.files import paths

    monkeypatch.delenv(paths.FIXTURES_ENV, raising=False)
    monkeypatch.delenv(paths.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.fixtures_dir() == REPO_ROOT / "fixtures" / "cache"
    monkeypatch.setattr(paths, "CHECKOUT", None)
    assert paths.fixtures_dir() == tmp_path / "xdg" / "amp-parity" / "fixtures"
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "mine"))
    assert paths.cache_dir() == tmp_path / "mine" and paths.fixtures_dir() == tmp_path / "mine" / "fixtures"
    monkeypatch.setattr(paths, "CHECKOUT", REPO_ROOT)
    assert paths.bytecode_dir() == tmp_path / "mine" / "r-bytecode"  # installed or not: entries are found by content
    monkeypatch.setattr(paths, "CHECKOUT", None)
    monkeypatch.setenv(paths.FIXTURES_ENV, str(tmp_path / "fx"))
    assert paths.fixtures_dir() == tmp_path / "fx"


def test_the_checkout_is_told_from_an_installed_package(tmp_path: Path) -> None:
    """A folder is the checkout only with pyproject.toml and both script folders beside the package; site-packages is not."""
    from harness.files import paths

    assert paths.CHECKOUT == REPO_ROOT and paths._checkout(REPO_ROOT) == REPO_ROOT
    for part in ("py_scripts", "r_scripts"):
        (tmp_path / part).mkdir()
    assert paths._checkout(tmp_path) is None  # a site-packages that happens to hold folders so named
    (tmp_path / "pyproject.toml").write_text("")
    assert paths._checkout(tmp_path) == tmp_path
    assert paths.INSTALLED_PROJECT == paths.PACKAGE_DIR / "_project" and paths.manifests_dir() == REPO_ROOT / "fixtures" / "manifests"


def test_an_installed_workers_import_folder_holds_the_harness_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A worker of another interpreter imports the harness from a folder holding only a link to it (not site-packages, whose
    torch is this interpreter's); in a checkout it is the checkout."""
    from harness.files import paths

    assert paths.worker_import_root() == REPO_ROOT
    monkeypatch.setattr(paths, "CHECKOUT", None)
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path))
    root = paths.worker_import_root()
    assert root.parent == tmp_path / "import" and [p.name for p in root.iterdir()] == ["harness"]
    assert (root / "harness").resolve() == paths.PACKAGE_DIR and paths.worker_import_root() == root  # made once, found again
