"""The R worker's byte-code cache (r_scripts/_bytecode.R): our R files compiled once, served by content, never failing a cell.

Each test gives its workers a cache folder of its own ($AMP_PARITY_CACHE) and, where it edits files, a copy of the scripts
($AMP_PARITY_SCRIPTS). No R torch needed: the probe script below builds its record from R alone.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from harness.files.paths import CACHE_ENV, SCRIPTS_ENV
from harness.run.availability import Availability
from harness.run.frontends import open_worker
from tests.planting import copy_scripts

#: A script that says what the worker has loaded: whether functions nobody has called are byte code (so they were compiled
#: ahead, not by the JIT at a first call), from itself, record.R, patches.R and the bridge, and what a copy planted in record.R;
#: and, as its top level saw them, source()'s `ofile` (what a script run cold finds itself by) and the condition under which
#: the real scripts skip that cold start (the shared files loaded).
_PROBE = """
ofile <- dynGet("ofile", ifnotfound = "none")
cold_start_skipped <- exists("make_record", mode = "function")
never_called <- function(x) x + 1
run_workload <- function(spec, mode) {
  compiled <- function(f) !inherits(tryCatch(compiler::disassemble(f), error = identity), "error")
  list(
    version = "{version}",
    compiled = c(compiled(never_called), compiled(make_record), compiled(patch_rows), compiled(amp_parity_calibrate)),
    planted = get0("planted_in_the_copy", ifnotfound = "none"),
    ofile = ofile,
    cold_start_skipped = cold_start_skipped
  )
}
"""


#: The cache's entries after one call of the probe: the bridge, the shared files it loads and the probe script.
SHARED_ENTRIES = ["_bridge", "checkpoint", "features", "loop", "model", "optimizer", "patches", "probe", "record", "run_spec",
                  "scaler", "timing", "tracing"]


@pytest.fixture
def scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, availability: Availability) -> Path:
    """A copy of the scripts, run by the workers the test starts, with the probe script beside them and a cache of its own."""
    if availability.rscript is None or availability.rpy2_version is None or availability.rpy2_error:
        pytest.skip(availability.r_reason or "R or rpy2 missing")
    root = copy_scripts(tmp_path / "copy")
    (root / "r_scripts" / "probe.R").write_text(_PROBE.replace("{version}", "one"))
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return root / "r_scripts"


def _call(scripts: Path) -> dict[str, Any]:
    """The probe's record from a freshly started R worker (its own start: what the cache is for)."""
    worker = open_worker("r")
    try:
        record: dict[str, Any] = worker.call(
            {"script": "probe", "script_path": str(scripts / "probe.R"), "mode": "default", "spec_summary": "probe",
             "run_spec": {"device": "cpu"}},
            timeout=120,
        )
        return record
    finally:
        worker.close()


def _entries(cache: Path) -> dict[str, tuple[int, int]]:
    """Each cache entry by file name, with its inode and modification time (a rewritten entry changes both)."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in cache.rglob("*.rds")}


def _edit_keeping_mtime(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` and put its modification time back: only the content tells the change."""
    before = path.stat()
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_second_worker_loads_every_file_compiled_from_the_cache(scripts: Path, tmp_path: Path) -> None:
    """The first worker compiles the bridge, the shared files and the script into the cache; a second loads those
    entries as they are (none rewritten), and in both every function is byte code before its first call. A script loaded
    so has no source() around it (no `ofile`): the worker needs none, since the shared files are loaded and the scripts
    skip their cold start."""
    first = _call(scripts)
    assert first["compiled"] == [True, True, True, True]
    assert first["ofile"] == "none" and first["cold_start_skipped"] is True
    entries = _entries(tmp_path / "cache")
    assert sorted(name.split("-")[0] for name in entries) == SHARED_ENTRIES
    second = _call(scripts)
    assert second["compiled"] == [True, True, True, True]
    assert _entries(tmp_path / "cache") == entries


