"""Benchmarks of the protocol itself: the harness agrees with torch.utils.benchmark.Timer, and the performance targets hold.

Skipped by the normal test run (they use the ``benchmark`` fixture); ``tox -e bench`` runs them. They
check the performance targets (docs/timing.md) on this machine, keep what they measured in ``extra_info``,
and print the clock agreement at the end of the session (``conftest.py``).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from pytest_benchmark.fixture import BenchmarkFixture
from torch.utils.benchmark import Timer

from harness.files.paths import REPO_ROOT
from harness.judge.divergence import read_cell_trace
from harness.judge.targets import CLOCK_AGREEMENT_MAX_SHARE, FOUR_MODES
from harness.model.record_points import records_only
from harness.model.timing import DEFAULT_ROUNDS, summarize
from harness.run.availability import Availability
from harness.run.cpu_features import cpu_has_bf16
from harness.run.prepare import prepare_run_spec
from harness.run.runner import MatrixRunner
from harness.store.result_file import load_result
from harness.workload.fixtures import ensure_fixtures
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec
from tests.benchmarks import settings

PRESET = settings.preset("bench")
#: What each clock-agreement benchmark measured, for the session's closing lines (tests/benchmarks/conftest.py).
CLOCK_AGREEMENTS: list[dict[str, Any]] = []
#: The performance targets a benchmark saw missed (within what it fails on), for the session's closing lines.
MISSED_TARGETS: list[str] = []
#: Each bench cell's spread and the noise floor measured beside it, for the session's closing lines.
FLOORS: list[str] = []


@pytest.mark.parametrize("mode", ["default", "autocast"])
def test_harness_agrees_with_torch_timer(benchmark: BenchmarkFixture, availability: Availability, mode: str, tmp_path: Path) -> None:
    """A Python cell's whole-workload time, by the harness's worker and by ``Timer`` in this process, agree.

    The two are measured alternately, round by round, so a drift of this shared machine's speed (5 %
    over a minute was seen here) falls on both alike instead of on whichever ran second. How far apart their
    medians are is a measured figure, stored in ``extra_info`` and printed at the end of the session; the test
    fails only beyond :data:`~harness.judge.targets.CLOCK_AGREEMENT_MAX_SHARE`, which noise cannot reach.
    """
    spec = WorkloadSpec.from_preset(PRESET)
    timed = settings.spread_modes(cpu_has_bf16())  # on a CPU without bfloat16 instructions, the float32 modes only
    if timed is not None and mode not in timed:
        pytest.skip(f"this CPU lacks bfloat16 instructions: {mode} is emulated (about 19x float32), the float32 case holds "
                    "the clock agreement here")
    cell = Cell("python", "with_autocast", mode, "sgd", spec.device)
    module = importlib.import_module("py_scripts.with_autocast")
    run_spec = prepare_run_spec(spec, "with_autocast", "sgd", save_weights=False, fixture=ensure_fixtures(spec))
    threads = torch.get_num_threads()
    timer = Timer("run_workload(spec, mode)", globals={"run_workload": module.run_workload, "spec": run_spec, "mode": mode})
    with MatrixRunner(spec, ("python",), availability=availability, staging=tmp_path) as runner:
        assert runner.run_cell(cell).ok  # the record call, as in the protocol

        def alternate() -> tuple[list[float], list[float]]:
            runner.pool.call_cell(cell, save_weights=False)
            timer.timeit(1)  # one untimed call each, as the protocol's second warm-up
            by_harness, by_hand = [], []
            for _ in range(DEFAULT_ROUNDS):
                by_harness.append(runner.pool.call_cell(cell, save_weights=False)["seconds_workload"])
                by_hand.append(timer.timeit(1).median)
            return by_harness, by_hand

        by_harness, by_hand = benchmark.pedantic(alternate, rounds=1, iterations=1)
    torch.set_num_threads(threads)
    harness, hand = summarize(by_harness), summarize(by_hand)
    gap = abs(harness.median - hand.median) / hand.median
    agreement = {"preset": PRESET, "mode": mode, "timer_median": hand.median, "harness_median": harness.median, "gap_share": gap,
                 "bound_share": CLOCK_AGREEMENT_MAX_SHARE, "timer_cv": hand.cv, "harness_cv": harness.cv}
    benchmark.extra_info.update({"timer": hand.to_json(), "harness": harness.to_json(), "clock_agreement": agreement})
    CLOCK_AGREEMENTS.append(agreement)
    assert gap <= CLOCK_AGREEMENT_MAX_SHARE, (
        f"Timer {hand.median:.4g} s vs harness {harness.median:.4g} s: {gap:.1%} apart, beyond the {CLOCK_AGREEMENT_MAX_SHARE:.0%} "
        "that noise can reach: one clock times something the other does not"
    )


def _run(benchmark: BenchmarkFixture, out: Path, *args: str,
         verbose: bool = True) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``python -m harness run ARGS --json OUT`` (``-v`` where ``verbose``), once, timed by the benchmark; its exit and its result."""

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness", "run", *args, "--json", str(out), *(["-v"] if verbose else [])],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=3600)

    done = benchmark.pedantic(run, rounds=1, iterations=1)
    assert out.is_file(), done.stderr[-2000:]
    result: dict[str, Any] = json.loads(out.read_text())
    benchmark.extra_info.update({"wall_seconds": result["wall_seconds"], "targets": result["targets"], "phases": result["phases"]})
    return done, result


