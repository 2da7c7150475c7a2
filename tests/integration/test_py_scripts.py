"""The Python scripts: numerics against float64, autocast dtypes, the scaler's rules, shell mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

from harness.contract.modes import mode_of
from harness.contract.record import RECORD_FIELD_NAMES
from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT
from harness.judge.reference import Reference, run_reference
from harness.judge.tolerances import float64_bound_for
from harness.run.prepare import prepare_run_spec
from harness.workload.fixtures import ensure_fixtures, load_fixture_arrays
from harness.workload.spec import WorkloadSpec
from py_scripts import cuda_amp_grad_scaler, with_autocast
from tests.support import float64_check

#: Overflow needs float16 (max 65504): bf16 and the fp32 master gradients share float32's range, where
#: even a scale of 3.4e38 leaves the gradients finite (d(loss)/d(output) is ~2/4096 of the scale).
#: With fp16 autocast on CPU, a 2**30 scale overflows the first steps' gradients and then backs off.
OVERFLOW = {"amp_dtype": "float16", "init_scale": 2.0**30}
#: float32 rounding (2^-24 per operation) compounded over 20 steps of 3 layers stays far below this.
FP32_TOLERANCE = 1e-5


def _run(module: Any, mode: str, tmp_path: Path, optimizer: str = "sgd", **overrides: Any) -> tuple[dict[str, Any], WorkloadSpec]:
    spec = WorkloadSpec.from_preset("tiny", **overrides)
    weights = tmp_path / f"{module.SCRIPT}-{mode}-{optimizer}.safetensors"
    run_spec = prepare_run_spec(spec, module.SCRIPT, optimizer, weights, ensure_fixtures(spec, tmp_path / "fx"))
    record: dict[str, Any] = module.run_workload(run_spec, mode)
    return record, spec


def _distance(record: dict[str, Any], spec: WorkloadSpec, ref: Reference) -> dict[str, float | None]:
    """The record's distance from float64, computed as the harness computes it for every cell."""
    bound = float64_bound_for(mode_of(record["script"], record["mode"]), "cpu", str(spec.amp_dtype), spec.steps)
    return float64_check(record["losses"], load_file(record["weights_path"]), ref, bound, frozenset()).distance()


def test_default_mode_matches_the_float64_reference_to_fp32_accuracy(tmp_path: Path) -> None:
    """``default`` on CPU follows the exact trajectory to float32 accuracy, losses and final weights."""
    record, spec = _run(with_autocast, "default", tmp_path)
    ref = run_reference(spec, load_fixture_arrays(ensure_fixtures(spec, tmp_path / "fx")), clip=False)
    distance = _distance(record, spec, ref)
    assert distance["max_rel_loss_error"] < FP32_TOLERANCE
    assert distance["final_weights_rel_error"] < FP32_TOLERANCE
    assert record["output_dtype"] == "float32" and record["loss_dtype"] == "float32"


def test_autocast_on_cpu_gives_bf16_output_and_fp32_loss(tmp_path: Path) -> None:
    """Under CPU autocast the Linear output is bfloat16 and MSE runs in float32, and bf16 error shows."""
    record, spec = _run(with_autocast, "autocast", tmp_path)
    assert record["output_dtype"] == "bfloat16"
    assert record["loss_dtype"] == "float32"
    ref = run_reference(spec, load_fixture_arrays(ensure_fixtures(spec, tmp_path / "fx")), clip=False)
    distance = _distance(record, spec, ref)
    assert FP32_TOLERANCE < distance["final_weights_rel_error"] < 1e-2  # bf16-sized, not fp32-sized


def test_record_has_exactly_the_contract_fields(tmp_path: Path) -> None:
    """A record carries every contract field, in order, with one loss per step."""
    record, spec = _run(with_autocast, "default", tmp_path)
    assert tuple(record) == RECORD_FIELD_NAMES
    assert len(record["losses"]) == spec.steps and record["final_loss"] == record["losses"][-1]
    assert len(record["seconds_per_epoch"]) == spec.epochs
    assert record["seconds_total"] == pytest.approx(sum(record["seconds_per_epoch"]))
    assert record["threads"] == 1 and record["device_name"] == "cpu" and record["clock"] == "time.perf_counter"


def _check_scaler_rules(record: dict[str, Any], spec: WorkloadSpec) -> None:
    """Replay GradScaler's documented rules from the skip flags and compare step by step."""
    scale, streak = spec.init_scale, 0
    for step, (skipped, recorded) in enumerate(zip(record["skipped"], record["loss_scale"], strict=True)):
        if skipped:
            scale, streak = scale * spec.backoff_factor, 0
        else:
            streak += 1
            if streak == spec.growth_interval:
                scale, streak = scale * spec.growth_factor, 0
        assert recorded == scale, f"step {step}: recorded {recorded}, rules give {scale}"


def test_scaler_grows_by_its_interval_without_overflow(tmp_path: Path) -> None:
    """With finite gradients the scale doubles every growth_interval steps and no step is skipped."""
    record, spec = _run(cuda_amp_grad_scaler, "autocast_scaler", tmp_path, overflow_steps=())  # the preset's overflow off
    assert record["skipped_steps"] == 0
    assert record["loss_scale"][:5] == [65536.0, 65536.0, 65536.0, 131072.0, 131072.0]
    _check_scaler_rules(record, spec)


