"""Which files a run's provenance digests: every file the scripts can load, found on disk, caches left out.

The commit and dirty state need git (a process): ``tests/integration/test_provenance.py``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from harness.files.paths import REPO_ROOT
from harness.run.provenance import SCRIPT_FOLDERS, file_digests


def test_every_script_file_is_digested_and_a_new_shared_file_is_covered(tmp_path: Path) -> None:
    """Each file under py_scripts/ and r_scripts/ is digested by its path (a new shared file too, with no list to update);
    the interpreters' caches are not."""
    for folder in SCRIPT_FOLDERS:
        (tmp_path / folder / "__pycache__").mkdir(parents=True)
    (tmp_path / "py_scripts" / "common.py").write_text("x = 1\n")
    (tmp_path / "r_scripts" / "helpers" / "extra.R").parent.mkdir()
    (tmp_path / "r_scripts" / "helpers" / "extra.R").write_text("y <- 2\n")
    (tmp_path / "py_scripts" / "__pycache__" / "common.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "notes.txt").write_text("not a script")
    digests = file_digests(tmp_path, SCRIPT_FOLDERS)
    assert digests == {"py_scripts/common.py": hashlib.sha256(b"x = 1\n").hexdigest(),
                       "r_scripts/helpers/extra.R": hashlib.sha256(b"y <- 2\n").hexdigest()}


def test_the_checkouts_scripts_are_all_digested() -> None:
    """Every R file and every Python script of the checkout is in the digests, each model's forward among them."""
    digests = file_digests(REPO_ROOT, SCRIPT_FOLDERS)
    expected = {p.relative_to(REPO_ROOT).as_posix() for folder in SCRIPT_FOLDERS for p in (REPO_ROOT / folder).rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}
    assert set(digests) == expected and "r_scripts/_bridge.R" in digests and "py_scripts/loop.py" in digests
    assert {"py_scripts/models/mlp.py", "r_scripts/models/mlp.R"} <= set(digests)


def test_the_harness_data_files_are_digested_and_caches_are_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The package's data files (known_differences.toml) are in the provenance; its code, hidden files and a stale fixture
    cache inside it are not (the git state is left out here: it needs a process)."""
    import harness.run.provenance as provenance

    package = tmp_path / "harness"
    for name in ("judge/known_differences.toml", "judge/pairs.py", "py.typed", "fixtures/cache/ab/fixtures.safetensors", ".hidden"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(name)
    monkeypatch.setattr(provenance, "PACKAGE_DIR", package)
    monkeypatch.setattr(provenance, "INSTALLED_PROJECT", package / "_project")
    monkeypatch.setattr(provenance, "CHECKOUT", None)
    monkeypatch.setattr(provenance, "scripts_root", lambda: tmp_path)
    found = provenance.describe_provenance()
    assert found.files == {"harness/judge/known_differences.toml": hashlib.sha256(b"judge/known_differences.toml").hexdigest()}
    assert (found.source, found.commit) == ("installed", None)
