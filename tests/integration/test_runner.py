"""The matrix runner: statuses and reasons for every way a cell can end, and the whole result's shape."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import harness
from harness.contract.modes import all_mode_names
from harness.judge.record_check import describe_loss
from harness.model.efficiency import workload_flops
from harness.model.result import RESULT_SCHEMA_VERSION, Status
from harness.model.timing import TimingProtocol
from harness.run.availability import Availability
from harness.run.measure import time_cells
from harness.run.pool import worker_env
from harness.run.runner import MatrixRunner
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec
from tests.support import kept_workers, require_r_torch

NO_R_TORCH = {"torch_installed": False, "libtorch_installed": False, "libtorch_loads": False}


def _without_r_torch(availability: Availability) -> Availability:
    return dataclasses.replace(availability, r=NO_R_TORCH)


def test_python_only_result_has_every_cell_and_field(tiny_spec: WorkloadSpec, availability: Availability, tmp_path: Path) -> None:
    """A Python-only run of every mode with plain SGD returns 7 ok cells with records, reference distances, timing,
    efficiency and memory."""
    progress: list[str] = []
    protocol = TimingProtocol(warmup_rounds=2, rounds=3, interleave=True)
    with MatrixRunner(tiny_spec, ("python",), availability=availability, staging=tmp_path) as runner:
        result = runner.run(all_mode_names(), ("sgd",), on_progress=progress.append, protocol=protocol)
        pid = runner.pool.worker_pid("python")
        assert pid is not None
        environ = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in item)
    # the worker ran with the spec's threads and glibc's malloc thresholds fixed (harness.run.pool.worker_env)
    assert {k: environ.get(k) for k in worker_env(tiny_spec.threads)} == worker_env(tiny_spec.threads)
    ids = [
        "with_autocast-default-sgd-python-cpu", "with_autocast-autocast-sgd-python-cpu", "with_autocast-lowp_weights-sgd-python-cpu",
        "with_autocast-lowp_weights_scaled-sgd-python-cpu", "cuda_amp_grad_scaler-default-sgd-python-cpu",
        "cuda_amp_grad_scaler-autocast_scaler-sgd-python-cpu", "cuda_amp_grad_scaler-autocast_scaler_clip-sgd-python-cpu",
    ]
    assert [c.id for c in result.cells] == ids
    assert all(c.status is Status.OK for c in result.cells)
    assert result.to_json()["schema_version"] == RESULT_SCHEMA_VERSION == 10 and result.spec == tiny_spec
    assert result.provenance.source == "checkout" and result.provenance.harness_version == harness.__version__
    assert "r_scripts/loop.R" in result.provenance.files and "harness/judge/known_differences.toml" in result.provenance.files
    assert all(c.weights is not None and set(c.weights.tensors) == {f"layer{k}.{p}" for k in range(3) for p in ("weight", "bias")}
               for c in result.cells)  # kept while the files were there
    assert result.protocol == protocol
    plain = result.reference.losses_for("sgd", False)
    assert result.reference.available and plain is not None and len(plain) == 20
    assert sorted((t["optimizer"], t["clip"], tuple(t["skipped_steps"])) for t in result.reference.trajectories) == [
        ("sgd", False, ()), ("sgd", False, (9,)), ("sgd", True, ()), ("sgd", True, (9,))]  # the optimizers that ran, plain
    # and clipped, and each replayed over the step the scaler cells skipped (the preset's overflow, at step 9)
    assert result.reference_seconds > 0 and result.workers["python"]["startup_seconds"] > 0
    # Interleaved: round k of every cell before round k+1 of any (A, B, A, B ...).
    rounds = [line for line in progress if ": round " in line]
    assert rounds == [f"{i}: round {k}/3" for k in (1, 2, 3) for i in ids]
    default, autocast, scaler_default, scaler = result.cells[0], result.cells[1], result.cells[4], result.cells[5]
    assert default.timing is not None and autocast.timing is not None
    assert default.timing.rounds == 3 and default.timing.warmup_calls == 2 and default.timing.reproducible
    assert default.timing.loop.median > 0 and default.timing.call.median > default.timing.loop.median
    # each round's load, read from /proc around it: other processes' CPU seconds and the worker's page faults
    samples = default.timing.samples
    assert len(samples.other_cpu_seconds) == len(samples.page_faults) == 3
    assert all(o is not None and o >= 0 for o in samples.other_cpu_seconds) and all(f is not None and f >= 0 for f in samples.page_faults)
    assert default.time_vs_default == 1.0  # paired with itself: every per-round ratio is exactly 1
    assert scaler_default.time_vs_default == 1.0  # the scaler script's own default, its cells' baseline
    # divided by its own script's default: a ratio, or a spread too wide for one, never "no default cell"
    assert scaler.time_vs_default is not None or str(scaler.time_vs_default_note).startswith("spread too wide")
    assert autocast.time_vs_default is not None or str(autocast.time_vs_default_note).startswith("spread too wide")
    assert default.reference_distance is not None and default.reference_distance.max_rel_loss_error is not None
    assert default.reference_distance.max_rel_loss_error < 1e-5
    assert default.memory is not None and default.memory.scope == "call" and (default.memory.peak_rss_bytes or 0) > 50 * 2**20
    assert default.memory.cuda_peak_bytes is None
    assert default.efficiency is not None and autocast.efficiency is not None and autocast.efficiency.share_of_peak is not None
    assert default.efficiency.flops == workload_flops(tiny_spec) and default.efficiency.gemm_dtype == "float32"
    assert autocast.efficiency.gemm_dtype == "bfloat16" and 0 < autocast.efficiency.share_of_peak < 1
    assert set(result.peaks.by_dtype) == {"float32", "bfloat16"} and result.peaks.threads == 1
    assert all(c.gemm_profile is None for c in result.cells)  # CPU: only with --profile
    # every mode: the whole-matrix bound holds any tiny matrix
    assert {f.name for f in result.targets} == {"overhead per call", "whole tiny CPU matrix", "trace cost"}
    assert [p.pair for p in result.pairs] == []  # one frontend: nothing to pair


def test_budget_limits_rounds_and_profile_flags_nothing_on_true_amp(
    tiny_spec: WorkloadSpec, availability: Availability, tmp_path: Path
) -> None:
    """With a tiny time budget each cell gets one timed round and no extra warm-up, so no ratio; profiling finds bf16 GEMMs."""
    protocol = TimingProtocol(warmup_rounds=3, rounds=5, max_seconds=1e-9)
    with MatrixRunner(tiny_spec, ("python",), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("default", "autocast"), ("sgd",), protocol=protocol, profile=True)
    default, autocast, scaler_default = result.cells
    assert scaler_default.script == "cuda_amp_grad_scaler" and scaler_default.gemm_profile is not None
    assert scaler_default.gemm_profile["half_share"] == 0.0  # a disabled autocast: float32 GEMMs
    assert default.timing is not None and default.timing.rounds == 1 and default.timing.warmup_calls == 1
    assert autocast.time_vs_default is None and "too few timed rounds (1 < 3)" in str(autocast.time_vs_default_note)
    assert default.gemm_profile is not None and default.gemm_profile["half_share"] == 0.0 and default.gemm_problem is None
    assert autocast.gemm_profile is not None and autocast.gemm_profile["half_share"] == 1.0 and autocast.gemm_problem is None
    assert not result.warnings


def test_a_failing_timed_round_makes_the_cell_an_error(tiny_spec: WorkloadSpec, availability: Availability, tmp_path: Path) -> None:
    """A script that works for the record call but breaks in a timed round ends as an error naming the round."""
    fixture_path = tmp_path / "fixture.safetensors"
    with MatrixRunner(tiny_spec, ("python",), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        cell = runner.run_cell(Cell("python", "with_autocast", "default", "sgd", "cpu"))
        assert cell.status is Status.OK
        fixture_path.write_bytes(b"not a safetensors file")
        runner.pool.fixture = dataclasses.replace(runner.pool.fixture, path=fixture_path)
        [cell] = time_cells(runner.pool, [cell], TimingProtocol(warmup_rounds=1, rounds=2), lambda text: None)
    assert cell.status is Status.ERROR and str(cell.reason).startswith("timed round 1 failed:") and cell.timing is None


def test_r_cells_skip_with_the_install_reason(
    tiny_spec: WorkloadSpec, availability: Availability, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without R torch an R cell is ``skipped`` with the install command as its one-line reason."""
    monkeypatch.delenv("AMP_PARITY_REQUIRE_R", raising=False)
    with MatrixRunner(tiny_spec, ("r",), availability=_without_r_torch(availability), staging=tmp_path) as runner:
        outcome = runner.run_cell(Cell("r", "with_autocast", "default", "sgd", "cpu"))
    assert outcome.status is Status.SKIPPED and outcome.record is None
    assert outcome.reason == 'the R package torch is not installed: in R, install.packages("torch"); torch::install_torch()'


