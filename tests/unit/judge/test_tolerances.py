"""The tolerance policy: one table keyed by mode, device, AMP dtype and steps, each number with a reason."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.contract.modes import SCRIPTS, Mode, mode_of
from harness.contract.optimizers import UPDATE_KIND_OF_CLASS
from harness.errors import SpecError, UsageError
from harness.judge.tolerances import (
    DEFAULT_JUDGING,
    EPS,
    JUDGING_POLICIES,
    PRECISIONS,
    UPDATE_KINDS,
    Tolerance,
    check_judging,
    float64_bound_for,
    precision_for,
    tolerance_for,
    update_kind,
)
from harness.model.verdicts import MEASURED_STEPS
from harness.workload.optimizers import OPTIMIZERS

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

#: The largest distance from float64 (max relative loss error, final weights relative L2) measured at tiny's 20 steps,
#: CPU, seeds 0-2, over every optimizer of the kind and every mode of the precision (``tests/float64_distance.py``;
#: the tables in harness/judge/tolerances.py). float16 weights, normalising: Adadelta and Rprop only (RMSprop, Adam and
#: AdamW do not finish there).
_MEASURED_FROM_F64: dict[tuple[str, str], tuple[float, float]] = {
    ("float32", "proportional"): (1.6e-7, 3.1e-7), ("float32", "normalising"): (1.6e-7, 2.5e-6),
    ("bfloat16", "proportional"): (5.2e-5, 6.8e-4), ("bfloat16", "normalising"): (4.8e-4, 5.0e-2),
    ("float16", "proportional"): (8.0e-6, 3.4e-4), ("float16", "normalising"): (5.5e-4, 4.5e-2),
    ("bfloat16 weights", "proportional"): (5.1e-3, 1.8e-2), ("bfloat16 weights", "normalising"): (3.9e-3, 5.2e-2),
    ("float16 weights", "proportional"): (5.2e-4, 2.4e-3), ("float16 weights", "normalising"): (5.8e-3, 8.6e-2),
}
#: A mode and an optimizer of each precision and kind, to ask the policy with.
_MODE_OF: dict[str, tuple[str, str]] = {
    "float32": ("default", "bfloat16"), "bfloat16": ("autocast", "bfloat16"), "float16": ("autocast", "float16"),
    "bfloat16 weights": ("lowp_weights", "bfloat16"), "float16 weights": ("lowp_weights_scaled", "float16"),
}
_OPTIMIZER_OF = {"proportional": "sgd_momentum", "normalising": "adam"}


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


@pytest.mark.parametrize("mode", sorted({m.name for pair in SCRIPTS.values() for m in pair.modes if m.autocast and m.weights == "float32"}))
def test_amp_modes_scale_with_the_amp_dtype_eps(mode: str) -> None:
    """Every autocast mode's tolerance for plain SGD is a fixed fraction of its AMP dtype's epsilon."""
    bf16 = tolerance_for(mode, "cpu", "bfloat16", 20, same_libtorch=False)
    fp16 = tolerance_for(mode, "cpu", "float16", 20, same_libtorch=False)
    assert (bf16.loss_rtol, bf16.weight_rtol) == pytest.approx((2.0**-7 / 32, 2.0**-7 / 4))
    assert (fp16.loss_rtol, fp16.weight_rtol) == pytest.approx((2.0**-10 / 32, 2.0**-10))
    assert precision_for(mode, "float16") == fp16.precision == "float16"


@pytest.mark.parametrize(("precision", "kind"), list(_MEASURED_FROM_F64))
def test_tolerances_exceed_twice_the_measured_float64_distance(precision: str, kind: str) -> None:
    """Two correct runs can be as far apart as both distances from float64: the pair tolerance allows that, and one
    cell's float64 bound allows 4x its own largest measured distance, for every precision and kind of update."""
    mode, amp_dtype = _MODE_OF[precision]
    tol = tolerance_for(mode, "cpu", amp_dtype, 20, same_libtorch=False, optimizer=_OPTIMIZER_OF[kind])
    bound = float64_bound_for(mode, "cpu", amp_dtype, 20, optimizer=_OPTIMIZER_OF[kind])
    loss, weights = _MEASURED_FROM_F64[(precision, kind)]
    assert tol.precision == bound.precision == precision
    assert tol.loss_rtol >= 2 * loss and tol.weight_rtol >= 2 * weights
    assert bound.loss_rtol >= 4 * loss and bound.weight_rtol >= 4 * weights
    assert bound.loss_rtol >= tol.loss_rtol and bound.weight_rtol >= tol.weight_rtol  # one cell alone is judged no tighter


