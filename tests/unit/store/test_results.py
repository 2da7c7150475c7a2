"""Result files: versioned, refused with instructions when from another schema, never overwritten by accident."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ResultError
from harness.model.result import RESULT_SCHEMA_VERSION
from harness.store.result_file import load_result, save_result, weights_dir_for
from tests.model_results import COMMITTED, committed, with_weights


def test_round_trip(tmp_path: Path) -> None:
    """A saved result loads back equal, and is stored as this schema version."""
    result = committed()
    save_result(result, tmp_path / "r.json")
    assert load_result(tmp_path / "r.json") == result
    assert json.loads((tmp_path / "r.json").read_text())["schema_version"] == RESULT_SCHEMA_VERSION == 10


@pytest.mark.parametrize(("version", "advice"), [(11, "upgrade amp-parity"), (1, "re-run `python -m harness run --json`")])
def test_other_schema_versions_are_refused_with_what_to_do(tmp_path: Path, version: int, advice: str) -> None:
    """A newer or older schema is refused in one line, saying which and what to do."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema_version": version, "cells": []}))
    with pytest.raises(ResultError, match=f"schema version {version}.*reads versions 2 to 10: {advice}") as refused:
        load_result(path)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("name", ["golden"])
def test_the_committed_version_3_results_are_read_as_the_current_version(name: str) -> None:
    """The golden schema-3 result loads with every speed-up turned into a time, no traces, injections after backward
    (what version 3 did), plain SGD in every cell (version 8), and every other field as stored; the scaler cells' ratios,
    taken over with_autocast's default before each script had its own, are not shown."""
    stored = json.loads((COMMITTED / f"{name}.json").read_text())
    assert stored["schema_version"] == 3
    loaded = load_result(COMMITTED / f"{name}.json")
    for before, after in zip(stored["cells"], loaded.cells, strict=True):
        speedup = before["speedup_vs_default"]
        if after.script == "cuda_amp_grad_scaler" and after.ok:
            assert (after.time_vs_default, after.time_vs_default_note) == (
                None, "not shown: before schema 8 it divided by with_autocast's default cell")
        else:
            assert after.time_vs_default == (None if speedup is None else pytest.approx(1 / speedup))
            assert after.time_vs_default_note == before["speedup_note"]
        assert after.optimizer == "sgd" and str(after.status) == before["status"]
        assert after.id == before["id"].replace(f"-{after.frontend}-", f"-sgd-{after.frontend}-")
        if after.record is not None:
            assert list(after.record.losses) == before["record"]["losses"]
            assert Path(str(after.record.weights_path)) == (COMMITTED / before["record"]["weights_path"]).resolve()
            assert Path(str(after.record.weights_path)).is_file()
    # Judged again on load (verdicts are never read back): the verdicts its run gave, in today's words.
    assert [p.verdict for p in loaded.pairs] == [p["verdict"] for p in stored["pairs"]] and loaded.traces == ()
    assert loaded.spec.to_json() == stored["spec"] | {"overflow_point": "backward", "optimizer_args": {}, "static_loss_scale": 1024.0}
    assert any(c.time_vs_default is not None for c in loaded.cells)


def test_not_json_and_not_a_result_are_refused(tmp_path: Path) -> None:
    """Garbage and foreign JSON get distinct messages."""
    (tmp_path / "a.json").write_text("{half")
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(ResultError, match="is not valid JSON"):
        load_result(tmp_path / "a.json")
    with pytest.raises(ResultError, match="is not an amp-parity result"):
        load_result(tmp_path / "b.json")


def test_existing_result_is_not_overwritten(tmp_path: Path) -> None:
    """Saving over an existing result is refused unless asked, and the old content stays."""
    path = tmp_path / "r.json"
    save_result(committed(), path)
    kept = path.read_text()
    smaller = with_weights(committed(), [None])
    with pytest.raises(ResultError, match="already exists.*--overwrite"):
        save_result(smaller, path)
    assert path.read_text() == kept
    save_result(smaller, path, overwrite=True)
    assert [c["id"] for c in json.loads(path.read_text())["cells"]] == [smaller.cells[0].id]