@pytest.mark.parametrize("mode", ["autocast_scaler", "autocast_scaler_clip"])
def test_forced_overflow_skips_steps_and_backs_off(tmp_path: Path, mode: str) -> None:
    """A scale that overflows fp16 gradients skips step 0 and halves the scale, then training resumes."""
    record, spec = _run(cuda_amp_grad_scaler, mode, tmp_path, **OVERFLOW)
    assert record["output_dtype"] == "float16"
    assert record["skipped"][0] is True
    assert record["loss_scale"][0] == 2.0**29
    assert record["skipped_steps"] >= 1 and not all(record["skipped"])
    _check_scaler_rules(record, spec)


def test_skipped_steps_leave_the_weights_alone(tmp_path: Path) -> None:
    """When every step overflows (one step, overflowing scale), the final weights equal the initial ones."""
    record, spec = _run(cuda_amp_grad_scaler, "autocast_scaler", tmp_path, num_batches=1, epochs=1, **OVERFLOW)
    assert record["skipped"] == [True]
    initial = load_fixture_arrays(ensure_fixtures(spec, tmp_path / "fx"))
    final = load_file(record["weights_path"])
    assert all(np.array_equal(final[name], initial[name]) for name in final)


def test_shell_mode_prints_the_record_as_json(tmp_path: Path) -> None:
    """``python py_scripts/with_autocast.py --preset tiny --mode autocast`` prints one JSON record."""
    done = subprocess.run(
        [sys.executable, "py_scripts/with_autocast.py", "--preset", "tiny", "--mode", "autocast", "--device", "cpu",
         "--weights-out", str(tmp_path / "w.safetensors")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["mode"] == "autocast" and record["output_dtype"] == "bfloat16" and len(record["losses"]) == 20
    assert Path(record["weights_path"]).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "autocast_scaler"], "error: mode must be one of 'default', 'autocast', 'lowp_weights', 'lowp_weights_scaled' for "
                                        "with_autocast.py, got 'autocast_scaler'."),
        ([], "error: mode must be one of 'default', 'autocast', 'lowp_weights', 'lowp_weights_scaled' for with_autocast.py, got None."),
        (["--mode", "default", "--optimizer", "nadam"], "error: optimizer must be one of sgd, sgd_momentum, sgd_nesterov, rmsprop, "
         "rmsprop_centered, adam, adam_amsgrad, adamw, adagrad, adadelta, asgd, rprop, ignite_sgd, ignite_adam, ignite_adamw, "
         "ignite_rmsprop, ignite_adagrad, got 'nadam'."),
        (["--mode", "default", "--batch-size", "0"], "error: batch_size must be a whole number >= 1, got 0."),
    ],
)
def test_shell_mode_refuses_bad_input_in_one_line(args: list[str], message: str) -> None:
    """Bad flags end in one ``error:`` line and a usage error's status, no traceback."""
    done = subprocess.run(
        [sys.executable, "py_scripts/with_autocast.py", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == ExitCode.USAGE_ERROR
    assert done.stderr.strip() == message
    assert done.stdout == ""


@pytest.mark.parametrize("mode", ["autocast_scaler", "autocast_scaler_clip"])
def test_scaler_script_reads_no_scale_inside_the_loop(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """get_scale() (a host sync on CUDA) is never called: each step's scale is kept as a tensor and copied after the loop."""
    import torch

    expected, _ = _run(cuda_amp_grad_scaler, mode, tmp_path, overflow_steps=())  # the preset's overflow off: growth only

    def refuse(self: Any) -> float:
        raise AssertionError("get_scale() called: a host sync per step")

    monkeypatch.setattr(torch.amp.GradScaler, "get_scale", refuse)
    record, _ = _run(cuda_amp_grad_scaler, mode, tmp_path, overflow_steps=())
    assert record["loss_scale"] == expected["loss_scale"] and record["loss_scale"][-1] == 65536.0 * 2**5


@pytest.mark.parametrize("mode", ["lowp_weights", "lowp_weights_scaled"])
def test_low_precision_weights_compute_in_bf16_and_store_float32_weights(tmp_path: Path, mode: str) -> None:
    """The AMP guide's --fp16 on CPU: weights and inputs in bfloat16, so the output and the loss are bfloat16 (no autocast
    keeps the loss in float32); the final weights are stored as float32, each exactly a bfloat16 value."""
    import torch

    record, spec = _run(with_autocast, mode, tmp_path)
    assert (record["output_dtype"], record["loss_dtype"]) == ("bfloat16", "bfloat16")
    assert record["loss_scale"] is None and record["injected_steps"] == [] and all(np.isfinite(record["losses"]))
    weights = load_file(record["weights_path"])
    assert {a.dtype for a in weights.values()} == {np.dtype("float32")}
    for name, array in weights.items():
        tensor = torch.from_numpy(array)
        assert torch.equal(tensor.to(torch.bfloat16).to(torch.float32), tensor), f"{name} holds values bfloat16 cannot"
    ref = run_reference(spec, load_fixture_arrays(ensure_fixtures(spec, tmp_path / "fx")), clip=False)
    assert 1e-3 < _distance(record, spec, ref)["final_weights_rel_error"] < 1e-1  # bf16 weights: far coarser than autocast's


def test_a_power_of_two_static_scale_changes_nothing_in_bf16(tmp_path: Path) -> None:
    """bfloat16 has float32's exponent range: a static loss scale of 1024 neither overflows nor rescues an underflow, and
    multiplying and dividing by a power of two is exact, so lowp_weights_scaled trains bitwise as lowp_weights does."""
    plain, _ = _run(with_autocast, "lowp_weights", tmp_path)
    scaled, _ = _run(with_autocast, "lowp_weights_scaled", tmp_path)
    assert plain["losses"] == scaled["losses"]
    a, b = load_file(plain["weights_path"]), load_file(scaled["weights_path"])
    assert all(np.array_equal(a[name], b[name]) for name in a)


def test_the_scaler_scripts_default_trains_as_with_autocasts_default(tmp_path: Path) -> None:
    """The scaler script's own default (GradScaler and autocast built disabled) scales nothing, lifts nothing and injects
    nothing even when asked (the AMP recipe's use_amp=False), and trains bitwise as with_autocast's default."""
    scaler, _ = _run(cuda_amp_grad_scaler, "default", tmp_path, overflow_steps=(3, 7))
    plain, _ = _run(with_autocast, "default", tmp_path, overflow_steps=(3, 7))
    assert (scaler["loss_scale"], scaler["skipped"], scaler["skipped_steps"], scaler["lifted_check"]) == (None, None, None, None)
    assert scaler["injected_steps"] == [] and (scaler["output_dtype"], scaler["loss_dtype"]) == ("float32", "float32")
    assert (scaler["script"], scaler["mode"]) == ("cuda_amp_grad_scaler", "default")
    assert scaler["losses"] == plain["losses"]
    a, b = load_file(scaler["weights_path"]), load_file(plain["weights_path"])
    assert all(np.array_equal(a[name], b[name]) for name in a)


@pytest.mark.parametrize(("mode", "injected"), [("autocast_scaler", [3, 7]), ("autocast_scaler_clip", [3, 7]), ("default", [])])
def test_the_record_says_where_the_script_injected(tmp_path: Path, mode: str, injected: list[int]) -> None:
    """``injected_steps`` is the spec's overflow steps in the modes with a dynamic scaler (those steps skipped), none in the
    scaler script's default."""
    record, _ = _run(cuda_amp_grad_scaler, mode, tmp_path, overflow_steps=(3, 7))
    assert record["injected_steps"] == injected
    if injected:
        assert [k for k, s in enumerate(record["skipped"]) if s] == injected


@pytest.mark.parametrize("optimizer", ["adam", "ignite_rmsprop", "asgd"])
def test_the_script_builds_the_run_specs_optimizer(tmp_path: Path, optimizer: str) -> None:
    """The optimizer is the run spec's row (PyTorch's class under its own argument names): the record names it, and another
    row trains another trajectory from the same start."""
    record, _ = _run(with_autocast, "default", tmp_path, optimizer)
    sgd, _ = _run(with_autocast, "default", tmp_path)
    assert (record["optimizer"], sgd["optimizer"]) == (optimizer, "sgd")
    assert record["losses"][0] == sgd["losses"][0] and record["losses"][1:] != sgd["losses"][1:]


def test_a_switch_on_a_method_is_swapped_on_its_class_for_the_run_only() -> None:
    """A Python switch's target ``module:Class.method`` (py-attention-explicit: ``TransformerEncoderLayer._sa_block``) is
    the method rebuilt with its statement replaced, on the class, for the ``with`` block, then PyTorch's own again: inside,
    the layer's attention is the written-out one (``need_weights=True``), so its output is not the fused one's."""
    import torch

    from harness.workload.patches import patches_for
    from py_scripts.patches import binding_patches

    layer_class = torch.nn.TransformerEncoderLayer
    own = layer_class._sa_block
    spec = {"patches": patches_for("sgd", ("py-attention-explicit",))}
    switches = [p["target"] for p in spec["patches"]["python"] if p["kind"] == "switch"]
    assert switches == ["torch.nn.modules.transformer:TransformerEncoderLayer._sa_block"]
    torch.manual_seed(0)
    layer = layer_class(8, 2, 16, dropout=0.0, batch_first=True)
    x = torch.randn(4, 6, 8)
    padding = torch.arange(6)[None, :] >= torch.tensor([1, 3, 6, 4])[:, None]
    fused = layer(x, src_key_padding_mask=padding)
    with binding_patches(spec):
        assert layer_class._sa_block is not own
        written_out = layer(x, src_key_padding_mask=padding)
    assert layer_class._sa_block is own
    assert not torch.equal(fused, written_out) and torch.allclose(fused, written_out, atol=1e-5)
