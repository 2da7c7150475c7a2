"""The workload spec: presets, overrides, and refusals that name field, value and what is allowed."""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import pytest

from harness.contract.modes import all_mode_names
from harness.errors import SpecError, UsageError
from harness.workload.spec import FIXTURE_FIELDS, PRESETS, SizeWarning, WorkloadSpec, parse_modes


def test_presets_hold_the_seeds_workload() -> None:
    """``recipe`` is the seeds' workload and ``tiny`` a small CPU one, both resolved to concrete values."""
    recipe = WorkloadSpec.from_preset("recipe")
    assert (recipe.batch_size, recipe.in_size, recipe.out_size, recipe.num_layers) == (512, 4096, 4096, 3)
    assert (recipe.num_batches, recipe.epochs, recipe.lr) == (50, 3, 0.001)
    assert recipe.threads >= 1
    tiny = WorkloadSpec.from_preset("tiny")
    assert tiny.steps == 20 and tiny.threads == 1 and tiny.amp_dtype == "bfloat16"
    assert set(PRESETS) == {"tiny", "bench", "recipe"}


def test_amp_dtype_defaults_follow_the_device() -> None:
    """bf16 is the CPU default and fp16 the CUDA one; aliases resolve to the full name."""
    assert WorkloadSpec.from_preset("tiny", device="cuda").amp_dtype == "float16"
    assert WorkloadSpec.from_preset("tiny", amp_dtype="fp16").amp_dtype == "float16"


@pytest.mark.parametrize(
    ("overrides", "field", "allowed"),
    [
        ({"batch_size": 0}, "batch_size", "a whole number >= 1"),
        ({"in_size": -8}, "in_size", "a whole number >= 1"),
        ({"num_layers": 2.5}, "num_layers", "a whole number >= 1"),
        ({"epochs": True}, "epochs", "a whole number >= 1"),
        ({"lr": float("nan")}, "lr", "a finite number > 0"),
        ({"lr": -0.1}, "lr", "a finite number > 0"),
        ({"lr": float("inf")}, "lr", "a finite number > 0"),
        ({"device": "tpu"}, "device", "one of 'cpu', 'cuda'"),
        ({"amp_dtype": "int8"}, "amp_dtype", "one of 'bfloat16', 'float16'"),
        ({"growth_factor": 1.0}, "growth_factor", "greater than 1"),
        ({"backoff_factor": 1.5}, "backoff_factor", "between 0 and 1"),
        ({"threads": -1}, "threads", "a whole number >= 0"),
        ({"overflow_steps": [3, 20]}, "overflow_steps", "whole step numbers from 0 to 19 (0-based: this run has 20 steps)"),
        ({"overflow_steps": [-1]}, "overflow_steps", "whole step numbers from 0 to 19"),
        ({"overflow_steps": [7, 3]}, "overflow_steps", "increasing order, each once"),
        ({"overflow_steps": [3, 3]}, "overflow_steps", "increasing order, each once"),
        ({"overflow_steps": [True]}, "overflow_steps", "whole step numbers from 0 to 19"),
        ({"overflow_steps": [2.5]}, "overflow_steps", "whole step numbers from 0 to 19"),
        ({"overflow_steps": "3,7"}, "overflow_steps", "a list of step numbers"),
        ({"static_loss_scale": 0.0}, "static_loss_scale", "a finite number > 0"),
        ({"static_loss_scale": float("inf")}, "static_loss_scale", "a finite number > 0"),
    ],
)
def test_invalid_values_are_refused_with_field_value_and_allowed(overrides: dict[str, object], field: str, allowed: str) -> None:
    """Each invalid value raises a SpecError naming the field, the value and what is allowed."""
    with pytest.raises(SpecError) as info:
        WorkloadSpec.from_preset("tiny", **overrides)
    assert info.value.field == field
    assert allowed in str(info.value)
    assert repr(next(iter(overrides.values()))) in str(info.value)


def test_unknown_preset_and_field_are_refused() -> None:
    """Unknown presets and field names are errors listing what exists."""
    with pytest.raises(SpecError, match="preset must be one of 'tiny', 'bench', 'recipe', got 'huge'"):
        WorkloadSpec.from_preset("huge")
    with pytest.raises(SpecError, match="field must be one of .*'batch_size'.*got 'batchsize'"):
        WorkloadSpec.from_preset("tiny", batchsize=4)