#: Planted mistakes measured at tiny's 20 steps (seed 0; smallest loss rel error / weights rel L2 over the modes of the
#: precision): Adam without its bias corrections (normalising), the clip mode without ``unscale_`` (proportional, bf16
#: and fp16), a learning rate x1.01 in float32 (every optimizer).
_PLANTED: list[tuple[str, str, str, tuple[float, float]]] = [
    ("adam without bias corrections", "bfloat16", "normalising", (3.2e-3, 3.3e-1)),
    ("adam without bias corrections", "float16", "normalising", (3.2e-3, 3.3e-1)),
    ("adam without bias corrections", "float32", "normalising", (3.3e-3, 3.3e-1)),
    ("adam without bias corrections", "bfloat16 weights", "normalising", (5.8e-3, 3.3e-1)),
    ("clip without unscale_", "bfloat16", "proportional", (8.8e-4, 2.2e-3)),
    ("clip without unscale_", "float16", "proportional", (8.8e-4, 2.2e-3)),
    ("lr x1.01", "float32", "proportional", (1.3e-5, 4.8e-5)),
    ("lr x1.01", "float32", "normalising", (7.1e-5, 2.2e-3)),
]


@pytest.mark.parametrize(("mistake", "precision", "kind", "measured"), _PLANTED, ids=[f"{p[0]}-{p[1]}" for p in _PLANTED])
def test_planted_mistakes_stay_beyond_the_float64_bound(mistake: str, precision: str, kind: str, measured: tuple[float, float]) -> None:
    """Each measured planted mistake is beyond the float64 bound of its precision and kind (in the loss or the weights)."""
    mode, amp_dtype = _MODE_OF[precision]
    bound = float64_bound_for(mode, "cpu", amp_dtype, 20, optimizer=_OPTIMIZER_OF[kind])
    assert measured[0] > bound.loss_rtol or measured[1] > bound.weight_rtol, mistake


def test_every_mode_has_a_precision_by_name_or_by_its_properties() -> None:
    """A mode's name and its Mode give the same precision: the weights modes are ``<dtype> weights``, default float32."""
    for pair in SCRIPTS.values():
        for mode in pair.modes:
            for amp_dtype in ("bfloat16", "float16"):
                assert precision_for(mode.name, amp_dtype) == precision_for(mode, amp_dtype) in PRECISIONS
    assert precision_for("lowp_weights_scaled", "float16") == "float16 weights"
    assert precision_for(mode_of("cuda_amp_grad_scaler", "default"), "float16") == "float32"
    with pytest.raises(SpecError, match="mode must be one of 'default', 'autocast', 'lowp_weights'"):
        precision_for("fp16_weights", "float16")


def test_every_optimizer_row_has_a_kind_of_update() -> None:
    """Every row of the optimizer table is proportional or normalising by its PyTorch class; the ignite rows as their class."""
    kinds = {name: update_kind(name) for name in OPTIMIZERS}
    assert set(kinds.values()) == set(UPDATE_KINDS)
    assert kinds["sgd"] == kinds["asgd"] == kinds["adagrad"] == kinds["ignite_sgd"] == "proportional"
    assert kinds["adam"] == kinds["rmsprop"] == kinds["rprop"] == kinds["ignite_adamw"] == "normalising"
    with pytest.raises(SpecError, match="optimizer must be one of 'sgd'"):
        update_kind("lamb")


def test_an_optimizer_class_without_a_measured_kind_is_refused_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new row whose PyTorch class has no measured kind gets a bound only after it is measured: the error says how."""
    monkeypatch.delitem(UPDATE_KIND_OF_CLASS, "Rprop")
    with pytest.raises(SpecError, match="measure it with tests/float64_distance.py"):
        float64_bound_for("default", "cpu", "bfloat16", 20, optimizer="rprop")


@pytest.mark.parametrize("precision", ["bfloat16", "float16", "float16 weights"])
def test_normalising_optimizers_get_a_looser_bound_where_rounding_flips_signs(precision: str) -> None:
    """In the AMP precisions a normalising update is judged more loosely than a proportional one; in float32 and
    bfloat16 weights one rule serves both."""
    mode, amp_dtype = _MODE_OF[precision]
    proportional = float64_bound_for(mode, "cpu", amp_dtype, 20, optimizer="sgd")
    normalising = float64_bound_for(mode, "cpu", amp_dtype, 20, optimizer="rmsprop")
    assert normalising.loss_rtol > proportional.loss_rtol and normalising.weight_rtol > proportional.weight_rtol
    assert "rmsprop is a normalising update" in normalising.reason
    for same in ("float32", "bfloat16 weights"):
        mode, amp_dtype = _MODE_OF[same]
        sgd, adam = (float64_bound_for(mode, "cpu", amp_dtype, 20, optimizer=o) for o in ("sgd", "adam"))
        assert (sgd.loss_rtol, sgd.weight_rtol) == (adam.loss_rtol, adam.weight_rtol)


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
    assert "rel L2 9.77e-03" in tol.describe()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("fast", "cpu", "bfloat16", 20), "mode must be one of 'default', 'autocast', .*got 'fast'"),
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
