"""Workers kept across runners (harness/run/kept_workers.py): a borrowed pair runs each copy of the scripts it is lent to.

A kept worker that kept running the scripts it started on would make every planted test that borrows it pass or fail on
the wrong scripts: each plant below must diverge in the run that plants it, and the unchanged scripts must come back
bitwise the same afterwards, all from the two workers started first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.files.paths import SCRIPTS_ENV
from harness.model.result import MatrixResult, Status
from harness.run.availability import Availability
from harness.run.frontends import FRONTENDS
from harness.run.kept_workers import KeptWorkers
from harness.run.pool import worker_env
from harness.run.runner import MatrixRunner
from harness.workload.spec import WorkloadSpec
from tests.planting import copy_scripts, plant
from tests.support import require_r_torch

#: One plant in each place a worker loads scripts from: R's shared files (the bridge sources them), an R script (sourced
#: by path on its first call), Python's shared module and a Python script's own module.
PLANTS = {
    "r-shared": ("r_scripts/optimizer.R", "do.call(constructor, c(list(params), r$args))",
                 "do.call(constructor, c(list(params), modifyList(r$args, list(lr = r$args$lr * (1 + 1e-6)))))"),
    "r-script": ("r_scripts/models/mlp.R", "torch::nn_relu()", "torch::nn_leaky_relu()"),
    "python-shared": ("py_scripts/optimizer.py", 'python["class"])(params, **args)',
                      'python["class"])(params, **(args | {"lr": args["lr"] * (1 + 1e-6)}))'),
    "python-script": ("py_scripts/models/mlp.py", "nn.ReLU()", "nn.LeakyReLU()"),
}


def _run(kept: KeptWorkers, root: Path | None, staging: Path, availability: Availability, monkeypatch: pytest.MonkeyPatch) -> MatrixResult:
    """``autocast`` with plain SGD, both languages, from the scripts under ``root`` (the checkout's: ``None``)."""
    if root is None:
        monkeypatch.delenv(SCRIPTS_ENV, raising=False)
    else:
        monkeypatch.setenv(SCRIPTS_ENV, str(root))
    staging.mkdir(parents=True)
    with MatrixRunner(WorkloadSpec.from_preset("tiny"), ("python", "r"), timeout=300, availability=availability, staging=staging,
                      kept=kept) as runner:
        return runner.run(("autocast",), ("sgd",), measure=False)


def test_a_kept_pair_runs_each_copy_it_is_lent_and_the_checkout_again_after(
    tmp_path: Path, availability: Availability, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers for six runners: each plant diverges where it is planted, the checkout's scripts stay identical before and
    after, with the same losses, bitwise."""
    require_r_torch(availability)
    with KeptWorkers() as kept:
        before = _run(kept, None, tmp_path / "before", availability, monkeypatch)
        for name, (relative, old, new) in PLANTS.items():
            root = copy_scripts(tmp_path / name)
            plant(root, relative, old, new)
            planted = _run(kept, root, tmp_path / name / "staging", availability, monkeypatch)
            assert [p.verdict for p in planted.pairs] == ["diverged"], (name, [p.explain() for p in planted.pairs])
        after = _run(kept, None, tmp_path / "after", availability, monkeypatch)
        assert kept.started == 2 and kept.lent == 12
    for result in (before, after):
        assert [p.verdict for p in result.pairs] == ["identical"], [p.explain() for p in result.pairs]
    assert [c.record.losses for c in after.cells if c.record] == [c.record.losses for c in before.cells if c.record]
    assert all(c.status is Status.OK for c in after.cells)


def test_a_worker_is_lent_only_to_a_run_of_its_environment_and_only_while_it_lives(tmp_path: Path) -> None:
    """Another variable in the environment gets another worker; the first comes back to a run like its own; a worker that
    died is not kept."""
    python = FRONTENDS["python"]
    with KeptWorkers() as kept:
        first = kept.take(python, {"AMP_PARITY_TEST_KIND": "a"}, 120, tmp_path)
        first.start()
        kept.give_back(first)
        other = kept.take(python, {"AMP_PARITY_TEST_KIND": "b"}, 120, tmp_path)
        assert other is not first and not other.alive
        again = kept.take(python, {"AMP_PARITY_TEST_KIND": "a", "PYTEST_CURRENT_TEST": "another test"}, 120, tmp_path)
        assert again is first and again.alive  # the test's name is no worker's business (each test had a pair of its own)
        again.close()  # died (or was stopped) while lent
        kept.give_back(again)
        assert kept.take(python, {"AMP_PARITY_TEST_KIND": "a"}, 120, tmp_path) is not first
        assert kept.started == 3 and kept.lent == 4


def test_the_oldest_idle_worker_is_stopped_past_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kinds no run asks for again do not pile up: past :data:`MAX_IDLE` the oldest idle worker is stopped."""
    monkeypatch.setattr("harness.run.kept_workers.MAX_IDLE", 1)
    python = FRONTENDS["python"]
    with KeptWorkers() as kept:
        older, newer = (kept.take(python, {"AMP_PARITY_TEST_KIND": kind}, 120, tmp_path) for kind in ("a", "b"))
        for worker in (older, newer):
            worker.start()
        kept.give_back(older)
        kept.give_back(newer)
        assert not older.alive and newer.alive
        again = kept.take(python, {"AMP_PARITY_TEST_KIND": "b"}, 120, tmp_path)
        kept.give_back(again)  # stopped with the keeper
        assert again is newer


def test_a_pool_that_stops_a_borrowed_worker_gives_it_back(tmp_path: Path, availability: Availability) -> None:
    """A runner stops a frontend the probe says cannot run here (``WorkerPool.stop``): a borrowed worker goes back to its
    keeper, which lends it again, rather than being stopped while the keeper still counts it lent."""
    spec = WorkloadSpec.from_preset("tiny")
    with KeptWorkers() as kept:
        with MatrixRunner(spec, ("python",), timeout=120, availability=availability, staging=tmp_path, kept=kept) as runner:
            borrowed = runner.pool.worker("python")
            borrowed.start()
            runner.pool.stop("python")
        again = kept.take(FRONTENDS["python"], worker_env(spec.threads), 120, tmp_path)
        assert again is borrowed and again.alive and kept.started == 1
        kept.give_back(again)
