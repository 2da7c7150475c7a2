"""GEMM dtype profiling on the real scripts at the tiny preset (CPU: autocast means bfloat16), run in this process.

The judge on plain data and the import check are in ``tests/unit/worker_side/test_gemm_profile.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.contract.modes import mode_of
from harness.judge.gemm_precision import amp_gemm_problem
from harness.run.prepare import prepare_run_spec
from harness.worker_side import gemm_profiler
from harness.worker_side.gemm_profiler import profile_gemms
from harness.workload.fixtures import ensure_fixtures
from harness.workload.spec import WorkloadSpec
from py_scripts import cuda_amp_grad_scaler, with_autocast

Workload = Callable[[dict[str, Any], str], dict[str, Any]]
SPEC = WorkloadSpec.from_preset("tiny")
#: Forward: one addmm per Linear. Backward: mm for each weight gradient, plus mm for the input
#: gradient of every layer but the first (its input, the data, needs no gradient).
FORWARD_GEMMS = SPEC.num_layers
BACKWARD_GEMMS = SPEC.num_layers + (SPEC.num_layers - 1)


def spying(run_workload: Workload, seen: list[dict[str, Any]]) -> Workload:
    """``run_workload`` that also keeps the run spec it was handed."""

    def run(run_spec: dict[str, Any], mode: str) -> dict[str, Any]:
        seen.append(dict(run_spec))
        return run_workload(run_spec, mode)

    return run


def float32_claiming_autocast(run_spec: dict[str, Any], mode: str) -> dict[str, Any]:
    """A broken script: says ``autocast`` but trains with autocast off."""
    assert mode == "autocast"
    return with_autocast.run_workload(run_spec, "default")


@pytest.fixture(scope="module")
def run_spec(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """with_autocast's run spec (its modes, plain SGD)."""
    return prepare_run_spec(SPEC, "with_autocast", "sgd", tmp_path_factory.mktemp("gemm") / "w.safetensors", ensure_fixtures(SPEC))