def test_a_changed_file_is_never_served_from_the_cache(scripts: Path, tmp_path: Path) -> None:
    """An edit to a shared file (record.R) or to a script, its modification time put back, is loaded by the next worker: entries are found
    by the file's content, and the old ones stay for the content they hold."""
    assert _call(scripts)["planted"] == "none"
    with (scripts / "record.R").open() as handle:
        common = handle.read()
    _edit_keeping_mtime(scripts / "record.R", common + '\nplanted_in_the_copy <- "two"\n')
    _edit_keeping_mtime(scripts / "probe.R", _PROBE.replace("{version}", "two"))
    record = _call(scripts)
    assert record["planted"] == "two" and record["version"] == "two" and record["compiled"] == [True, True, True, True]
    stems = sorted(name.split("-")[0] for name in _entries(tmp_path / "cache"))
    assert stems == sorted([*SHARED_ENTRIES, "probe", "record"])


def test_a_corrupt_entry_is_compiled_again_and_the_cell_runs(scripts: Path, tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """An entry that cannot be read (here: cut short) costs one line on R's console, logged by the worker; the file is
    compiled again, the entry replaced, and the call answers as before."""
    _call(scripts)
    (entry,) = (tmp_path / "cache").rglob("record-*.rds")
    entry.write_bytes(entry.read_bytes()[:1000])
    with caplog.at_level(logging.WARNING, logger="harness.r"):
        record = _call(scripts)
    assert record["compiled"] == [True, True, True, True]
    notes = [r.getMessage() for r in caplog.records if r.name == "harness.r"]
    assert notes == [f"R byte-code cache: {entry} is unreadable or not this file's; compiling record.R again."]
    assert entry.stat().st_size > 1000


def test_the_cache_keeps_the_four_newest_entries_of_a_file(scripts: Path, tmp_path: Path) -> None:
    """Six versions of a script, each loaded once by one worker (an edit with a new mtime is loaded again), leave its four
    newest entries: a file edited all day does not fill the cache folder."""
    worker = open_worker("r")
    request = {"script": "probe", "script_path": str(scripts / "probe.R"), "mode": "default", "spec_summary": "probe",
               "run_spec": {"device": "cpu"}}
    try:
        for version in range(6):
            (scripts / "probe.R").write_text(_PROBE.replace("{version}", str(version)))
            os.utime(scripts / "probe.R", (1_000_000 + version, 1_000_000 + version))
            assert worker.call(request, timeout=120)["version"] == str(version)
    finally:
        worker.close()
    probes = sorted((tmp_path / "cache").rglob("probe-*.rds"), key=lambda p: p.stat().st_mtime_ns)
    assert len(probes) == 4 and 'version = "5"' in probes[-1].read_text(errors="replace")


@pytest.mark.parametrize("how", ["a file in its place", "read-only"])
def test_a_cache_folder_that_cannot_be_written_falls_back_to_source(scripts: Path, tmp_path: Path, how: str,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Where the cache folder cannot be made or written, the files are sourced as before (their functions then compiled by
    R's JIT, as it compiles them: the never-called ones stay R code) and one line says so; the call answers."""
    cache = tmp_path / "cache"
    if how == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes to a read-only folder: the other case covers it")
        cache.mkdir(mode=0o555)
    else:
        cache.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="harness.r"):
        record = _call(scripts)
    assert record["version"] == "one" and record["compiled"] == [False, False, False, False]
    assert record["ofile"] == str(scripts / "probe.R") and record["cold_start_skipped"] is True  # source()'s, as before
    notes = [r.getMessage() for r in caplog.records if r.name == "harness.r"]
    assert len(notes) == 1 and notes[0].startswith("R byte-code cache: cannot write to ") and CACHE_ENV in notes[0]


def test_the_bridge_sourced_by_hand_sources_the_files(tmp_path: Path) -> None:
    """Without ``amp_parity_bytecode_dir`` (the bridge sourced by hand, not by the worker) nothing is compiled or written."""
    import subprocess

    from harness.files.paths import REPO_ROOT

    done = subprocess.run(
        ["Rscript", "-e", 'amp_parity_r_dir <- "r_scripts"; source("r_scripts/_bridge.R"); '
                          'cat(inherits(tryCatch(compiler::disassemble(patch_rows), error = identity), "error"))'],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, CACHE_ENV: str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "TRUE" and list(tmp_path.iterdir()) == []

