"""Benchmarks: every frontend × mode cell timed by pytest-benchmark, grouped by pair.

Skipped by the normal test run (``--benchmark-skip`` in the pytest options); run with
``tox -e bench`` or ``pytest tests/benchmarks --benchmark-only --benchmark-autosave``, then compare
runs with ``--benchmark-compare``. ``AMP_PARITY_BENCH_PRESET`` picks the preset (default tiny).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from harness.availability import Availability
from harness.matrix import Cell
from harness.runner import MatrixRunner
from harness.spec import WorkloadSpec
from tests.conftest import FRONTENDS, require_frontend

#: Rounds per cell: enough for a median and an interquartile range at tiny; lower it for recipe.
ROUNDS = int(os.environ.get("AMP_PARITY_BENCH_ROUNDS", "5"))


@pytest.fixture(scope="module")
def bench_runner(availability: Availability) -> Iterator[MatrixRunner]:
    """Workers for the benchmark preset, kept alive across every round of every cell."""
    spec = WorkloadSpec.from_preset(os.environ.get("AMP_PARITY_BENCH_PRESET", "tiny"))
    with MatrixRunner(spec, FRONTENDS, timeout=3600, availability=availability) as runner:
        yield runner


def test_cell_time(benchmark: BenchmarkFixture, cell: Cell, bench_runner: MatrixRunner, availability: Availability) -> None:
    """Time one cell's whole training run through its worker; record what ran in extra_info."""
    require_frontend(cell, availability)
    if bench_runner.declared_unsupported(cell):
        pytest.skip(f"{cell.frontend} does not support {cell.script} on {cell.device} (see test_parity)")
    bench_runner.worker(cell.frontend).start()  # start-up is not part of any round
    benchmark.group = cell.pair
    record = benchmark.pedantic(bench_runner.call_cell, args=(cell,), rounds=ROUNDS, warmup_rounds=1, iterations=1)
    spec = bench_runner.spec
    benchmark.extra_info.update({
        "frontend": cell.frontend, "script": cell.script, "mode": cell.mode, "device": cell.device,
        "preset": spec.preset, "amp_dtype": spec.amp_dtype, "threads": record["threads"],
        "torch_version": record["torch_version"], "libtorch_version": record["libtorch_version"],
        "language_version": record["language_version"], "final_loss": record["final_loss"],
        "seconds_in_script": record["seconds_total"], "spec_digest": spec.digest(),
    })
    assert len(record["losses"]) == spec.steps
