"""Cell verdicts judged by what they catch: real mistakes planted in copies of the real scripts, and injected overflows.

Each planted run goes through ``python -m harness run --preset tiny --frontend python`` as a maintainer
would run it (its ``main``, in this process: :func:`tests.support.run_cli`); the clean scripts pass the
same way in the session's shared real run (the ``python_run`` fixture).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from safetensors.numpy import load_file

from harness.contract.modes import mode_of
from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT, SCRIPTS_ENV
from harness.judge.reference import run_reference
from harness.judge.tolerances import float64_bound_for
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.fixtures import load_fixture_arrays
from harness.workload.spec import WorkloadSpec
from tests.planting import copy_scripts, plant
from tests.support import PYTHON_RUN_GROUP, SharedRun, float64_check, kept_workers, require_r_torch, run_cli

_SCALER = "py_scripts/cuda_amp_grad_scaler.py"
_CLIP_CELL = "cuda_amp_grad_scaler-autocast_scaler_clip-sgd-python-cpu"
_SCALER_CELL = "cuda_amp_grad_scaler-autocast_scaler-sgd-python-cpu"
#: The optimizer these tests run: plain SGD (its float64 reference is the one written; each row's own comes separately).
_SGD = ("sgd",)


def _run_tiny(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str, scripts: Path
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``python -m harness run --preset tiny --frontend python --optimizer sgd`` (one timed round) on the scripts under
    ``scripts``, and its result."""
    out = tmp_path / "result.json"
    monkeypatch.setenv(SCRIPTS_ENV, str(scripts))  # the workers the run starts inherit it
    done = run_cli("run", "--preset", "tiny", "--frontend", "python", "--optimizer", "sgd", "--rounds", "1", "--warmup-rounds", "1",
                   "--json", str(out), *flags)
    return done, json.loads(out.read_text()) if out.exists() else {}


def _verdicts(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c["verdict"] for c in result["cells"]}


@PYTHON_RUN_GROUP
def test_clean_scripts_pass_every_cell_and_exit_0(python_run: SharedRun) -> None:
    """The real scripts: every Python cell passes its float64 bound (and scaler rule), exit status 0."""
    done, result = python_run.done, python_run.result()
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = _verdicts(result)
    assert [v["outcome"] for v in verdicts.values()] == ["pass"] * 7
    assert verdicts[_SCALER_CELL]["scaler"]["passed"] and verdicts[_SCALER_CELL]["float64"]["passed"]
    assert "FAIL" not in done.stdout


def test_unscale_removed_from_the_clip_mode_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Clipping scaled gradients (no ``unscale_``): the clip cell is past the float64 bound, named, exit 1."""
    root = copy_scripts(tmp_path / "scripts")
    plant(root, _SCALER, "        for opt in loop.opts:\n            loop.scaler.unscale_(opt)\n", "")
    done, result = _run_tiny(tmp_path, monkeypatch, "--mode", "autocast_scaler,autocast_scaler_clip", scripts=root)
    assert done.returncode == ExitCode.FAILED, done.stdout + done.stderr
    verdicts = _verdicts(result)
    clip = verdicts[_CLIP_CELL]
    assert clip["outcome"] == "fail" and clip["float64"]["first_step_beyond"] is not None and clip["float64"]["worst_tensor"]
    assert clip["scaler"]["passed"]  # the scale itself is untouched by the mistake
    assert verdicts[_SCALER_CELL]["outcome"] == "pass"  # the unclipped mode has no unscale_ to lose
    assert f"{_CLIP_CELL} FAIL: loss past the float64 bound from step" in " ".join(done.stdout.split())


def test_another_growth_interval_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scaler built with growth_interval + 1 (make_grad_scaler(), py_scripts/scaler.py, every scaling script's) doubles one step
    late: the oracle names step 3 and both values, exit 1."""
    root = copy_scripts(tmp_path / "scripts")
    plant(root, "py_scripts/scaler.py", 'growth_interval=spec["growth_interval"]', 'growth_interval=spec["growth_interval"] + 1')
    done, result = _run_tiny(tmp_path, monkeypatch, "--mode", "autocast_scaler", scripts=root)
    assert done.returncode == ExitCode.FAILED, done.stdout + done.stderr
    scaler = _verdicts(result)[_SCALER_CELL]["scaler"]
    assert (scaler["passed"], scaler["first_step"], scaler["expected"], scaler["recorded"]) == (False, 3, 131072.0, 65536.0)
    assert f"{_SCALER_CELL} FAIL: loss scale breaks GradScaler's rule at step 3" in " ".join(done.stdout.split())


