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
from harness.judge.targets import CLOCK_AGREEMENT_MAX_SHARE, CV_FAIL, CV_MIN_LOOP_SECONDS
from harness.model.timing import DEFAULT_ROUNDS, summarize
from harness.run.availability import Availability
from harness.run.prepare import prepare_run_spec
from harness.run.runner import MatrixRunner
from harness.workload.fixtures import ensure_fixtures
from harness.workload.matrix import Cell
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import WorkloadSpec
from tests.benchmarks import settings

PRESET = settings.preset("bench")
#: What each clock-agreement benchmark measured, for the session's closing lines (tests/benchmarks/conftest.py).
CLOCK_AGREEMENTS: list[dict[str, Any]] = []
#: The performance targets a benchmark saw missed (within what it fails on), for the session's closing lines.
MISSED_TARGETS: list[str] = []


@pytest.mark.parametrize("mode", ["default", "autocast"])
def test_harness_agrees_with_torch_timer(benchmark: BenchmarkFixture, availability: Availability, mode: str, tmp_path: Path) -> None:
    """A Python cell's whole-workload time, by the harness's worker and by ``Timer`` in this process, agree.

    The two are measured alternately, round by round, so a drift of this shared machine's speed (5 %
    over a minute was seen here) falls on both alike instead of on whichever ran second. How far apart their
    medians are is a measured figure, stored in ``extra_info`` and printed at the end of the session; the test
    fails only beyond :data:`~harness.judge.targets.CLOCK_AGREEMENT_MAX_SHARE`, which noise cannot reach.
    """
    spec = WorkloadSpec.from_preset(PRESET)
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


#: Every row but sgd: their cells fail their own check until their float64 updates are merged (their reference is NaN).
_WITHOUT_REFERENCE = [name for name in OPTIMIZERS if name != "sgd"]


@pytest.mark.xfail(strict=True, reason=f"float64 reference for {', '.join(_WITHOUT_REFERENCE)} not yet merged: their cells fail their "
                                       "own check, so the whole tiny matrix exits 1")
def test_tiny_matrix_and_its_targets(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    """``python -m harness run --preset tiny`` (both frontends, every mode, every optimizer: tiny's own selection, start-up
    included) meets every target that applies."""
    out = tmp_path / "tiny.json"

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness", "run", "--preset", "tiny", "--json", str(out)],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)

    done = benchmark.pedantic(run, rounds=1, iterations=1)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(out.read_text())
    targets = result["targets"]
    benchmark.extra_info.update({"wall_seconds": result["wall_seconds"], "targets": targets})
    missed = [f"{t['name']} ({t['subject']}): {t['measured']}; {t['why']}" for t in targets if not t["met"]]
    assert any(t["name"] == "whole tiny CPU matrix" for t in targets)
    assert not missed, "\n".join(missed)


def test_bench_preset_overhead_and_spread(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    """At ``bench``, interleaved: the overhead target holds for every cell; the spread of cells of ≥ 0.5 s stays within
    :data:`~harness.judge.targets.CV_FAIL` (noise on an idle machine does not reach it; a miss of the 3 % target below
    that is reported, by how much and why, and printed at the end of the session).

    Shorter cells (bf16 runs 3x faster than fp32 on an AVX512-BF16 CPU, 0.2 s) are checked too; every target that
    is missed must say by how much and why (kept in extra_info), which the report prints.
    """
    out = tmp_path / "bench.json"

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness", "run", "--preset", "bench", "--interleave", "--json", str(out)],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=3600)

    done = benchmark.pedantic(run, rounds=1, iterations=1)
    result = json.loads(out.read_text())
    benchmark.extra_info["targets"] = result["targets"]
    missed = [t for t in result["targets"] if not t["met"]]
    MISSED_TARGETS.extend(f"bench: {t['name']} ({t['subject']}): {t['measured']}; {t['why']}" for t in missed)
    assert all(t["why"].startswith("missed by ") for t in missed)
    loops = {c["id"]: c["timing"]["loop"] for c in result["cells"] if c.get("timing")}
    overhead = [t for t in result["targets"] if t["name"] == "overhead per call"]
    assert overhead and all(t["met"] for t in overhead), [t["why"] for t in overhead if not t["met"]]
    spread = {cell: loop["cv"] for cell, loop in loops.items() if loop["median"] >= CV_MIN_LOOP_SECONDS}
    assert spread and all(cv is not None and cv <= CV_FAIL for cv in spread.values()), (
        f"spread beyond {CV_FAIL:.0%}, which an idle machine's noise does not reach: "
        + ", ".join(f"{cell} CV {cv}" for cell, cv in spread.items() if cv is None or cv > CV_FAIL)
    )
    # The run exits 1 for a missed target only through a failing cell or pair; neither may happen here.
    assert done.returncode == 0, done.stderr[-2000:]