@pytest.mark.parametrize("kind", ["text file", "symlink", "folder"])
def test_overwrite_replaces_only_a_result_file(tmp_path: Path, kind: str) -> None:
    """``overwrite`` never replaces what is not a result this harness wrote: a user's file, a link, a folder."""
    path = tmp_path / "r.json"
    if kind == "text file":
        path.write_text("my notes")
    elif kind == "symlink":
        save_result(committed(), tmp_path / "target")
        path.symlink_to(tmp_path / "target")
    else:
        path.mkdir()
    with pytest.raises(ResultError, match="is not an amp-parity result; --overwrite replaces only those"):
        save_result(committed(), path, overwrite=True)
    assert path.read_text() == "my notes" if kind == "text file" else os.path.lexists(path)


def test_weights_paths_are_stored_relative_to_the_result_and_read_back_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result saved from one folder and loaded from another still finds its weights (the report-elsewhere bug)."""
    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run_dir.mkdir()
    elsewhere.mkdir()
    (run_dir / "out.weights").mkdir()
    (run_dir / "out.weights" / "a.safetensors").write_bytes(b"x")
    monkeypatch.chdir(run_dir)
    save_result(with_weights(committed(), [Path("out.weights/a.safetensors"), None]), Path("out.json"))
    assert json.loads((run_dir / "out.json").read_text())["cells"][0]["record"]["weights_path"] == "out.weights/a.safetensors"
    monkeypatch.chdir(elsewhere)
    loaded = load_result(Path("../run/out.json"))
    record = loaded.cells[0].record
    assert record is not None and Path(str(record.weights_path)).resolve() == (run_dir / "out.weights" / "a.safetensors").resolve()
    assert loaded.cells[1].record is None


def test_version_2_weights_paths_relative_to_the_run_folder_are_found_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A version-2 result (paths relative to the run's working folder) is read as version 4 from anywhere."""
    (tmp_path / "results" / "x.weights").mkdir(parents=True)
    (tmp_path / "results" / "x.weights" / "a.safetensors").write_bytes(b"x")
    (tmp_path / "elsewhere.safetensors").write_bytes(b"x")  # an absolute path is kept as it is (it exists: a path to nothing is not)
    stored = _version_2(["results/x.weights/a.safetensors", str(tmp_path / "elsewhere.safetensors")])
    (tmp_path / "results" / "x.json").write_text(json.dumps(stored))
    monkeypatch.chdir(tmp_path / "results")
    loaded = load_result(Path("x.json"))
    assert [c.record.weights_path for c in loaded.cells if c.record is not None][:2] == [
        str(tmp_path / "results" / "x.weights" / "a.safetensors"), str(tmp_path / "elsewhere.safetensors")
    ]


def _version_2(weights_paths: list[str]) -> dict[str, Any]:
    """The golden result stored as version 2, with its first cells' weights paths replaced."""
    from tests.support import GOLDEN_RESULT

    data = json.loads(GOLDEN_RESULT.read_text()) | {"schema_version": 2}
    ran = [cell for cell in data["cells"] if cell["record"] is not None]
    for cell, path in zip(ran, weights_paths, strict=False):
        cell["record"]["weights_path"] = path
    return dict(data)


@pytest.mark.parametrize(("name", "weights"), [("B.json", "B.weights"), ("B.txt", "B.txt.weights"), ("B", "B.weights")])
def test_results_with_different_names_get_different_weights_folders(name: str, weights: str) -> None:
    """``B.json`` and ``B.txt`` no longer share ``B.weights/`` (the second used to replace the first's weights)."""
    assert weights_dir_for(Path("d") / name) == Path("d") / weights


def test_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    """A result path under a file (not a folder) is refused with a one-line reason."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ResultError, match="cannot write .*Choose a writable path"):
        save_result(committed(), blocker / "r.json")


def test_a_version_2_result_is_still_read(tmp_path: Path) -> None:
    """The golden result stored as schema 2 (absolute weights paths) loads as the current version with its paths kept."""
    from tests.support import GOLDEN_RESULT

    stored = json.loads(GOLDEN_RESULT.read_text(encoding="utf-8")) | {"schema_version": 2}
    records = [c["record"] for c in stored["cells"] if c["record"]]
    for record in records:
        record["weights_path"] = str(GOLDEN_RESULT.parent / record["weights_path"])
    (tmp_path / "old.json").write_text(json.dumps(stored), encoding="utf-8")
    loaded = load_result(tmp_path / "old.json")
    assert loaded.to_json()["schema_version"] == RESULT_SCHEMA_VERSION
    kept = [c.record.weights_path for c in loaded.cells if c.record]
    assert kept == [r["weights_path"] for r in records] and all(Path(str(p)).is_file() for p in kept)