@pytest.fixture(scope="module")
def scaler_run_spec(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """cuda_amp_grad_scaler's run spec: each script's run spec declares its own modes."""
    return prepare_run_spec(SPEC, "cuda_amp_grad_scaler", "sgd", tmp_path_factory.mktemp("gemm") / "w.safetensors", ensure_fixtures(SPEC))


@pytest.fixture(scope="module")
def seen() -> list[dict[str, Any]]:
    return []


@pytest.fixture(scope="module")
def profiles(run_spec: dict[str, Any], scaler_run_spec: dict[str, Any], seen: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One profile per mode, shared by the tests below (each is a whole tiny run); ``scaler default`` is the scaler script's."""
    workloads: dict[str, tuple[Workload, dict[str, Any], str]] = {
        "default": (with_autocast.run_workload, run_spec, "default"),
        "autocast": (with_autocast.run_workload, run_spec, "autocast"),
        "lowp_weights": (with_autocast.run_workload, run_spec, "lowp_weights"),
        "scaler default": (cuda_amp_grad_scaler.run_workload, scaler_run_spec, "default"),
        "autocast_scaler_clip": (cuda_amp_grad_scaler.run_workload, scaler_run_spec, "autocast_scaler_clip"),
    }
    found = {name: profile_gemms(spying(run, seen), spec, mode) for name, (run, spec, mode) in workloads.items()}
    found["broken"] = profile_gemms(spying(float32_claiming_autocast, seen), run_spec, "autocast")
    return found


def test_autocast_gemms_all_ran_in_bfloat16(profiles: dict[str, dict[str, Any]]) -> None:
    profile = profiles["autocast"]
    assert SPEC.amp_dtype == "bfloat16"
    assert profile["half_share"] == 1.0
    assert set(profile["seconds_by_dtype"]) == {"bfloat16"}
    assert profile["gemm_seconds"] == pytest.approx(profile["seconds_by_dtype"]["bfloat16"])
    assert amp_gemm_problem(mode_of("with_autocast", "autocast"), profile) is None


def test_default_gemms_all_ran_in_float32(profiles: dict[str, dict[str, Any]]) -> None:
    profile = profiles["default"]
    assert profile["half_share"] == 0.0
    assert set(profile["seconds_by_dtype"]) == {"float32"}
    assert amp_gemm_problem(mode_of("with_autocast", "default"), profile) is None


def test_low_precision_weights_gemms_all_ran_in_bfloat16(profiles: dict[str, dict[str, Any]]) -> None:
    """Weights and inputs in bfloat16 without autocast (the AMP guide's --fp16): every GEMM runs in bfloat16, and it is AMP."""
    profile = profiles["lowp_weights"]
    assert profile["half_share"] == 1.0 and set(profile["seconds_by_dtype"]) == {"bfloat16"}
    assert amp_gemm_problem(mode_of("with_autocast", "lowp_weights"), profile) is None


def test_the_scaler_scripts_default_gemms_ran_in_float32(profiles: dict[str, dict[str, Any]]) -> None:
    """The scaler script's own default disables autocast: float32 GEMMs, which its mode does not claim to avoid."""
    profile = profiles["scaler default"]
    assert profile["half_share"] == 0.0 and set(profile["seconds_by_dtype"]) == {"float32"}
    assert amp_gemm_problem(mode_of("with_autocast", "default"), profile) is None


def test_scaler_clip_gemms_all_ran_in_half(profiles: dict[str, dict[str, Any]]) -> None:
    profile = profiles["autocast_scaler_clip"]
    assert profile["half_share"] == 1.0
    assert set(profile["seconds_by_dtype"]) == {"bfloat16"}
    assert amp_gemm_problem(mode_of("cuda_amp_grad_scaler", "autocast_scaler_clip"), profile) is None


@pytest.mark.parametrize("name", ["default", "autocast", "lowp_weights", "scaler default", "autocast_scaler_clip"])
def test_exactly_one_step_is_counted(profiles: dict[str, dict[str, Any]], name: str) -> None:
    profile = profiles[name]
    mode = name.removeprefix("scaler ")
    counts = {op["name"]: 0 for op in profile["ops"]}
    for op in profile["ops"]:
        counts[op["name"]] += op["count"]
    assert counts == {"aten::addmm": FORWARD_GEMMS, "aten::mm": BACKWARD_GEMMS}
    assert sum(counts.values()) == 8
    assert (profile["step"], profile["device"], profile["mode"]) == (3, "cpu", mode)
    assert profile["kernels"] == []
    assert all(op["seconds"] > 0 for op in profile["ops"])
    assert [op["seconds"] for op in profile["ops"]] == sorted((op["seconds"] for op in profile["ops"]), reverse=True)
    assert json.loads(json.dumps(profile)) == profile  # plain data


def test_float32_under_a_claimed_autocast_is_flagged(profiles: dict[str, dict[str, Any]]) -> None:
    profile = profiles["broken"]
    assert profile["half_share"] == 0.0
    message = amp_gemm_problem(mode_of("with_autocast", "autocast"), profile)
    assert message is not None
    assert message.startswith("claims AMP (autocast) but 100.0% of GEMM time ran in float32 (")
    assert "aten::addmm ×3" in message and "aten::mm ×5" in message
    assert amp_gemm_problem(mode_of("with_autocast", "default"), profile) is None


def test_no_weights_are_written(
    profiles: dict[str, dict[str, Any]], run_spec: dict[str, Any], seen: list[dict[str, Any]]
) -> None:
    """The profiled run is handed ``weights_out: None`` (write nothing); the caller's path stays untouched."""
    assert len(seen) == len(profiles)
    assert all(handed["weights_out"] is None for handed in seen)
    assert not Path(run_spec["weights_out"]).exists()
    assert {k: v for k, v in seen[0].items() if k != "weights_out"} == {k: v for k, v in run_spec.items() if k != "weights_out"}


def test_dtypes_come_from_the_kineto_events(run_spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The primary source (kineto ``dtypes()`` by correlation id) finds every GEMM; the fallback agrees."""
    found: list[dict[int, tuple[str, list[str]]]] = []
    real = gemm_profiler._kineto_dtypes

    def keeping(prof: Any) -> dict[int, tuple[str, list[str]]]:
        found.append(real(prof))
        return found[-1]

    monkeypatch.setattr(gemm_profiler, "_kineto_dtypes", keeping)
    profile_gemms(with_autocast.run_workload, run_spec, "autocast")
    assert sorted(name for name, _ in found[0].values()) == ["aten::addmm"] * 3 + ["aten::mm"] * 5
    assert all(dtypes[0 if name == "aten::mm" else 1] == "c10::BFloat16" for name, dtypes in found[0].values())
    monkeypatch.setattr(gemm_profiler, "_kineto_dtypes", lambda prof: {})
    fallback = profile_gemms(with_autocast.run_workload, run_spec, "autocast")
    assert set(fallback["seconds_by_dtype"]) <= {"bfloat16", "unknown"}  # "unknown" on a torch without input_dtypes


@pytest.mark.parametrize("step", [1, SPEC.steps + 1])
def test_a_step_outside_the_run_is_refused(run_spec: dict[str, Any], step: int) -> None:
    with pytest.raises(ValueError, match=rf"step must be between 2 and the run's {SPEC.steps} optimizer steps"):
        profile_gemms(with_autocast.run_workload, run_spec, "autocast", step=step)
