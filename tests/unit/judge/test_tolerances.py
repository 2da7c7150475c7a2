"""The tolerance policy: one table keyed by mode, device, AMP dtype and steps, each number with a reason."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.errors import SpecError, UsageError
from harness.judge.tolerances import DEFAULT_JUDGING, EPS, JUDGING_POLICIES, Tolerance, check_judging, precision_for, tolerance_for
from harness.model.verdicts import MEASURED_STEPS
from harness.workload.spec import MODES

#: Measured on the tiny preset (CPU, seed 0): each run's distance from the float64 reference.
_TINY_DEFAULT_FROM_F64 = (1.19e-7, 1.18e-7)  # (max relative loss error, final weights relative L2)
_TINY_BF16_FROM_F64 = (2.81e-5, 8.38e-5)


def test_eps_are_the_dtype_fraction_widths() -> None:
    """EPS holds 2^-23, 2^-7 and 2^-10: float32, bfloat16 and float16 machine epsilon."""
    assert EPS == {"float32": 1.1920928955078125e-07, "bfloat16": 0.0078125, "float16": 0.0009765625}


def test_default_mode_is_judged_in_float32_whatever_the_amp_dtype() -> None:
    """``default`` runs without autocast, so its tolerance is float32's and ignores the AMP dtype."""
    bf16 = tolerance_for("default", "cpu", "bfloat16", 20, same_libtorch=False)
    fp16 = tolerance_for("default", "cpu", "float16", 20, same_libtorch=False)
    assert bf16 == fp16
    assert bf16.precision == "float32"
    assert bf16.loss_rtol == pytest.approx(64 * 2.0**-23)
    assert bf16.weight_rtol == pytest.approx(64 * 2.0**-23)


@pytest.mark.parametrize("mode", [m for m in MODES if m != "default"])
def test_amp_modes_scale_with_the_amp_dtype_eps(mode: str) -> None:
    """Every AMP mode's tolerance is a fixed fraction of its AMP dtype's epsilon."""
    bf16 = tolerance_for(mode, "cpu", "bfloat16", 20, same_libtorch=False)
    fp16 = tolerance_for(mode, "cpu", "float16", 20, same_libtorch=False)
    assert (bf16.loss_rtol, bf16.weight_rtol) == pytest.approx((2.0**-7 / 32, 2.0**-7 / 16))
    assert (fp16.loss_rtol, fp16.weight_rtol) == pytest.approx((2.0**-10 / 32, 2.0**-10 / 8))
    assert precision_for(mode, "float16") == fp16.precision == "float16"


def test_tolerances_exceed_twice_the_measured_float64_distance() -> None:
    """Two correct runs can be as far apart as both distances from float64: the tolerance allows that."""
    default = tolerance_for("default", "cpu", "bfloat16", 20, same_libtorch=False)
    autocast = tolerance_for("autocast", "cpu", "bfloat16", 20, same_libtorch=False)
    assert default.loss_rtol > 2 * _TINY_DEFAULT_FROM_F64[0] and default.weight_rtol > 2 * _TINY_DEFAULT_FROM_F64[1]
    assert autocast.loss_rtol > 2 * _TINY_BF16_FROM_F64[0] and autocast.weight_rtol > 2 * _TINY_BF16_FROM_F64[1]


def test_tolerance_grows_linearly_with_steps_and_never_shrinks() -> None:
    """Five times the measured steps gives five times the tolerance; fewer steps keep the base."""
    base = tolerance_for("autocast", "cpu", "bfloat16", MEASURED_STEPS, same_libtorch=False)
    longer = tolerance_for("autocast", "cpu", "bfloat16", 5 * MEASURED_STEPS, same_libtorch=False)
    shorter = tolerance_for("autocast", "cpu", "bfloat16", 3, same_libtorch=False)
    assert longer.loss_rtol == pytest.approx(5 * base.loss_rtol)
    assert longer.weight_rtol == pytest.approx(5 * base.weight_rtol)
    assert shorter.loss_rtol == base.loss_rtol


