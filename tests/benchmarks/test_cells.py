"""Benchmarks: every frontend × mode cell timed by pytest-benchmark, grouped by pair, under the harness's protocol.

Plain SGD unless ``AMP_PARITY_BENCH_OPTIMIZERS`` names others (``--optimizer``'s syntax: ``adam,rmsprop`` or ``all``): the
recipe's optimizer, what ``bench`` and ``recipe`` time by default (harness/workload/optimizers.py).

Skipped by the normal test run (``--benchmark-skip`` in the pytest options); run with
``tox -e bench`` or ``pytest tests/benchmarks --benchmark-only --benchmark-autosave``, then compare
runs with ``--benchmark-compare``. ``AMP_PARITY_BENCH_PRESET`` picks the preset (default tiny; ``bench``
runs about a second per CPU cell, the preset for comparisons).

A round is one call through the cell's long-lived worker without writing weights, exactly a timed
round of ``python -m harness run`` (:mod:`harness.model.timing`): GC off in the Python loop, the spec's
threads in both frontends. Each round's own loop and workload times are kept too, so ``extra_info`` holds
the frontend's loop median, ``overhead_seconds`` = pytest-benchmark's median − the workload median (the
harness's bridge: pipe, serialization, rpy2) and ``setup_seconds`` = workload − loop medians (the script's
own set-up, the frontend's cost, not the harness's). It also keeps the record call's per-step ``losses``,
``loss_scale`` history (None outside the scaler modes) and ``weights_digest``, which ``--benchmark-compare``
compares with the saved run's (``--benchmark-compare-losses``, ``conftest.py``), and where they came from: the
harness's version, the checkout's commit and every script's digest (``scripts``: the comparison names those that differ).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from harness.contract.modes import all_mode_names
from harness.judge.weight_findings import weights_digest
from harness.model.efficiency import workload_flops
from harness.model.timing import DEFAULT_WARMUP_ROUNDS
from harness.run.availability import probe_host
from harness.run.provenance import describe_provenance
from harness.run.runner import MatrixRunner
from harness.workload.matrix import Cell, cells_for
from harness.workload.spec import WorkloadSpec
from tests.benchmarks import settings
from tests.support import require_r_torch

#: Rounds per cell (the harness's default); lower it with AMP_PARITY_BENCH_ROUNDS for recipe on a CPU (checked when pytest
#: is configured: tests/benchmarks/settings.py).
ROUNDS = settings.rounds()
#: The installations timed: ``AMP_PARITY_BENCH_FRONTENDS`` in ``--frontend``'s syntax (``python,py28=python:~/venv/bin/python,r``),
#: by default this harness's own python and r. A bad value fails collection with run's one-line message.
INSTALLATIONS = settings.frontends()
BENCH_CELLS = cells_for(tuple(i.name for i in INSTALLATIONS), all_mode_names(), settings.optimizers(), "cpu")
#: Where this session's runs come from (the scripts as they are when the session starts).
PROVENANCE = describe_provenance()


@pytest.fixture(scope="module")
def bench_runner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MatrixRunner]:
    """Workers for the benchmark preset, kept alive across every round of every cell (their weights in a folder of the session's).

    Only the installations whose cells this session times (after ``-k``), and the host's probe only, as ``run`` does: the
    R worker answers R's questions when it starts, and an R cell asks the session's full probe first
    (:func:`test_cell_time`). So a session of Python cells alone (the benchmark-loss tests' five) starts neither an
    Rscript nor an R worker: 4.5 s of each."""
    timed = {item.callspec.params["bench_cell"].frontend for item in request.session.items
             if isinstance(item, pytest.Function) and hasattr(item, "callspec") and "bench_cell" in item.callspec.params}
    spec = WorkloadSpec.from_preset(settings.preset("tiny"))
    installations = tuple(i for i in INSTALLATIONS if i.name in timed)  # a cell of this module runs: one at least
    with MatrixRunner(spec, installations, timeout=3600, availability=probe_host(),
                      staging=tmp_path_factory.mktemp("weights")) as runner:
        yield runner


@pytest.mark.parametrize("bench_cell", BENCH_CELLS, ids=[c.id for c in BENCH_CELLS])
def test_cell_time(benchmark: BenchmarkFixture, bench_cell: Cell, bench_runner: MatrixRunner, request: pytest.FixtureRequest) -> None:
    """Time one cell's training run through its worker; keep the loop times and the overhead in extra_info."""
    cell = bench_cell
    if bench_runner.pool.language(cell.frontend) == "r":
        require_r_torch(request.getfixturevalue("availability"))  # the session's probe of R, only where an R cell runs
    if not bench_runner.pool.expected_to_run(cell):  # R's scaler on CPU runs, with its CUDA-only check lifted
        pytest.skip(f"{cell.frontend} does not support {cell.script} on {cell.device} (see test_parity)")
    bench_runner.pool.worker(cell.frontend).start()  # start-up is not part of any round
    facts = bench_runner.describe_installations().get(cell.frontend, {})
    first = bench_runner.pool.call_cell(cell)  # the record call: writes the weights, loads the fixtures
    records: list[dict[str, Any]] = []

    def one_round() -> dict[str, Any]:
        record = bench_runner.pool.call_cell(cell, save_weights=False)
        records.append(record)
        return record

    benchmark.group = cell.pair
    benchmark.pedantic(one_round, rounds=ROUNDS, warmup_rounds=DEFAULT_WARMUP_ROUNDS - 1, iterations=1)
    timed = records[DEFAULT_WARMUP_ROUNDS - 1:]
    loop = float(np.median([r["seconds_total"] for r in timed]))
    workload = float(np.median([r["seconds_workload"] for r in timed]))
    median = float(benchmark.stats.stats.median)
    spec = bench_runner.spec
    benchmark.extra_info.update({
        "frontend": cell.frontend, "script": cell.script, "mode": cell.mode, "optimizer": cell.optimizer, "device": cell.device,
        "preset": spec.preset, "amp_dtype": spec.amp_dtype, "threads": first["threads"],
        "torch_version": first["torch_version"], "libtorch_version": first["libtorch_version"],
        "language_version": first["language_version"], "final_loss": first["final_loss"], "spec_digest": spec.digest(),
        "loop_seconds_median": loop, "workload_seconds_median": workload, "clock": first["clock"],
        "overhead_seconds": median - workload, "overhead_share": (median - workload) / median, "setup_seconds": workload - loop,
        "tflops": workload_flops(spec) / loop / 1e12,
        # what --benchmark-compare-losses compares with a saved run (tests/benchmarks/loss_compare.py)
        "losses": first["losses"], "weights_digest": weights_digest(first["weights_path"]), "loss_scale": first["loss_scale"],
        # the loaded libtorch_cpu.so's build ID (harness/worker_side/installation_facts.py): "same build" means the same kernels
        "libtorch_build": facts.get("libtorch_build"),
        # where the run came from (harness/model/provenance.py): the comparison names the scripts that differ from the saved run's
        "harness_version": PROVENANCE.harness_version, "commit": PROVENANCE.commit, "dirty": PROVENANCE.dirty,
        "scripts": dict(PROVENANCE.files),
    })
    assert len(timed) == ROUNDS and all(r["losses"] == first["losses"] for r in timed)