def test_absurd_sizes_are_refused_before_allocating_with_the_estimate() -> None:
    """A spec whose fixtures cannot fit in memory is refused with its size estimate in GiB."""
    with pytest.raises(SpecError, match=r"GiB of fixtures") as info:
        WorkloadSpec.from_preset("tiny", batch_size=1_000_000, in_size=100_000)
    assert "lower --batch-size" in str(info.value)


def test_sizes_off_multiples_of_8_warn_but_run() -> None:
    """A batch size of 30 is accepted with a warning about tensor cores."""
    with pytest.warns(SizeWarning, match="batch_size=30 not a multiple of 8"):
        spec = WorkloadSpec.from_preset("tiny", batch_size=30)
    assert spec.batch_size == 30


def test_digest_is_stable_and_sensitive() -> None:
    """The same spec hashes the same; any field change changes the hash."""
    a, b = WorkloadSpec.from_preset("tiny"), WorkloadSpec.from_preset("tiny")
    assert a.digest() == b.digest()
    assert a.digest() != a.replace(lr=0.01).digest()
    assert a.digest(("seed",)) != a.replace(seed=1).digest(("seed",))


def test_overflow_steps_leave_the_digest_of_specs_without_them_unchanged() -> None:
    """The field came later: a spec without injection keeps the digest from before it (tiny's, and any stored spec that
    lacks the field: it ran without injection, whatever the presets do now), and only a spec that injects gets another."""
    tiny = WorkloadSpec.from_preset("tiny", overflow_steps=())
    assert tiny.overflow_steps == () and tiny.digest() == "ec001894fdb3196b"
    stored = {k: v for k, v in tiny.to_json().items() if k != "overflow_steps"}
    assert WorkloadSpec.from_json(stored).overflow_steps == () and WorkloadSpec.from_json(stored).digest() == tiny.digest()
    injected = WorkloadSpec.from_json({"preset": "tiny", "overflow_steps": [3, 7]})
    assert injected.overflow_steps == (3, 7) and injected.digest() != tiny.digest()
    assert injected.digest(FIXTURE_FIELDS) == tiny.digest(FIXTURE_FIELDS)  # same fixtures
    assert injected.to_json()["overflow_steps"] == [3, 7]


@pytest.mark.parametrize(("preset", "step"), [("tiny", 9), ("bench", 24), ("recipe", 74)])
def test_every_preset_injects_one_overflow_at_its_middle_step(preset: str, step: int) -> None:
    """Issue 37 (3): without a flag, every scaler cell skips one step and backs off (bf16 on CPU never overflows by
    itself), so a change to backoff or skip is seen in the main job; the step follows the run's length."""
    assert WorkloadSpec.from_preset(preset, device="cpu").overflow_steps == (step,)
    assert WorkloadSpec.from_preset("tiny", epochs=1).overflow_steps == (4,)


#: Each preset's digest before the optimizer axis (``spec_digest`` of the results under docs/results/ and tests/data/).
_DIGESTS = {"tiny": "ec001894fdb3196b", "bench": "fdd45ef091b37f20", "recipe": "ad34195013195b22"}


@pytest.mark.parametrize("preset", list(_DIGESTS))
def test_optimizer_args_and_static_loss_scale_leave_the_digest_unchanged_at_their_defaults(preset: str) -> None:
    """``optimizer_args`` (empty) and ``static_loss_scale`` (1024) came with the optimizer axis: at their defaults every preset's
    digest is the one its stored results carry; any other value gives another digest, and the fixtures stay the same."""
    spec = WorkloadSpec.from_preset(preset, device="cpu", overflow_steps=())
    assert spec.optimizer_args == {} and spec.static_loss_scale == 1024.0
    assert spec.digest() == _DIGESTS[preset]
    for changed in (spec.replace(optimizer_args={"adam": {"eps": 1e-6}}), spec.replace(static_loss_scale=128.0)):
        assert changed.digest() != spec.digest() and changed.digest(FIXTURE_FIELDS) == spec.digest(FIXTURE_FIELDS)
    assert spec.replace(optimizer_args={"adam": {"eps": 1e-6}}).digest() != spec.replace(optimizer_args={"adam": {"eps": 1e-7}}).digest()


def test_the_golden_spec_keeps_its_stored_digest() -> None:
    """The golden result's spec (stored before the optimizer axis, in schema 7) hashes to the digest stored beside it."""
    from tests.support import GOLDEN_RESULT

    stored = json.loads(GOLDEN_RESULT.read_text(encoding="utf-8"))
    assert WorkloadSpec.from_json(stored["spec"]).digest() == stored["spec_digest"] == "af6db19d3ad1d7cb"


