"""The tolerance policy: one table keyed by mode, device, AMP dtype and steps, each number with a reason."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.errors import SpecError, UsageError
from harness.judge.tolerances import (
    DEFAULT_JUDGING,
    EPS,
    JUDGING_POLICIES,
    Tolerance,
    check_judging,
    eps_of,
    float64_bound_for,
    precision_for,
    tolerance_for,
)
from harness.model.verdicts import MEASURED_STEPS
from harness.workload.scripts import SCRIPTS, Mode

#: Every mode of every script, as ``script.mode``.
_ALL_MODES = {f"{pair.stem}.{m.name}": m for pair in SCRIPTS.values() for m in pair.modes}
#: The modes that compute in the AMP dtype under autocast, with float32 master weights.
_AUTOCAST_MODES = [k for k, m in _ALL_MODES.items() if m.autocast and m.weights == "float32"]
#: The modes that keep the weights themselves in the AMP dtype (the AMP guide's --fp16).
_LOWP_MODES = [k for k, m in _ALL_MODES.items() if m.weights == "amp"]
#: The modes that compute in float32 throughout: each script's own default.
_FLOAT32_MODES = [k for k, m in _ALL_MODES.items() if not m.autocast and m.weights == "float32"]


def _m(name: str) -> Mode:
    """The mode ``name`` of the first script that declares it (``default``: with_autocast's)."""
    return next(m for pair in SCRIPTS.values() for m in pair.modes if m.name == name)

#: Measured on the tiny preset (CPU, seed 0): each run's distance from the float64 reference.
_TINY_DEFAULT_FROM_F64 = (1.19e-7, 1.18e-7)  # (max relative loss error, final weights relative L2)
_TINY_BF16_FROM_F64 = (2.81e-5, 8.38e-5)


def test_eps_are_the_dtype_fraction_widths() -> None:
    """EPS holds 2^-23, 2^-7 and 2^-10: float32, bfloat16 and float16 machine epsilon."""
    assert EPS == {"float32": 1.1920928955078125e-07, "bfloat16": 0.0078125, "float16": 0.0009765625}


def test_the_modes_are_the_expected_three_kinds() -> None:
    """Each script's default computes in float32, the autocast modes in the AMP dtype, the lowp_weights modes in it throughout."""
    assert _FLOAT32_MODES == ["with_autocast.default", "cuda_amp_grad_scaler.default"]
    assert _AUTOCAST_MODES == ["with_autocast.autocast", "cuda_amp_grad_scaler.autocast_scaler",
                               "cuda_amp_grad_scaler.autocast_scaler_clip"]
    assert _LOWP_MODES == ["with_autocast.lowp_weights", "with_autocast.lowp_weights_scaled"]


@pytest.mark.parametrize("mode", _FLOAT32_MODES)
def test_default_mode_is_judged_in_float32_whatever_the_amp_dtype(mode: str) -> None:
    """Each script's ``default`` runs without autocast, so its tolerance is float32's and ignores the AMP dtype."""
    bf16 = tolerance_for(_ALL_MODES[mode], "cpu", "bfloat16", 20, same_libtorch=False)
    fp16 = tolerance_for(_ALL_MODES[mode], "cpu", "float16", 20, same_libtorch=False)
    assert bf16 == fp16
    assert bf16.precision == "float32"
    assert bf16.loss_rtol == pytest.approx(64 * 2.0**-23)
    assert bf16.weight_rtol == pytest.approx(64 * 2.0**-23)


@pytest.mark.parametrize("mode", _AUTOCAST_MODES)
def test_amp_modes_scale_with_the_amp_dtype_eps(mode: str) -> None:
    """Every autocast mode's tolerance is a fixed fraction of its AMP dtype's epsilon."""
    bf16 = tolerance_for(_ALL_MODES[mode], "cpu", "bfloat16", 20, same_libtorch=False)
    fp16 = tolerance_for(_ALL_MODES[mode], "cpu", "float16", 20, same_libtorch=False)
    assert (bf16.loss_rtol, bf16.weight_rtol) == pytest.approx((2.0**-7 / 32, 2.0**-7 / 16))
    assert (fp16.loss_rtol, fp16.weight_rtol) == pytest.approx((2.0**-10 / 32, 2.0**-10 / 8))
    assert precision_for(_ALL_MODES[mode], "float16") == fp16.precision == "float16"


@pytest.mark.parametrize("mode", _LOWP_MODES)
def test_low_precision_weights_are_judged_in_whole_eps_of_their_dtype(mode: str) -> None:
    """Weights kept in the AMP dtype round every update to it: the precision is ``<dtype> weights``, its eps the dtype's,
    1 eps (loss) and 2 eps (weights) at 20 steps, for pairs and for the float64 bound alike."""
    for dtype in ("bfloat16", "float16"):
        tol = tolerance_for(_ALL_MODES[mode], "cpu", dtype, 20, same_libtorch=False)
        bound = float64_bound_for(_ALL_MODES[mode], "cpu", dtype, 20)
        assert tol.precision == bound.precision == precision_for(_ALL_MODES[mode], dtype) == f"{dtype} weights"
        assert (tol.loss_rtol, tol.weight_rtol) == pytest.approx((EPS[dtype], 2 * EPS[dtype]))
        assert (bound.loss_rtol, bound.weight_rtol) == pytest.approx((EPS[dtype], 2 * EPS[dtype]))
        assert tol.reason.startswith(f"{mode.split('.')[1]} computes in {dtype} weights (eps {EPS[dtype]:.2e})")


def test_eps_of_a_precision_is_its_dtypes() -> None:
    """``bfloat16 weights`` rounds to bfloat16: its eps is bfloat16's; a plain dtype's is its own."""
    assert eps_of("bfloat16 weights") == EPS["bfloat16"] and eps_of("float16 weights") == EPS["float16"]
    assert eps_of("float32") == EPS["float32"]


def test_tolerances_exceed_twice_the_measured_float64_distance() -> None:
    """Two correct runs can be as far apart as both distances from float64: the tolerance allows that."""
    default = tolerance_for(_m("default"), "cpu", "bfloat16", 20, same_libtorch=False)
    autocast = tolerance_for(_m("autocast"), "cpu", "bfloat16", 20, same_libtorch=False)
    assert default.loss_rtol > 2 * _TINY_DEFAULT_FROM_F64[0] and default.weight_rtol > 2 * _TINY_DEFAULT_FROM_F64[1]
    assert autocast.loss_rtol > 2 * _TINY_BF16_FROM_F64[0] and autocast.weight_rtol > 2 * _TINY_BF16_FROM_F64[1]


def test_tolerance_grows_linearly_with_steps_and_never_shrinks() -> None:
    """Five times the measured steps gives five times the tolerance; fewer steps keep the base."""
    base = tolerance_for(_m("autocast"), "cpu", "bfloat16", MEASURED_STEPS, same_libtorch=False)
    longer = tolerance_for(_m("autocast"), "cpu", "bfloat16", 5 * MEASURED_STEPS, same_libtorch=False)
    shorter = tolerance_for(_m("autocast"), "cpu", "bfloat16", 3, same_libtorch=False)
    assert longer.loss_rtol == pytest.approx(5 * base.loss_rtol)
    assert longer.weight_rtol == pytest.approx(5 * base.weight_rtol)
    assert shorter.loss_rtol == base.loss_rtol


def test_cuda_doubles_the_cpu_tolerance() -> None:
    """CUDA's margin for cuBLAS algorithm choice is a factor of two over CPU."""
    cpu = tolerance_for(_m("autocast_scaler"), "cpu", "float16", 150, same_libtorch=False)
    cuda = tolerance_for(_m("autocast_scaler"), "cuda", "float16", 150, same_libtorch=False)
    assert cuda.loss_rtol == pytest.approx(2 * cpu.loss_rtol)
    assert cuda.weight_atol == pytest.approx(2 * cpu.weight_atol)
    assert "cuda" in cuda.reason and "cuBLAS" in cuda.reason


def test_absolute_floors_are_a_64th_of_the_relative_ones() -> None:
    """atol is rtol/64: it only matters for a loss or tensor 64x below its starting scale."""
    tol = tolerance_for(_m("autocast"), "cpu", "bfloat16", 20, same_libtorch=False)
    assert tol.loss_atol == pytest.approx(tol.loss_rtol / 64)
    assert tol.weight_atol == pytest.approx(tol.weight_rtol / 64)
    assert tol.max_ulps == 4


@pytest.mark.parametrize(
    ("mode", "device", "same_libtorch", "expected"),
    [
        ("default", "cpu", True, True), ("autocast", "cpu", True, True), ("autocast_scaler_clip", "cpu", True, True),
        ("lowp_weights", "cpu", True, True), ("lowp_weights_scaled", "cpu", False, False),
        ("default", "cpu", False, False), ("autocast", "cpu", False, False),
        ("default", "cuda", True, False), ("autocast_scaler", "cuda", True, False),
    ],
)
def test_bitwise_identity_is_expected_in_every_mode_on_one_libtorch_on_cpu(
    mode: str, device: str, same_libtorch: bool, expected: bool
) -> None:
    """Every mode on CPU with one libtorch version on both sides is expected bitwise identical; other libtorch or CUDA is not."""
    tol = tolerance_for(_m(mode), device, "bfloat16", 20, same_libtorch=same_libtorch)
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
    tol = tolerance_for(_m("autocast_scaler"), "cpu", "bfloat16", 100, same_libtorch=False)
    assert tol.reason.startswith("autocast_scaler computes in bfloat16 (eps 7.81e-03)")
    assert "x5 for 100 steps" in tol.reason
    assert "rel L2 2.44e-03" in tol.describe()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("fast", "cpu", "bfloat16", 20), "mode must be a mode a script declares (harness/workload/scripts.py), got 'fast'"),
        (("default", "tpu", "bfloat16", 20), "device must be one of 'cpu', 'cuda', got 'tpu'"),
        (("autocast", "cpu", "float64", 20), "amp_dtype must be one of 'bfloat16', 'float16', got 'float64'"),
        (("autocast", "cpu", "bfloat16", 0), "steps must be a whole number >= 1, got 0"),
    ],
)
def test_unknown_keys_are_refused_with_what_is_allowed(args: tuple[str, str, str, int], message: str) -> None:
    """An unknown mode (a name, not a script's mode), device, dtype or a step count below 1 raises SpecError naming what is allowed."""
    mode: Mode | str = args[0] if args[0] == "fast" else _m(args[0])
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tolerance_for(mode, *args[1:], same_libtorch=False)  # type: ignore[arg-type]


def test_tolerance_is_frozen_plain_data() -> None:
    """A Tolerance cannot be changed after the fact, and converts to a plain dict."""
    tol = tolerance_for(_m("default"), "cpu", "bfloat16", 20, same_libtorch=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tol.loss_rtol = 1.0  # type: ignore[misc]
    data = json.loads(json.dumps(tol.to_json()))
    assert data["expected_identical"] is True and data["precision"] == "float32" and data["max_ulps"] == tol.max_ulps
    assert Tolerance(**data) == tol  # every field is plain data and comes back from JSON unchanged