def test_injected_overflows_back_off_skip_exactly_there_and_the_replay_agrees(availability: Availability, tmp_path: Path) -> None:
    """Overflows injected at steps 3 and 7: two back-offs, exactly those steps skipped, oracle and replayed float64 pass."""
    spec = WorkloadSpec.from_preset("tiny", overflow_steps=(3, 7))
    with MatrixRunner(spec, ("python",), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("autocast_scaler", "autocast_scaler_clip"), _SGD, measure=False).to_json()
        arrays = load_fixture_arrays(runner.fixture)
        for cell in result["cells"]:
            record, verdict = cell["record"], cell["verdict"]
            scales = record["loss_scale"]
            assert [i for i, s in enumerate(record["skipped"]) if s] == [3, 7] and record["skipped_steps"] == 2
            assert (scales[2], scales[3], scales[6], scales[7]) == (65536.0, 32768.0, 32768.0, 16384.0)
            assert verdict["outcome"] == "pass", verdict["reason"]
            assert verdict["scaler"]["skipped_steps"] == [3, 7] and verdict["float64"]["replayed_skipped_steps"] == [3, 7]
            assert record["injected_steps"] == [3, 7]
            # Against a reference that took steps 3 and 7, the same run would fail its bound: the replay matters.
            clip = cell["mode"] == "autocast_scaler_clip"
            unreplayed = run_reference(spec, arrays, clip=clip)
            bound = float64_bound_for(mode_of(cell["script"], cell["mode"]), "cpu", "bfloat16", spec.steps)
            naive = float64_check(record["losses"], load_file(record["weights_path"]), unreplayed, bound, frozenset())
            assert not naive.passed and naive.final_weights_rel_error > 5 * verdict["float64"]["final_weights_rel_error"]
            # The result keeps the replayed trajectory (the plots draw it for these cells).
            kept = [r for r in result["reference"]["trajectories"] if r["clip"] == clip and r["skipped_steps"]]
            assert {r["optimizer"] for r in kept} == {"sgd"}
            assert [r["skipped_steps"] for r in kept] == [[3, 7]]
            assert kept[0]["losses"] == run_reference(spec, arrays, clip=clip, skipped=frozenset({3, 7})).losses.tolist()


