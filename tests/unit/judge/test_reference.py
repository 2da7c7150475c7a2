"""The float64 reference: checked against torch autograd in float64, an independent implementation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.judge.reference import REFERENCE_MAX_FLOPS, Reference, reference_skip_reason, run_reference, zero_grad_default_zeroes
from harness.model.efficiency import workload_flops
from harness.model.result import ReferenceSummary
from harness.workload.features import FEATURES
from harness.workload.fixtures import ensure_fixtures, load_fixture_arrays
from harness.workload.spec import WorkloadSpec
from tests.torch_float64 import torch_float64_run


@pytest.mark.parametrize("clip", [False, True], ids=["plain", "clipped"])
def test_reference_matches_float64_autograd(tmp_path_factory: pytest.TempPathFactory, clip: bool) -> None:
    """Hand-written forward/backward/clip/SGD equals torch float64 autograd to 1e-12."""
    spec = WorkloadSpec.from_preset("tiny", num_batches=4)
    arrays = load_fixture_arrays(ensure_fixtures(spec, tmp_path_factory.mktemp("fx")))
    ref = run_reference(spec, arrays, clip=clip)
    losses, weights = torch_float64_run(spec, arrays, "sgd", clip)
    np.testing.assert_allclose(ref.losses, losses, rtol=1e-12)
    for name, value in weights.items():
        np.testing.assert_allclose(ref.weights[name], value, rtol=1e-10, atol=1e-14)
    assert not np.allclose(ref.weights["layer0.weight"], arrays["layer0.weight"])  # it really trained


@pytest.mark.parametrize("clip", [False, True], ids=["plain", "clipped"])
def test_reference_replays_skipped_steps_as_autograd_does(tmp_path_factory: pytest.TempPathFactory, clip: bool) -> None:
    """Skipped steps 1 and 4: losses still recorded there, no update, equal to float64 autograd that skips the same steps."""
    spec = WorkloadSpec.from_preset("tiny", num_batches=6)
    arrays = load_fixture_arrays(ensure_fixtures(spec, tmp_path_factory.mktemp("fx")))
    skipped = frozenset({1, 4})
    ref = run_reference(spec, arrays, clip=clip, skipped=skipped)
    losses, weights = torch_float64_run(spec, arrays, "sgd", clip, skipped)
    np.testing.assert_allclose(ref.losses, losses, rtol=1e-12)
    for name, value in weights.items():
        np.testing.assert_allclose(ref.weights[name], value, rtol=1e-10, atol=1e-14)
    plain = run_reference(spec, arrays, clip=clip)
    assert ref.losses[1] == plain.losses[1] and ref.losses[2] != plain.losses[2]  # the skip shows from the next step


def test_reference_budget_skips_recipe_with_a_reason() -> None:
    """The recipe preset is over the float64 budget and says so; tiny is under it."""
    assert workload_flops(WorkloadSpec.from_preset("tiny")) < REFERENCE_MAX_FLOPS
    reason = reference_skip_reason(WorkloadSpec.from_preset("recipe"))
    assert reason is not None and "float64 reference skipped" in reason and "FLOPs" in reason
    assert reference_skip_reason(WorkloadSpec.from_preset("tiny")) is None


@pytest.fixture(scope="module")
def tiny_plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[WorkloadSpec, dict[str, np.ndarray], dict[str, Reference]]:
    """tiny's fixtures and the plain loop's reference of each optimizer the feature test uses, made once for the module:
    a new feature row then costs its own reference and its torch run, not the fixtures and two plain references again."""
    spec = WorkloadSpec.from_preset("tiny")
    arrays = load_fixture_arrays(ensure_fixtures(spec, tmp_path_factory.mktemp("fx")))
    return spec, arrays, {name: run_reference(spec, arrays, clip=False, optimizer=name) for name in _FEATURE_OPTIMIZERS}


_FEATURE_OPTIMIZERS = ("sgd", "adam")


@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("optimizer", _FEATURE_OPTIMIZERS)
def test_reference_follows_each_loop_feature_as_torch_does(
    tiny_plain: tuple[WorkloadSpec, dict[str, np.ndarray], dict[str, Reference]], feature: str, optimizer: str
) -> None:
    """Each loop feature's float64 reference equals torch float64 autograd with PyTorch's own scheduler, accumulation
    or clip_grad_value_, and differs from the plain loop's (the feature acts within tiny's steps), but for a custom
    autograd function, which computes what the layer computes."""
    spec, arrays, plains = tiny_plain
    ref = run_reference(spec, arrays, clip=False, optimizer=optimizer, feature=feature)
    losses, weights = torch_float64_run(spec, arrays, optimizer, feature=feature)
    np.testing.assert_allclose(ref.losses, losses, rtol=1e-10)
    for name, value in weights.items():
        np.testing.assert_allclose(ref.weights[name], value, rtol=1e-8, atol=1e-13)
    plain = plains[optimizer]
    row = FEATURES[feature]
    if row.kind == "resume" and not row.scheduler:  # a resumed run's arithmetic is the uninterrupted run's, exactly
        assert all(np.array_equal(ref.weights[name], plain.weights[name]) for name in plain.weights)
        return
    same = np.allclose(ref.weights["layer0.weight"], plain.weights["layer0.weight"], rtol=1e-6, atol=0)
    # a custom autograd function computes a Linear layer's own arithmetic: only its rounding under autocast may differ
    assert same if row.kind == "custom_function" else not same


def test_the_biases_decay_where_the_optimizer_is_given_a_weight_decay_of_0(
    tiny_plain: tuple[WorkloadSpec, dict[str, np.ndarray], dict[str, Reference]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search drew plain SGD ``weight_decay`` 0 and the biases' group 0.0625 (seed 54): both scripts give the biases
    that decay (the optimizer is given a weight decay), and the reference gave them none, reading the row, which sets
    none. Now it reads the arguments the run was given, as torch float64 does; and the biases part from a run without it."""
    spec, arrays, _ = tiny_plain
    drawn = dataclasses.replace(spec, optimizer_args={"sgd": {"weight_decay": 0.0}})
    monkeypatch.setitem(FEATURES, "param_groups", dataclasses.replace(
        FEATURES["param_groups"], args={**FEATURES["param_groups"].args, "bias_weight_decay": 0.0625}))
    ref = run_reference(drawn, arrays, clip=False, optimizer="sgd", feature="param_groups")
    losses, weights = torch_float64_run(drawn, arrays, "sgd", overrides={"weight_decay": 0.0}, feature="param_groups")
    np.testing.assert_allclose(ref.losses, losses, rtol=1e-10)
    for name, value in weights.items():
        np.testing.assert_allclose(ref.weights[name], value, rtol=1e-8, atol=1e-13)
    undecayed = run_reference(spec, arrays, clip=False, optimizer="sgd", feature="param_groups")  # the row's: no weight decay
    assert not np.allclose(ref.weights["layer0.bias"], undecayed.weights["layer0.bias"], rtol=1e-9, atol=0)


