"""``--benchmark-compare`` compares losses too: a planted change fails the session naming the cell, a rerun passes.

One Python cell of ``tiny`` (``with_autocast`` ``default``, 2 rounds), five sessions on one temporary storage, one
sequence both tests read: save a run on empty storage, compare an unchanged rerun, compare a run of a copy of the
scripts with the Python lr ×(1 + 1e-6) (:mod:`tests.planting`), ask for a saved run that is not there, compare with
truncated saves. On one libtorch on CPU the Python cell repeats bitwise, so the default policy (``auto``, same build)
must fail the planted run and pass the unchanged one. The module is one xdist group, so the sequence runs once.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.files.paths import REPO_ROOT, SCRIPTS_ENV
from tests.planting import copy_scripts, plant

pytestmark = pytest.mark.xdist_group("benchmark-losses")

CELL = "test_cell_time[with_autocast-default-sgd-python-cpu]"


def bench(storage: Path, *args: str, scripts: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The one Python ``default`` cell benchmarked against ``storage``, 2 rounds, from ``scripts`` (else the checkout's)."""
    env = {**os.environ, "AMP_PARITY_BENCH_PRESET": "tiny", "AMP_PARITY_BENCH_ROUNDS": "2"}
    if scripts is not None:
        env[SCRIPTS_ENV] = str(scripts)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/benchmarks", "--benchmark-only", "-k", "with_autocast-default-sgd-python-cpu",
         f"--benchmark-storage=file://{storage}", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=env,
    )


@dataclasses.dataclass(frozen=True)
class Sessions:
    """Five benchmark sessions, in this order, on one storage (each a Python worker's start and a cell: one sequence
    that both tests below read, rather than three sessions each).

    ``first``: empty storage, ``--benchmark-compare --benchmark-autosave`` (saves 0001). ``same``: an unchanged rerun
    compared with it. ``changed``: the planted copy compared with 0001. ``missing``: ``--benchmark-compare=0042``, autosaved
    (0002). ``truncated``: every saved run cut to 300 characters, then compared.
    """

    storage: Path
    first: subprocess.CompletedProcess[str]
    same: subprocess.CompletedProcess[str]
    changed: subprocess.CompletedProcess[str]
    missing: subprocess.CompletedProcess[str]
    saved_after_missing: list[str]
    truncated: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Sessions:
    """The five sessions (see :class:`Sessions`)."""
    tmp_path = tmp_path_factory.mktemp("bench-losses")
    storage = tmp_path / "storage"
    first = bench(storage, "--benchmark-compare", "--benchmark-autosave")
    same = bench(storage, "--benchmark-compare")
    root = copy_scripts(tmp_path / "planted")
    plant(root, "py_scripts/optimizer.py", 'python["class"])(params, **args)',
          'python["class"])(params, **(args | {"lr": args["lr"] * (1 + 1e-6)}))')
    changed = bench(storage, "--benchmark-compare=0001", scripts=root)
    missing = bench(storage, "--benchmark-compare=0042", "--benchmark-autosave")
    saved_after_missing = _saved(storage)
    for path in storage.glob("*/*.json"):
        path.write_text(path.read_text()[:300])
    truncated = bench(storage, "--benchmark-compare")
    return Sessions(storage, first, same, changed, missing, saved_after_missing, truncated)


def test_a_planted_change_fails_the_compare_and_an_unchanged_rerun_passes(sessions: Sessions) -> None:
    """The planted lr fails the session with the cell's loss change and weights digest; an unchanged rerun says identical."""
    assert sessions.first.returncode == 0, sessions.first.stdout[-2000:] + sessions.first.stderr[-2000:]
    same = sessions.same
    assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-2000:]
    saved = next(sessions.storage.glob("*/0001_*.json")).name
    assert f"losses vs saved run {saved} (--benchmark-compare-losses=auto)" in same.stdout
    assert f"{CELL}: losses identical (20 steps), weights digest identical\n" in same.stdout  # the same scripts: nothing added

    changed = sessions.changed
    assert changed.returncode == 1, changed.stdout[-3000:] + changed.stderr[-2000:]
    line = next((ln for ln in changed.stdout.splitlines() if ln.startswith(f"{CELL}: ")), "")
    assert "losses changed at step " in line and "weights digest changed" in line, changed.stdout[-3000:]
    assert "FAILED: same libtorch build" in line
    assert line.endswith("; ran different scripts than the saved run: py_scripts/optimizer.py")  # the planted copy, named
    assert "losses changed in 1 of 1 benchmarks: the session fails" in changed.stdout
    assert saved.removesuffix(".json") in changed.stdout  # beside pytest-benchmark's own timing comparison


def _section(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The loss comparison's lines (after its section header)."""
    lines = done.stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if "losses vs" in line)
    return [line for line in lines[start + 1:] if line and not line.startswith("=")]


def _saved(storage: Path) -> list[str]:
    return sorted(p.name[:4] for p in storage.glob("*/*.json"))


def test_no_loadable_saved_run_is_one_line_and_the_run_is_saved(sessions: Sessions) -> None:
    """Empty storage, a number that is not there, a truncated save: each was a 20-40 line INTERNALERROR (exit 3, nothing
    saved). Now one line each; the run is saved; the first run on empty storage passes, the others fail."""
    storage, first = sessions.storage, sessions.first
    assert first.returncode == 0 and "INTERNALERROR" not in first.stdout + first.stderr, first.stdout[-2000:] + first.stderr[-2000:]
    assert _section(first)[0] == f"losses not compared: no saved run in {storage} yet; this run is saved: compare with it next time"

    missing = sessions.missing
    assert missing.returncode != 0 and "INTERNALERROR" not in missing.stdout + missing.stderr
    assert _section(missing)[0].startswith(f"losses not compared: no saved run matches --benchmark-compare=0042 in {storage}")
    assert sessions.saved_after_missing == ["0001", "0002"]

    truncated = sessions.truncated
    assert truncated.returncode != 0 and "INTERNALERROR" not in truncated.stdout + truncated.stderr
    line = _section(truncated)[0]
    assert line.startswith("losses not compared: the saved runs 0001_") and "could not be read (truncated?)" in line


def test_zero_rounds_is_one_line_before_anything_runs() -> None:
    """``AMP_PARITY_BENCH_ROUNDS=0``: pytest's one ``ERROR:`` line naming the variable, and nothing timed."""
    env = {**os.environ, "AMP_PARITY_BENCH_ROUNDS": "0"}
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/benchmarks", "--benchmark-only", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode != 0 and "Traceback" not in done.stdout + done.stderr
    assert done.stderr.strip() == "ERROR: AMP_PARITY_BENCH_ROUNDS must be a whole number of timed rounds ≥ 1, got '0'"
