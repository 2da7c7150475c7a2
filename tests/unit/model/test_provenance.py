"""A result's provenance: what it stores, how it reads, and which files two results ran differently."""

from __future__ import annotations

from harness.model.provenance import UNKNOWN_BEFORE_SCHEMA_9, Provenance, script_differences

_FILES = {"py_scripts/common.py": "a" * 64, "r_scripts/common.R": "b" * 64, "harness/judge/known_differences.toml": "c" * 64}


def test_provenance_round_trips_and_reads_in_one_line() -> None:
    """A checkout's provenance keeps every field through JSON, and its line says version, commit, dirty state and the files."""
    provenance = Provenance("0.1.0", "checkout", commit="0123456789abcdef0123", dirty=True, scripts_root="/repo", files=_FILES)
    assert Provenance.from_json(provenance.to_json()) == provenance
    line = provenance.describe()
    assert line.startswith("harness 0.1.0; commit 0123456789ab (dirty: uncommitted changes); 3 script and data files, sha256 ")
    assert provenance.files_digest is not None and line.endswith(provenance.files_digest)


def test_an_installed_and_an_unknown_provenance_say_why_they_lack_a_commit() -> None:
    """No checkout (a wheel) and no provenance (a result before schema 8) are each said in words, not left blank."""
    installed = Provenance("0.1.0", "installed", note="installed package: no checkout, so no commit", files=_FILES)
    assert "installed package: no checkout, so no commit" in installed.describe() and installed.known
    unknown = Provenance.unknown()
    assert not unknown.known and unknown.describe() == f"harness version unknown; {UNKNOWN_BEFORE_SCHEMA_9}"


def test_the_files_that_differ_are_named() -> None:
    """A changed file and a file only one result ran are named; the same files give no line."""
    first = Provenance("0.1.0", "checkout", files=_FILES)
    changed = Provenance("0.1.0", "checkout", files={**_FILES, "r_scripts/common.R": "d" * 64, "py_scripts/new.py": "e" * 64})
    assert first.differing_files(changed) == ["py_scripts/new.py", "r_scripts/common.R"]
    assert first.files_digest != changed.files_digest
    assert script_differences([("a.json", first), ("b.json", first)]) == []
    assert script_differences([("a.json", first), ("b.json", changed)]) == [
        "b.json ran different scripts than a.json: py_scripts/new.py, r_scripts/common.R differ"
    ]
    assert script_differences([("a.json", first), ("old.json", Provenance.unknown())]) == [
        f"old.json: {UNKNOWN_BEFORE_SCHEMA_9}; whether it ran the same scripts as a.json is unknown"
    ]