def test_an_accumulated_skip_replays_the_group_update(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Under accumulation a skipped step is the last micro-batch of its group: that group's update is not made."""
    spec = WorkloadSpec.from_preset("tiny", num_batches=4)
    arrays = load_fixture_arrays(ensure_fixtures(spec, tmp_path_factory.mktemp("fx")))
    ref = run_reference(spec, arrays, clip=False, skipped=frozenset({3}), feature="accumulate")
    losses, weights = torch_float64_run(spec, arrays, "sgd", skipped=frozenset({3}), feature="accumulate")
    np.testing.assert_allclose(ref.losses, losses, rtol=1e-12)
    np.testing.assert_allclose(ref.weights["layer2.bias"], weights["layer2.bias"], rtol=1e-10, atol=1e-14)


def test_a_loop_at_each_bindings_zero_grad_default_is_judged_against_that_bindings_default(
    tiny_plain: tuple[WorkloadSpec, dict[str, np.ndarray], dict[str, Reference]],
) -> None:
    """sometimes_used_default calls zero_grad() with no argument: an R-code optimizer's R cell steps the unused layer on
    zero (R torch's set_to_none = FALSE, the loop of sometimes_used_zeros), PyTorch's and an ignite optimizer's skip it (the
    loop of sometimes_used); the result keeps the two trajectories apart (the search's seed 0 found R's cell judged
    against PyTorch's default)."""
    assert zero_grad_default_zeroes("r", "sgd_momentum", "sometimes_used_default")
    assert not zero_grad_default_zeroes("python", "sgd_momentum", "sometimes_used_default")
    assert not zero_grad_default_zeroes("r", "ignite_sgd", "sometimes_used_default")
    assert not zero_grad_default_zeroes("r", "sgd_momentum", "sometimes_used")
    spec, arrays, _ = tiny_plain
    runs = {(feature, zeroes): run_reference(spec, arrays, clip=False, optimizer="sgd_momentum", feature=feature, default_zeroes=zeroes)
            for feature, zeroes in (("sometimes_used_default", True), ("sometimes_used_default", False),
                                    ("sometimes_used_zeros", False), ("sometimes_used", False))}
    r, python = runs["sometimes_used_default", True], runs["sometimes_used_default", False]
    assert np.array_equal(r.losses, runs["sometimes_used_zeros", False].losses)
    assert np.array_equal(python.losses, runs["sometimes_used", False].losses)
    assert not np.array_equal(r.weights["layer1.weight"], python.weights["layer1.weight"])
    stored = ReferenceSummary(True, None, tuple(
        {"optimizer": "sgd_momentum", "clip": False, "skipped_steps": [], "losses": ref.losses.tolist(),
         "feature": "sometimes_used_default", **({"zero_grad_zeroes": True} if zeroes else {})}
        for (_, zeroes), ref in list(runs.items())[:2]))
    assert stored.losses_for("sgd_momentum", False, (), "sometimes_used_default", zero_grad_zeroes=True) == tuple(r.losses.tolist())
    assert stored.losses_for("sgd_momentum", False, (), "sometimes_used_default") == tuple(python.losses.tolist())