def test_cuda_doubles_the_cpu_tolerance() -> None:
    """CUDA's margin for cuBLAS algorithm choice is a factor of two over CPU."""
    cpu = tolerance_for("autocast_scaler", "cpu", "float16", 150, same_libtorch=False)
    cuda = tolerance_for("autocast_scaler", "cuda", "float16", 150, same_libtorch=False)
    assert cuda.loss_rtol == pytest.approx(2 * cpu.loss_rtol)
    assert cuda.weight_atol == pytest.approx(2 * cpu.weight_atol)
    assert "cuda" in cuda.reason and "cuBLAS" in cuda.reason


def test_absolute_floors_are_a_64th_of_the_relative_ones() -> None:
    """atol is rtol/64: it only matters for a loss or tensor 64x below its starting scale."""
    tol = tolerance_for("autocast", "cpu", "bfloat16", 20, same_libtorch=False)
    assert tol.loss_atol == pytest.approx(tol.loss_rtol / 64)
    assert tol.weight_atol == pytest.approx(tol.weight_rtol / 64)
    assert tol.max_ulps == 4


@pytest.mark.parametrize(
    ("mode", "device", "same_libtorch", "expected"),
    [
        ("default", "cpu", True, True), ("autocast", "cpu", True, True), ("autocast_scaler_clip", "cpu", True, True),
        ("default", "cpu", False, False), ("autocast", "cpu", False, False),
        ("default", "cuda", True, False), ("autocast_scaler", "cuda", True, False),
    ],
)
def test_bitwise_identity_is_expected_in_every_mode_on_one_libtorch_on_cpu(
    mode: str, device: str, same_libtorch: bool, expected: bool
) -> None:
    """Every mode on CPU with one libtorch version on both sides is expected bitwise identical; other libtorch or CUDA is not."""
    tol = tolerance_for(mode, device, "bfloat16", 20, same_libtorch=same_libtorch)
    assert tol.expected_identical is expected
    assert ("bitwise identity is expected" in tol.reason) is expected


@pytest.mark.parametrize("judging", ["strict", "tolerance_only"])
def test_known_judging_policies_pass_and_others_are_refused(judging: str) -> None:
    """``check_judging`` returns a known policy as is and refuses anything else naming the allowed ones."""
    assert check_judging(judging) == judging and DEFAULT_JUDGING == "strict" and judging in JUDGING_POLICIES
    with pytest.raises(UsageError, match="judging must be one of 'strict', 'tolerance_only', got 'Strict'"):
        check_judging("Strict")


def test_reason_names_the_mode_precision_and_steps() -> None:
    """The reason says which mode, which dtype's epsilon and how many steps the numbers were scaled for."""
    tol = tolerance_for("autocast_scaler", "cpu", "bfloat16", 100, same_libtorch=False)
    assert tol.reason.startswith("autocast_scaler computes in bfloat16 (eps 7.81e-03)")
    assert "x5 for 100 steps" in tol.reason
    assert "rel L2 2.44e-03" in tol.describe()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("fast", "cpu", "bfloat16", 20), "mode must be one of 'default'"),
        (("default", "tpu", "bfloat16", 20), "device must be one of 'cpu', 'cuda', got 'tpu'"),
        (("autocast", "cpu", "float64", 20), "amp_dtype must be one of 'bfloat16', 'float16', got 'float64'"),
        (("autocast", "cpu", "bfloat16", 0), "steps must be a whole number >= 1, got 0"),
    ],
)
def test_unknown_keys_are_refused_with_what_is_allowed(args: tuple[str, str, str, int], message: str) -> None:
    """An unknown mode, device, dtype or a step count below 1 raises SpecError naming what is allowed."""
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        tolerance_for(*args, same_libtorch=False)


def test_tolerance_is_frozen_plain_data() -> None:
    """A Tolerance cannot be changed after the fact, and converts to a plain dict."""
    tol = tolerance_for("default", "cpu", "bfloat16", 20, same_libtorch=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tol.loss_rtol = 1.0  # type: ignore[misc]
    data = json.loads(json.dumps(tol.to_json()))
    assert data["expected_identical"] is True and data["precision"] == "float32" and data["max_ulps"] == tol.max_ulps
    assert Tolerance(**data) == tol  # every field is plain data and comes back from JSON unchanged
