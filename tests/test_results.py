"""Result files: versioned, refused with instructions when from another schema, never overwritten by accident."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ResultError
from harness.results import RESULT_SCHEMA_VERSION, load_result, save_result


def test_round_trip(tmp_path: Path) -> None:
    """A saved result loads back equal."""
    result = {"schema_version": RESULT_SCHEMA_VERSION, "cells": [{"id": "x"}]}
    save_result(result, tmp_path / "r.json")
    assert load_result(tmp_path / "r.json") == result


@pytest.mark.parametrize(("version", "advice"), [(3, "upgrade amp-parity"), (1, "re-run `python -m harness run --json`")])
def test_other_schema_versions_are_refused_with_what_to_do(tmp_path: Path, version: int, advice: str) -> None:
    """A newer or older schema is refused, saying which and what to do."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema_version": version, "cells": []}))
    with pytest.raises(ResultError, match=f"schema version {version}.*reads version 2: {advice}"):
        load_result(path)


def test_not_json_and_not_a_result_are_refused(tmp_path: Path) -> None:
    """Garbage and foreign JSON get distinct messages."""
    (tmp_path / "a.json").write_text("{half")
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(ResultError, match="is not valid JSON"):
        load_result(tmp_path / "a.json")
    with pytest.raises(ResultError, match="is not an amp-parity result"):
        load_result(tmp_path / "b.json")


def test_existing_result_is_not_overwritten(tmp_path: Path) -> None:
    """Saving over an existing file is refused unless asked, and the old content stays."""
    path = tmp_path / "r.json"
    path.write_text("keep")
    with pytest.raises(ResultError, match="already exists.*--overwrite"):
        save_result({"schema_version": 1, "cells": []}, path)
    assert path.read_text() == "keep"
    save_result({"schema_version": 1, "cells": []}, path, overwrite=True)
    assert json.loads(path.read_text())["cells"] == []


def test_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    """A result path under a file (not a folder) is refused with a one-line reason."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ResultError, match="cannot write .*Choose a writable path"):
        save_result({"schema_version": 1, "cells": []}, blocker / "r.json")


def test_measured_results_under_docs_results_can_be_committed() -> None:
    """git ignores the checkout's top-level results/ only: a result, its weights and report under docs/results/ can land."""
    import shutil
    import subprocess

    from harness.paths import REPO_ROOT

    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing decides what is ignored")
    paths = ["docs/results/m/tiny.json", "docs/results/m/tiny.weights/a.safetensors", "docs/results/m/tiny/report.md", "results/a.json"]
    done = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.stdout.split() == ["results/a.json"]