def test_optimizer_args_round_trip_through_plain_data_with_pairs_as_lists() -> None:
    """A spec's optimizer_args are checked on construction (pairs become tuples) and written back as JSON lists."""
    args = {"adam_amsgrad": {"betas": [0.8, 0.99], "amsgrad": False, "eps": 1}}
    spec = WorkloadSpec.from_json({"preset": "tiny", "optimizer_args": args})
    assert spec.optimizer_args == {"adam_amsgrad": {"betas": (0.8, 0.99), "amsgrad": False, "eps": 1.0}}
    data = json.loads(json.dumps(spec.to_json()))
    assert data["optimizer_args"] == {"adam_amsgrad": {"betas": [0.8, 0.99], "amsgrad": False, "eps": 1.0}}
    assert WorkloadSpec.from_json(data) == spec

def test_round_trip_through_plain_data() -> None:
    """A spec written as JSON and read back is equal, resolved values included."""
    spec = WorkloadSpec.from_preset("recipe", device="cpu", lr=0.01)
    again = WorkloadSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec


def test_modes_parse_in_matrix_order_and_refuse_unknown() -> None:
    """Comma-separated and repeated modes come back in matrix order; an unknown one is refused."""
    assert parse_modes(["autocast,default"]) == ("default", "autocast")
    assert parse_modes(None) == all_mode_names()
    every = "'default', 'autocast', 'lowp_weights', 'lowp_weights_scaled', 'autocast_scaler', 'autocast_scaler_clip'"
    with pytest.raises(UsageError, match=f"mode must be one of {every}, got 'fast'"):
        parse_modes(["default,fast"])