def _missed(result: dict[str, Any], name: str | None = None, machine_noise: bool = True) -> list[str]:
    """Every target missed (of one name; without those missed only by the machine's noise unless ``machine_noise``), a line
    each, for the assertion's message and the session's closing lines."""
    return [f"{t['name']} ({t['subject']}){' [the machine’s noise]' if t.get('machine_noise') else ''}: {t['measured']}; "
            f"{t['why']}" for t in result["targets"]
            if not t["met"] and (name is None or t["name"] == name) and (machine_noise or not t.get("machine_noise"))]


#: Issue 47: what the main job may print to a log (stdout and stderr) where no cell needs a look: the verdict counts, the
#: grid with its feature and model rows folded, the targets and where the page is; ``-v`` shows everything.
MAIN_JOB_MAX_LINES = 60


def test_the_four_mode_tiny_matrix_runs_within_its_bound(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    """``run --preset tiny`` of the four modes, plain SGD, both frontends (start-up included) meets every target: the matrix
    within 2× its limit (the slowest worker's start plus one untraced run of every cell and of every reconciled run it
    needed, over the cores) among them; ``-v`` prints its phases."""
    done, result = _run(benchmark, tmp_path / "tiny.json", "--preset", "tiny", "--mode", ",".join(FOUR_MODES), "--optimizer", "sgd")
    assert done.returncode == 0, done.stderr[-2000:]
    assert {t["name"] for t in result["targets"]} >= {"whole tiny CPU matrix"}
    assert [line for line in done.stdout.splitlines() if line.startswith("phases: ")], done.stdout[-2000:]
    assert not _missed(result), "\n".join(_missed(result))


def test_the_whole_tiny_matrix_runs_within_its_bound(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    """``run --preset tiny``, every optimizer and mode (the main job, issues 38 and 47): within 2× the limit it states
    (:data:`~harness.judge.targets.TINY_MATRIX_LIMIT_FACTOR`), so its time grows with its cells and the reconciled runs they
    need; the run says how far it was from its limit (its ``matrix:`` line).

    Issue 47: without ``-v``, a run in which no cell needs a look prints at most :data:`MAIN_JOB_MAX_LINES` lines to a log;
    a reconciled run is traced only where its records part from its partner's (``extra_info`` counts them), and a cell is
    timed only where no untraced run of it gave its own time."""
    done, result = _run(benchmark, tmp_path / "whole.json", "--preset", "tiny", verbose=False)
    assert done.returncode == 0, done.stderr[-2000:]
    MISSED_TARGETS.extend(f"whole tiny: {line}" for line in _missed(result))
    lines = (done.stdout + done.stderr).splitlines()
    assert len(lines) <= MAIN_JOB_MAX_LINES, "\n".join(lines)
    cells = load_result(tmp_path / "whole.json").cells
    reconciled = [c.reconciled for c in cells if c.reconciled is not None]
    traced = [t for t in reconciled if not records_only(read_cell_trace(t))]
    # The limit stays honest: every cell's own run is an untraced one, a timed round or its untraced reconciled run (issue
    # 47: only the cells without the latter are timed), never a traced record call's wall time.
    assert all(c.timing is not None or c.untraced_seconds is not None for c in cells if c.ok)
    benchmark.extra_info.update({"lines": len(lines), "reconciled_runs": len(reconciled), "reconciled_traced": len(traced),
                                 "timed": sum(c.timing is not None for c in cells),
                                 "own_time_from_reconciled_run": sum(c.timing is None and c.untraced_seconds is not None for c in cells)})
    assert [line for line in done.stdout.splitlines() if line.startswith("matrix: ") and "its limit here" in line], done.stdout[-2000:]
    assert not _missed(result, "whole tiny CPU matrix"), "\n".join(_missed(result))


#: The ``bench`` spread runs take the preset's two epochs. One epoch (tried for issue 47's 10 minutes) made the rounds
#: 0.08-0.2 s, and both spread tests then missed the 3 % bound on 3-6 cells each (CVs 3.8-7.2 % idle, the floor about 1 %):
#: a round that short is not what the target assumes, so the whole run (6.5 min) failed. The rounds were made cheaper
#: instead where the cell's own time is not what is measured: each floor round runs half the cell's loop
#: (:data:`harness.run.measure.FLOOR_SHARE_OF_LOOP`), the floors' CVs the same (the machine's slowing is a share of a round).
SPREAD_EPOCHS = 2


@pytest.mark.parametrize("protocol", ["back to back", "interleaved"])
def test_every_bench_cell_is_as_quiet_as_the_machine(benchmark: BenchmarkFixture, tmp_path: Path, protocol: str) -> None:
    """At ``bench`` (its two epochs: :data:`SPREAD_EPOCHS`), both frontends, in the default protocol and interleaved: every cell's
    spread within max(3 %, 2 × the noise floor measured beside it) or missed only by the machine's noise (no larger than
    the run's noisiest floor), the overhead per call and the trace cost within theirs, and the run exits 0.

    The floor is each cell's own (a matmul loop half its length in its own worker, after each of its rounds), so a busy
    machine raises the bound with the noise it causes; what it cannot explain is the harness's (or the binding's) own.
    Misses the floor pins on the machine are listed at the end of the session, marked, never hidden.
    """
    modes = settings.spread_modes(cpu_has_bf16())  # on a CPU without bfloat16 instructions, the float32 cells only
    args = ["--preset", "bench", "--epochs", str(SPREAD_EPOCHS), *(["--interleave"] if protocol == "interleaved" else []),
            *(["--mode", ",".join(modes)] if modes is not None else [])]
    done, result = _run(benchmark, tmp_path / "bench.json", *args)
    benchmark.extra_info["modes"] = list(modes) if modes is not None else "all"
    floors = {c["id"]: {"cv": c["timing"]["loop"]["cv"], "floor": (c["timing"].get("floor") or {}).get("cv")}
              for c in result["cells"] if c.get("timing")}
    benchmark.extra_info["floors"] = floors
    FLOORS.extend(f"bench {protocol}: {cell}: CV {_share(f['cv'])}, floor {_share(f['floor'])}" for cell, f in floors.items())
    MISSED_TARGETS.extend(f"bench {protocol}: {line}" for line in _missed(result))
    assert all(f["floor"] is not None for f in floors.values()), floors  # every bench cell has its floor measured
    for name in ("round-to-round spread", "overhead per call", "trace cost"):
        assert not _missed(result, name, machine_noise=False), "\n".join(_missed(result, name))
    assert {t["name"] for t in result["targets"]} >= {"round-to-round spread", "overhead per call"}
    # The run exits 1 for a missed target only through a failing cell or pair; neither may happen here.
    assert done.returncode == 0, done.stderr[-2000:]


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.2%}"