def test_r_scaler_with_injection_skips_exactly_the_injected_steps(availability: Availability, tmp_path: Path) -> None:
    """On CPU, R's lifted scaler with overflows injected at 3 and 7 skips exactly those steps and passes GradScaler's rule;
    without the lift it ends unsupported with R's own message, not an injection error."""
    require_r_torch(availability)
    spec = WorkloadSpec.from_preset("tiny", overflow_steps=(3, 7))
    with MatrixRunner(spec, ("r",), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        lifted = runner.run(("autocast_scaler", "autocast_scaler_clip"), _SGD, measure=False)
    for cell in lifted.cells:
        assert cell.status.value == "ok" and cell.record is not None and cell.record.lifted_check, cell.reason
        assert sorted(cell.record.skipped_step_indices) == [3, 7]
        assert cell.verdict is not None and cell.verdict.outcome == "pass", cell.verdict
    with MatrixRunner(spec, ("r",), availability=availability, scaler_lift=False, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("autocast_scaler", "autocast_scaler_clip"), _SGD, measure=False).to_json()
    for cell in result["cells"]:
        assert cell["status"] == "unsupported", cell["reason"]
        assert "device must be" in cell["reason"] and "cuda" in cell["reason"]
        assert cell["verdict"]["outcome"] == "not_judged"


def test_r_inject_overflow_writes_an_inf_into_the_gradient_in_place(availability: Availability) -> None:
    """The R twin's injection, run on CPU where the rest of R's scaler cannot: one inf in the first layer's gradient."""
    require_r_torch(availability)
    code = (
        'source("r_scripts/cuda_amp_grad_scaler.R"); '
        "net <- torch::nn_sequential(torch::nn_linear(3, 3), torch::nn_relu(), torch::nn_linear(3, 2)); "
        "net(torch::torch_ones(2, 3))$sum()$backward(); "
        'model_state$names <- c("layer0.weight", "layer0.bias", "layer1.weight", "layer1.bias"); inject_overflow(net); '
        "g <- as.matrix(net$parameters[[1]]$grad); "
        'cat(sum(is.infinite(g)), is.infinite(g[1, 1]), sep = " ")'
    )
    done = subprocess.run(["Rscript", "-e", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "1 TRUE"


@pytest.mark.parametrize("mode", ["autocast_scaler", "autocast_scaler_clip"])
def test_scale_history_copied_after_the_loop_is_the_rule_exactly(mode: str, runner: MatrixRunner) -> None:
    """The scales kept on the device and copied after the loop are GradScaler's float32 values: 65536 doubling every 4
    unskipped steps, halved at the preset's injected overflow (step 9), which restarts the count."""
    from harness.workload.matrix import Cell

    assert runner.spec == WorkloadSpec.from_preset("tiny")  # the session's runner (its Python worker is shared)
    record = runner.run_cell(Cell("python", "cuda_amp_grad_scaler", mode, "sgd", "cpu")).to_json()["record"]
    expected, scale, unskipped = [], 65536.0, 0
    for step in range(20):
        if step in runner.spec.overflow_steps:
            scale, unskipped = scale * 0.5, 0
        else:
            unskipped += 1
            if unskipped == 4:
                scale, unskipped = scale * 2, 0
        expected.append(scale)
    assert runner.spec.overflow_steps == (9,) and record["loss_scale"] == expected
    assert all(isinstance(v, float) for v in record["loss_scale"]) and record["skipped_steps"] == 1


def test_natural_fp16_overflows_are_replayed_and_follow_the_rule(availability: Availability, tmp_path: Path) -> None:
    """fp16 autocast from a 2**30 scale overflows by itself: the back-offs follow the rule and the replayed reference agrees."""
    spec = WorkloadSpec.from_preset("tiny", amp_dtype="float16", init_scale=2.0**30)
    with MatrixRunner(spec, ("python",), availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("autocast_scaler",), _SGD, measure=False).to_json()
    cell = result["cells"][0]
    skipped = [i for i, s in enumerate(cell["record"]["skipped"]) if s]
    assert len(skipped) >= 3, "the scale must back off several times for this test to mean anything"
    verdict = cell["verdict"]
    assert verdict["outcome"] == "pass", verdict["reason"]
    assert verdict["float64"]["replayed_skipped_steps"] == skipped and verdict["scaler"]["skipped_steps"] == skipped
    assert verdict["float64"]["bound"]["precision"] == "float16"


#: Where each scaler script decides which steps get the overflow the spec asks for: the plants make it ignore the spec.
_IGNORED_INJECTION = {
    "python": (_SCALER, 'inject = loop.use_scaler and step in loop.spec["overflow_steps"]', "inject = loop.use_scaler and step in []"),
    "r": ("r_scripts/cuda_amp_grad_scaler.R", "inject <- loop$use_scaler && step %in% as.integer(unlist(loop$spec$overflow_steps))",
          "inject <- loop$use_scaler && step %in% integer()"),
}


@pytest.mark.parametrize("frontend", ["python", "r"])
def test_a_script_that_ignores_the_overflow_steps_is_an_error_naming_the_injection(
    frontend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, availability: Availability
) -> None:
    """A scaler script that never puts the asked-for overflow in would pass every check it is there for (nothing skipped, the
    unreplayed reference agrees): its record says where it injected, so the cell is an ``error`` naming the steps; the
    scaler script's default, which injects nothing by design, stays ok."""
    if frontend == "r":
        require_r_torch(availability)
    root = copy_scripts(tmp_path / "scripts")
    plant(root, *_IGNORED_INJECTION[frontend])
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    spec = WorkloadSpec.from_preset("tiny", overflow_steps=(3, 7))
    with MatrixRunner(spec, (frontend,), timeout=300, availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("default", "autocast_scaler"), _SGD, measure=False)
    scaler = next(c for c in result.cells if c.script == "cuda_amp_grad_scaler" and c.mode == "autocast_scaler")
    assert scaler.status.value == "error", scaler.reason
    assert scaler.reason == (f"the {frontend} script put an overflow at steps [], but was asked for [3, 7] (overflow_steps): a script "
                             "must inject what the spec asks, or the scaler's skip goes untested")
    assert all(c.status.value == "ok" for c in result.cells if c.mode == "default"), [c.reason for c in result.cells]


def test_a_record_naming_another_optimizer_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A script whose record names plain SGD whatever the run spec's optimizer (as one that ignores the row would): its Adam
    cell is an ``error`` naming what the record says and what was asked, and the run exits 1."""
    root = copy_scripts(tmp_path / "scripts")
    plant(root, "py_scripts/with_autocast.py", "    return finish_loop(loop, workload_start, SCRIPT)\n",
          '    return finish_loop(loop, workload_start, SCRIPT) | {"optimizer": "sgd"}\n')
    done, result = _run_tiny(tmp_path, monkeypatch, "--mode", "default", "--optimizer", "adam", scripts=root)
    assert done.returncode == 1, done.stdout + done.stderr
    cells = {c["id"]: c for c in result["cells"]}
    planted = cells["with_autocast-default-adam-python-cpu"]
    assert (planted["status"], planted["reason"]) == (
        "error", "the python script's record says optimizer 'sgd', but it was asked for 'adam'")
    assert cells["cuda_amp_grad_scaler-default-adam-python-cpu"]["status"] == "ok"  # the unplanted script names its row