def test_valid_presets_do_not_warn() -> None:
    """The presets use tensor-core-friendly sizes, so building them is silent."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WorkloadSpec.from_preset("tiny")
        WorkloadSpec.from_preset("recipe")


def test_empty_mode_list_is_refused_not_an_empty_matrix() -> None:
    """``--mode ""`` or ``--mode ,`` names no mode: refused, where it used to run zero cells."""
    for values in ([""], [","], [" , "]):
        with pytest.raises(UsageError, match="mode must be one or more of 'default', 'autocast'"):
            parse_modes(values)


@pytest.mark.parametrize(
    ("field", "value"),
    [("amp_dtype", ["bf16"]), ("amp_dtype", {"x": 1}), ("device", ["cpu"]), ("device", 0), ("preset", ["tiny"]),
     ("lr", "0.1"), ("lr", None), ("init_scale", [1.0]), ("growth_interval", 2.0), ("threads", "2")],
)
def test_every_wrong_json_type_is_a_spec_error(field: str, value: object) -> None:
    """A spec (file) field holding another JSON type is a SpecError naming it, never a TypeError."""
    data = {**WorkloadSpec.from_preset("tiny").to_json(), field: value}
    if value is None:  # null means "the preset's value" for an override; in a stored spec it must be refused
        with pytest.raises(SpecError, match=f"^{field} must be"):
            WorkloadSpec(**data)
        return
    with pytest.raises(SpecError, match=f"^{field} must be"):
        WorkloadSpec.from_json(data)


@pytest.mark.parametrize("field", ["lr", "init_scale", "growth_factor", "clip_max_norm", "static_loss_scale"])
@pytest.mark.parametrize("value", [1e308, 3.5e38, 1e-39])
def test_floats_a_float32_cannot_hold_are_refused(field: str, value: float) -> None:
    """Every float field becomes a float32 in the scripts: beyond its range (or subnormal) it is refused up front."""
    with pytest.raises(SpecError, match=f"^{field} must be a number a float32 holds, from 1.175e-38 to 3.403e\\+38"):
        WorkloadSpec.from_preset("tiny", **{field: value})
    WorkloadSpec.from_preset("tiny", **{field: 3.0e38 if field != "backoff_factor" else 0.5})  # the edge still fits


def test_whole_numbers_beyond_r_integers_are_refused() -> None:
    """Sizes, threads and the growth interval reach R as 32-bit integers: 2**31 is refused, 2**31 - 1 is not (interval)."""
    with pytest.raises(SpecError, match=r"growth_interval must be a whole number from 1 to 2147483647 \(R's largest integer\)"):
        WorkloadSpec.from_preset("tiny", growth_interval=2**31)
    assert WorkloadSpec.from_preset("tiny", growth_interval=2**31 - 1).growth_interval == 2**31 - 1


@pytest.mark.parametrize(("args", "field", "expected"), [
    ({"sgd": {"lr": 1e40}}, "optimizer_args.sgd.lr", "a number a float32 holds"),
    ({"sgd": {"lr": 0}}, "optimizer_args.sgd.lr", "a finite number > 0"),
    ({"adam": {"eps": 1e-45}}, "optimizer_args.adam.eps", "a number a float32 holds"),
    ({"adam": {"betas": [0.9, 1e39]}}, "optimizer_args.adam.betas", "a number a float32 holds"),
])
def test_optimizer_args_get_the_range_checks_of_the_specs_own_numbers(args: dict[str, Any], field: str, expected: str) -> None:
    """Issue 37 (11): ``--optimizer-arg sgd.lr=1e40`` is refused as ``--lr 1e40`` is, naming the argument; a zero where the
    row allows it (no weight decay) is not."""
    with pytest.raises(SpecError) as refused:
        WorkloadSpec.from_preset("tiny", optimizer_args=args)
    assert field in str(refused.value) and expected in str(refused.value)
    assert WorkloadSpec.from_preset("tiny", optimizer_args={"sgd_momentum": {"weight_decay": 0}}).optimizer_args


def test_lr_of_1e40_is_refused_alike() -> None:
    with pytest.raises(SpecError, match="a number a float32 holds"):
        WorkloadSpec.from_preset("tiny", lr=1e40)


def _args_of_kind(whole: bool) -> list[tuple[str, str]]:
    from harness.workload.optimizers import OPTIMIZERS

    return [(o.name, arg) for o in OPTIMIZERS.values() for arg, v in o.args.items()
            if not isinstance(v, (bool, str, tuple)) and isinstance(v, int) is whole]


@pytest.mark.parametrize("value", [1e300, 1e30, 2.0**31, -1, 2.5, math.inf])
@pytest.mark.parametrize(("optimizer", "arg"), _args_of_kind(whole=True))
def test_a_whole_number_argument_is_refused_with_the_whole_number_range(optimizer: str, arg: str, value: float) -> None:
    """Issue 48 (9): ``asgd.t0=1e300`` was refused with the float32 range and a 301-digit number (435 characters). Every
    whole-number argument gets R's integers' range whatever the value, shown as given."""
    with pytest.raises(SpecError) as refused:
        WorkloadSpec.from_preset("tiny", optimizer_args={optimizer: {arg: value}})
    message = str(refused.value)
    assert message == f"optimizer_args.{optimizer}.{arg} must be a whole number from 0 to 2147483647 (R's largest integer), got {value!r}."
    assert WorkloadSpec.from_preset("tiny", optimizer_args={optimizer: {arg: 2**31 - 1}}).optimizer_args[optimizer][arg] == 2**31 - 1


@pytest.mark.parametrize("value", [1e300, 1e39])
@pytest.mark.parametrize(("optimizer", "arg"), _args_of_kind(whole=False))
def test_a_float_argument_is_refused_with_the_float32_range(optimizer: str, arg: str, value: float) -> None:
    """The other kind: every float argument gets float32's range, never the whole numbers'."""
    with pytest.raises(SpecError) as refused:
        WorkloadSpec.from_preset("tiny", optimizer_args={optimizer: {arg: value}})
    message = str(refused.value)
    assert message.startswith(f"optimizer_args.{optimizer}.{arg} must be a number a float32 holds, ")
    assert message.endswith(f"got {value!r}.")


def test_a_whole_number_too_long_to_read_is_shown_in_scientific_notation() -> None:
    """A spec file's ``growth_interval: 10**300`` names the range and the number in one short line."""
    with pytest.raises(SpecError) as refused:
        WorkloadSpec.from_preset("tiny", growth_interval=10**300)
    assert str(refused.value) == "growth_interval must be a whole number from 1 to 2147483647 (R's largest integer), got 1.000e+300."
    with pytest.raises(SpecError) as written_as_float:  # a spec file's 1e300: the same range, not ">= 1"
        WorkloadSpec.from_preset("tiny", growth_interval=1e300)
    assert str(written_as_float.value) == "growth_interval must be a whole number from 1 to 2147483647 (R's largest integer), got 1e+300."