def test_a_run_learns_r_from_its_r_worker_and_records_its_phases(
    tiny_spec: WorkloadSpec, availability: Availability, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With no availability given, R is not probed by an Rscript of its own: the R worker's first answer completes the probe
    (the same facts), both workers start side by side, and the result says where its time went, phase by phase."""
    require_r_torch(availability)
    import harness.run.runner as runner_module

    def no_second_r() -> Availability:
        raise AssertionError("the R worker started, so R must not be probed again")

    monkeypatch.setattr(runner_module, "probe", no_second_r)
    with MatrixRunner(tiny_spec, ("python", "r"), staging=tmp_path) as runner:
        assert not runner.availability.r_probed
        result = runner.run(("default", "autocast"), ("sgd",), protocol=TimingProtocol(1, 1))
    assert runner.availability.r_probed and runner.availability.r_reason is None
    assert result.environment["r"]["libtorch_loads"] is True and result.environment["r"]["torch_version"] == availability.r["torch_version"]
    assert all(c.status is Status.OK for c in result.cells) and all("r_probe" not in (c.installation or {}) for c in result.cells)
    assert all(result.workers[name]["ready_seconds"] > 0 for name in ("python", "r"))
    names = [name for name, _ in result.phases.seconds]
    assert names == ["fixtures", "provenance", "worker starts", "record calls", "reconciled runs", "reference", "timed rounds", "peaks",
                     "judging", "trace measurements"]
    assert result.phases.total == pytest.approx(result.wall_seconds, rel=0.05)
    limit, start, rounds = result.limit()
    assert start == max(result.workers[name]["ready_seconds"] for name in ("python", "r")) and limit == start + rounds


def test_an_r_worker_that_cannot_start_is_probed_for_its_reason(
    tiny_spec: WorkloadSpec, availability: Availability, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where the R worker cannot start, R is probed as before, so its cells are skipped in the probe's words (R torch not
    installed), not the worker's; the Python cells run."""
    import harness.run.runner as runner_module

    monkeypatch.delenv("AMP_PARITY_REQUIRE_R", raising=False)
    monkeypatch.setenv("R_HOME", str(tmp_path / "no-R-here"))  # the R worker's rpy2 cannot start R
    probed: list[bool] = []

    def probe_finds_no_r_torch() -> Availability:
        probed.append(True)
        return _without_r_torch(availability)

    monkeypatch.setattr(runner_module, "probe", probe_finds_no_r_torch)
    host = dataclasses.replace(availability, r={}, r_probed=False)
    with MatrixRunner(tiny_spec, ("python", "r"), availability=host, staging=tmp_path / "staging") as runner:
        result = runner.run(("default",), ("sgd",), protocol=TimingProtocol(1, 1))
    assert probed == [True] and len(result.cells) == 4
    assert all(c.status is Status.OK for c in result.cells if c.frontend == "python")
    assert all(c.status is Status.SKIPPED and c.reason == 'the R package torch is not installed: in R, install.packages("torch"); '
               "torch::install_torch()" for c in result.cells if c.frontend == "r")
    assert "r" not in result.workers or not result.workers["r"].get("ready_seconds")


def test_a_worker_that_cannot_start_fails_its_frontends_cells_at_once_with_its_reason(
    tiny_spec: WorkloadSpec, availability: Availability, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 47: a worker whose interpreter cannot import a module (here a blake3 on PYTHONPATH that raises at import) was
    started again for each of its frontend's cells (340 × 1.5 s to say the same thing). After two starts fail with one
    error (its describe, its first cell) it is not started again: every cell ends in that error at once, the cells are one
    reason, and the result says why its cells did not run."""
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "blake3.py").write_text('raise ModuleNotFoundError("No module named \'blake3\' (planted)")\n', encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(planted))  # the workers' path: the harness first, then this folder
    modes, optimizers = ("default", "autocast"), ("sgd", "adam", "rprop")
    with MatrixRunner(tiny_spec, ("python",), availability=availability, staging=tmp_path / "staging") as runner:
        result = runner.run(modes, optimizers, protocol=TimingProtocol(1, 1))
        starts = runner.pool.worker("python").starts
    assert len(result.cells) == 3 * len(optimizers)  # "default" is a mode of both script pairs
    assert {c.status for c in result.cells} == {Status.ERROR}
    reasons = {c.reason for c in result.cells}
    assert len(reasons) == 1 and "ModuleNotFoundError: No module named 'blake3' (planted)" in str(next(iter(reasons))), reasons
    assert starts == 2, "started for its describe and its first cell only"
    assert any(w.startswith("python: its worker could not start, twice with the same error") for w in result.warnings), result.warnings


def test_a_worker_whose_start_fails_once_is_started_again(tmp_path: Path) -> None:
    """One failed start is not enough to give up (a start may time out once on a loaded machine): the next call starts it."""
    from harness.errors import WorkerCannotStart, WorkerError
    from harness.run.worker import Worker

    flag = tmp_path / "fail-once"
    flag.write_text("", encoding="utf-8")
    worker = Worker("flaky", "tests.worker_handlers:FailOnceStartHandler", env={"AMP_PARITY_TEST_FAIL_ONCE": str(flag)})
    try:
        with pytest.raises(WorkerError, match="could not start") as first:
            worker.start()
        assert not isinstance(first.value, WorkerCannotStart)
        assert worker.call({"value": 1}, timeout=30)["echo"] == 1 and worker.starts == 2 and worker.cannot_start is None
    finally:
        worker.close()


def test_require_r_turns_the_skip_into_an_error(
    tiny_spec: WorkloadSpec, availability: Availability, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Under AMP_PARITY_REQUIRE_R=1 a missing R torch makes R cells fail, with the reason."""
    monkeypatch.setenv("AMP_PARITY_REQUIRE_R", "1")
    with MatrixRunner(tiny_spec, ("r",), availability=_without_r_torch(availability), staging=tmp_path) as runner:
        outcome = runner.run_cell(Cell("r", "with_autocast", "default", "sgd", "cpu"))
    assert outcome.status is Status.ERROR and "AMP_PARITY_REQUIRE_R=1" in str(outcome.reason)


@pytest.mark.parametrize("frontend", ["python", "r"])
def test_nan_loss_in_default_mode_is_a_numerical_failure_with_its_step(availability: Availability, frontend: str, tmp_path: Path) -> None:
    """A learning rate that blows up gives ``numerical_failure`` naming the first non-finite loss as such, its step and frontend."""
    if frontend == "r":
        require_r_torch(availability)
    spec = WorkloadSpec.from_preset("tiny", lr=1e6)
    with MatrixRunner(spec, (frontend,), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("default", "autocast_scaler") if frontend == "python" else ("default",), ("sgd",),
                            protocol=TimingProtocol(1, 1))
    default = result.cells[0]
    assert default.script == "with_autocast"
    assert default.status is Status.NUMERICAL_FAILURE and default.record is not None
    found = re.fullmatch(rf"loss is (NaN|inf|-inf) at step (\d+) \({frontend}\)", str(default.reason))
    assert found is not None, default.reason
    step = int(found.group(2))
    assert 0 < step < spec.steps
    assert describe_loss(default.record.losses[step]) == found.group(1)
    scaler_default = next(c for c in result.cells if c.script == "cuda_amp_grad_scaler" and c.mode == "default")
    assert scaler_default.status is Status.NUMERICAL_FAILURE  # its scaler is disabled: nothing skips the step
    if frontend == "python":
        scaler = next(c for c in result.cells if c.mode == "autocast_scaler")
        assert scaler.status is Status.OK  # the scaler skips non-finite steps: not a failure there


def test_a_timed_round_whose_autocast_loss_turns_nan_is_an_error(
    tiny_spec: WorkloadSpec, availability: Availability, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Outside the scaler modes a non-finite loss fails the cell in a timed round as in the record call (autocast too)."""
    with MatrixRunner(tiny_spec, ("python",), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        cell = runner.run_cell(Cell("python", "with_autocast", "autocast", "sgd", "cpu"))
        assert cell.status is Status.OK and cell.record is not None
        losses = list(cell.record.losses)
        broken = cell.record.to_json() | {"losses": [*losses[:5], float("nan"), *losses[6:]]}
        monkeypatch.setattr(runner.pool, "call_cell", lambda *args, **kwargs: broken)
        [cell] = time_cells(runner.pool, [cell], TimingProtocol(warmup_rounds=1, rounds=2), lambda text: None)
    assert cell.status is Status.ERROR and cell.timing is None
    assert cell.reason == "timed round 1: loss is NaN at step 5 (python), where the record call's losses were finite"


def test_an_r_cell_whose_weights_hit_a_full_disk_is_an_error_in_one_line(
    tiny_spec: WorkloadSpec, availability: Availability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R's writeBin only warns on a full disk, leaving a truncated weights file: now the cell is an error in one line, no file stays."""
    import os

    from harness.files.paths import SCRIPTS_ENV
    from tests.planting import copy_scripts, plant

    require_r_torch(availability)
    root = copy_scripts(tmp_path / "scripts")  # the disk fills up as safetensors writes: writeBin warns, as R does then
    plant(root, "r_scripts/record.R", "safetensors::safe_save_file(tensors, path)",
          '{ safetensors::safe_save_file(tensors, path); warning("problem writing to connection") }')
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    cell = Cell("r", "with_autocast", "default", "sgd", "cpu")
    staging = tmp_path / "staging"
    staging.mkdir()
    with MatrixRunner(tiny_spec, ("r",), timeout=300, availability=availability, staging=staging, kept=kept_workers()) as runner:
        outcome = runner.run_cell(cell)
    target = staging / f"{cell.id}.safetensors"
    assert outcome.status is Status.ERROR
    assert outcome.reason.endswith(f"failed: Could not write the final weights to '{target}': problem writing to connection.")
    assert "\n" not in outcome.reason and not os.path.lexists(target)


def test_workers_leave_nothing_in_the_temporary_folder_even_when_killed(
    tiny_spec: WorkloadSpec, availability: Availability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Each Python worker left an empty ``$TMPDIR/torchinductor_root``, a killed R worker its ``Rtmp*``: now the pool removes both."""
    import os
    import signal

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    frontends = ("python",) if availability.r_reason else ("python", "r")
    with MatrixRunner(tiny_spec, frontends, timeout=300, availability=availability, staging=tmp_path_factory.mktemp("weights")) as runner:
        for frontend in frontends:
            assert runner.run_cell(Cell(frontend, "with_autocast", "autocast", "sgd", "cpu")).status is Status.OK
        if "r" in frontends:
            pid = runner.pool.worker("r").pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)  # R removes its Rtmp* only when it exits on its own
            (worker_tmp,) = [p for p in tmp_path.iterdir() if p.name.startswith("amp-parity-tmp-")]
            assert any(p.name.startswith("Rtmp") for p in worker_tmp.iterdir())
    assert list(tmp_path.iterdir()) == []


def test_an_ok_record_with_unreadable_weights_is_an_error_cell_and_the_matrix_finishes(
    tiny_spec: WorkloadSpec, availability: Availability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script that reports success but leaves a weights file safetensors cannot read: that cell is an ``error`` naming the
    file, and the other cells run and are judged (it ended the whole run in ``unexpected SafetensorError``, no result)."""
    from harness.files.paths import SCRIPTS_ENV
    from tests.planting import copy_scripts, plant

    root = copy_scripts(tmp_path / "scripts")
    plant(root, "py_scripts/record.py", "    save_file(tensors, path)\n",
          '    save_file(tensors, path)\n    if "-default-" in str(path):\n        Path(path).write_bytes(b"not safetensors")\n')
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    with MatrixRunner(tiny_spec, ("python",), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("default", "autocast"), ("sgd",), protocol=TimingProtocol(1, 1))
    default, autocast = (next(c for c in result.cells if c.script == "with_autocast" and c.mode == m) for m in ("default", "autocast"))
    assert default.status is Status.ERROR and default.reason is not None and "\n" not in default.reason
    assert default.reason.startswith("cannot read the weights in ")
    assert "with_autocast-default-sgd-python-cpu.safetensors: " in default.reason
    assert default.reason.endswith("the script reported success, but its final weights cannot be judged")
    assert autocast.status is Status.OK and autocast.verdict is not None and autocast.verdict.outcome == "pass"


def test_a_full_disk_while_writing_a_cell_trace_is_that_cells_error(
    tiny_spec: WorkloadSpec, availability: Availability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37 (13): safetensors' own error for a full disk while a cell's trace is written ends that cell in error, in
    one line naming the file and what to do, never the run in a traceback; the next cell runs."""
    from safetensors import SafetensorError

    from harness.model.cell_trace import CellTrace

    real_write = CellTrace.write
    calls: list[Path] = []

    def full_disk(self: CellTrace, path: Path) -> object:
        calls.append(path)
        if len(calls) == 1:
            raise SafetensorError('Error while serializing: IoError(Os { code: 28, message: "No space left on device" })')
        return real_write(self, path)

    monkeypatch.setattr(CellTrace, "write", full_disk)
    with MatrixRunner(tiny_spec, ("python",), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        first = runner.run_cell(Cell("python", "with_autocast", "default", "sgd", "cpu"))
        second = runner.run_cell(Cell("python", "with_autocast", "autocast", "sgd", "cpu"))
    assert first.status is Status.ERROR and "cannot write its trace to" in str(first.reason), first.reason
    assert "No space left on device" in str(first.reason) and "free space there" in str(first.reason)
    assert second.status is Status.OK and second.trace is not None


def test_a_trace_longer_than_its_reader_takes_is_not_kept_and_the_result_loads(
    tiny_spec: WorkloadSpec, availability: Availability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48 (3): a run whose traces are longer than a trace may be (a long run: 2,100,008 points) failed after minutes
    with no result. Now each such cell keeps no trace, its pairs are judged untraced, a warning says why, and the result
    it writes loads back (the limit lowered to below a tiny cell's points). A runner of its own: the session's keeps the
    traces of the cells other tests ran, which the lowered limit refuses to read (a failure that hung on the order of the
    tests)."""
    from harness.store.result_file import load_result, save_result

    monkeypatch.setattr("harness.model.cell_trace.MAX_POINTS", 50)
    frontends = ("python",) if availability.r_reason else ("python", "r")
    with MatrixRunner(tiny_spec, frontends, timeout=300, availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("default",), ("sgd",), measure=False)
    ran = [c for c in result.cells if c.status is Status.OK]
    assert ran and all(c.trace is None and c.reconciled is None for c in result.cells)
    warned = [w for w in result.warnings if "its trace was not kept: it holds" in w]
    assert len(warned) >= len(ran) and "over the 50 a trace may hold; its pairs are judged untraced" in warned[0], result.warnings
    save_result(result, tmp_path / "r.json")
    assert [c.status for c in load_result(tmp_path / "r.json").cells] == [c.status for c in result.cells]
