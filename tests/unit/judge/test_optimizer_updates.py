"""The float64 optimizer updates: each row of the table against torch.optim's own optimizer run in float64."""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest
import torch

from harness.judge import optimizer_updates
from harness.judge.optimizer_updates import UPDATES, Adam, make_update
from harness.judge.reference import Reference, run_reference
from harness.workload.fixtures import ensure_fixtures, load_fixture_arrays
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import WorkloadSpec
from tests.torch_float64 import torch_float64_run

#: Agreement asked of two float64 implementations of one algorithm over tiny's 20 steps: they differ only in the
#: order of float64 roundings (2^-53 ≈ 1.1e-16 each), which 20 steps grow to ~1e-14 at most (measured below 3e-14).
_RTOL = 1e-12
#: A gradient that an adaptive optimizer normalises can be 0 in one implementation and 1e-30 in the other (a sum that
#: cancels), so weights are compared with an absolute floor far below the weights' own scale (about 0.1).
_ATOL = 1e-13

_SPEC = WorkloadSpec.from_preset("tiny")


@pytest.fixture(scope="module")
def arrays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """The tiny preset's fixtures."""
    return load_fixture_arrays(ensure_fixtures(_SPEC, tmp_path_factory.mktemp("fx")))


@pytest.fixture
def float64_default() -> Iterator[None]:
    """torch's default dtype float64 for one test: ASGD then keeps its eta and mu in float64 too (``_get_scalar_dtype``)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def largest_difference(
    spec: WorkloadSpec, arrays: Mapping[str, np.ndarray], name: str, clip: bool = False, skipped: frozenset[int] = frozenset(),
    **torch_side: Any,
) -> tuple[float, float]:
    """The reference's largest relative loss difference and final-weights relative L2 difference from torch float64."""
    ref = run_reference(spec, dict(arrays), clip=clip, skipped=skipped, optimizer=name)
    losses, weights = torch_float64_run(spec, arrays, name, clip, skipped, **torch_side)
    loss_diff = float(np.max(np.abs(ref.losses - losses) / np.abs(losses)))
    num = sum(float(np.sum((ref.weights[k] - w) ** 2)) for k, w in weights.items())
    den = sum(float(np.sum(w * w)) for w in weights.values())
    return loss_diff, float(np.sqrt(num / den))


_REFERENCES: dict[tuple[str, str, bool, frozenset[int]], Reference] = {}


def _reference(spec: WorkloadSpec, arrays: Mapping[str, np.ndarray], name: str, clip: bool, skipped: frozenset[int]) -> Reference:
    """``run_reference`` once per row, clipping and skipped steps in this module (of the module's one spec and fixtures):
    a row's plain reference is what both its comparison and its skipped-step test read. Read-only to its readers."""
    key = (spec.digest(), name, clip, skipped)
    if key not in _REFERENCES:
        _REFERENCES[key] = run_reference(spec, dict(arrays), clip=clip, skipped=skipped, optimizer=name)
    return _REFERENCES[key]


def assert_matches_torch(
    spec: WorkloadSpec, arrays: Mapping[str, np.ndarray], name: str, clip: bool = False, skipped: frozenset[int] = frozenset()
) -> Reference:
    """Every loss and every final weight of the reference equals torch float64's to ``_RTOL``; the reference, for a test's
    further checks (computed once: a row's tests cost what the row needs)."""
    ref = _reference(spec, arrays, name, clip, skipped)
    losses, weights = torch_float64_run(spec, arrays, name, clip, skipped)
    np.testing.assert_allclose(ref.losses, losses, rtol=_RTOL)
    for key, value in weights.items():
        np.testing.assert_allclose(ref.weights[key], value, rtol=_RTOL, atol=_ATOL, err_msg=key)
    assert not np.allclose(ref.weights["layer0.weight"], arrays["layer0.weight"], rtol=1e-6, atol=0)  # it really trained
    return ref


@pytest.mark.usefixtures("float64_default")
@pytest.mark.parametrize("clip", [False, True], ids=["plain", "clipped"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_every_row_matches_torch_optim_in_float64(arrays: dict[str, np.ndarray], name: str, clip: bool) -> None:
    """Each row's NumPy update equals torch.optim's own class with the row's arguments, float64, over tiny's 20 steps
    (clipped: clip_grad_norm_ on the raw gradients, then the step adds weight decay, as PyTorch orders them)."""
    assert_matches_torch(_SPEC, arrays, name, clip)


@pytest.mark.usefixtures("float64_default")
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_skipped_steps_leave_the_optimizer_untouched(arrays: dict[str, np.ndarray], name: str) -> None:
    """Steps 1, 4 and 5 skipped (as a scaler skips them: no ``opt.step()``): the state and step count do not move, so the
    reference still equals torch, and differs from the run that took those steps."""
    skipped = frozenset({1, 4, 5})
    replayed = assert_matches_torch(_SPEC, arrays, name, skipped=skipped)
    taken = _reference(_SPEC, arrays, name, False, frozenset())
    assert replayed.losses[1] == taken.losses[1] and replayed.losses[2] != taken.losses[2]


def test_a_skipped_step_is_no_call_of_the_update() -> None:
    """The update's state is created and advanced by ``step`` alone: what run_reference does not call stays as it was."""
    update = make_update("adam_amsgrad", _SPEC.lr)
    param, grad = np.array([1.0, -2.0]), np.array([0.5, 0.25])
    update.step([param], [grad])
    before = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in update.state[0].items()}
    update.step([param], [grad])
    assert before["step"] == 1.0 and update.state[0]["step"] == 2.0
    assert not np.array_equal(before["exp_avg"], update.state[0]["exp_avg"])


@pytest.mark.usefixtures("float64_default")
def test_weight_decay_is_added_after_clipping(arrays: dict[str, np.ndarray]) -> None:
    """A torch run that folds the weight decay into the gradient before clipping (the wrong order) is 1e-4 away from the
    reference, 10^8 times what the right order leaves: the clipped comparison above would catch the wrong order."""
    wd = OPTIMIZERS["sgd_momentum"].args["weight_decay"]

    def decay_first(net: torch.nn.Module) -> None:
        for p in net.parameters():
            assert p.grad is not None
            p.grad.add_(p.detach(), alpha=wd)

    right = largest_difference(_SPEC, arrays, "sgd_momentum", clip=True)
    wrong = largest_difference(_SPEC, arrays, "sgd_momentum", clip=True, overrides={"weight_decay": 0.0}, grad_hook=decay_first)
    assert max(right) < _RTOL and min(wrong) > 1e-5


def _adam_without_bias_correction(self: Adam, param: np.ndarray, grad: np.ndarray, state: dict[str, Any]) -> None:
    """Adam's step with the second moment's bias correction left out: a planted mistake."""
    (beta1, beta2), eps, lr = self.args["betas"], self.args["eps"], self.args["lr"]
    state["step"] += 1
    g = grad + self.args["weight_decay"] * param
    state["exp_avg"] = m = beta1 * state["exp_avg"] + (1 - beta1) * g
    state["exp_avg_sq"] = v = beta2 * state["exp_avg_sq"] + (1 - beta2) * g * g
    param -= lr * m / (1 - beta1 ** state["step"]) / (np.sqrt(v) + eps)


@pytest.mark.usefixtures("float64_default")
def test_a_planted_change_is_caught_by_the_comparison(arrays: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    """Adam without the second moment's bias correction, or any row's lr x1.01, is far beyond the 1e-12 agreement."""
    monkeypatch.setattr(optimizer_updates.Adam, "update", _adam_without_bias_correction)
    assert min(largest_difference(_SPEC, arrays, "adam")) > 1e-4
    monkeypatch.undo()
    assert max(largest_difference(_SPEC, arrays, "adam")) < _RTOL
    for name in ("sgd", "asgd", "rprop"):
        lr = OPTIMIZERS[name].resolved_args(_SPEC.lr)["lr"]
        assert isinstance(lr, float)
        loss_diff, weights_diff = largest_difference(_SPEC, arrays, name, overrides={"lr": 1.01 * lr})
        assert loss_diff > 1e-6 and weights_diff > 1e-6, name


@pytest.mark.usefixtures("float64_default")
def test_the_specs_optimizer_args_reach_the_reference(arrays: dict[str, np.ndarray]) -> None:
    """A spec's ``optimizer_args`` (read with getattr until the field exists) change the reference as they change torch's."""
    spec = WorkloadSpec.from_preset("tiny", num_batches=5)
    object.__setattr__(spec, "optimizer_args", {"adam": {"eps": 1e-3, "amsgrad": True}})
    ref = run_reference(spec, dict(arrays), clip=False, optimizer="adam")
    losses, weights = torch_float64_run(spec, arrays, "adam", overrides={"eps": 1e-3, "amsgrad": True})
    np.testing.assert_allclose(ref.losses, losses, rtol=_RTOL)
    np.testing.assert_allclose(ref.weights["layer2.weight"], weights["layer2.weight"], rtol=_RTOL, atol=_ATOL)
    plain = run_reference(WorkloadSpec.from_preset("tiny", num_batches=5), dict(arrays), clip=False, optimizer="adam")
    assert not np.allclose(plain.weights["layer2.weight"], ref.weights["layer2.weight"], rtol=1e-6, atol=0)


@pytest.mark.parametrize("python", sorted(UPDATES))
def test_defaults_are_pytorchs(python: str) -> None:
    """An argument a row leaves out takes the default of PyTorch's constructor (read from its signature, not guessed)."""
    signature = inspect.signature(getattr(torch.optim, python).__init__).parameters
    for arg, value in UPDATES[python].DEFAULTS.items():
        default = signature["lambd" if arg == "lambda" else arg].default
        assert (tuple(default) if isinstance(default, (tuple, list)) else default) == value, arg


def test_every_row_has_an_update_and_unknowns_are_refused() -> None:
    """Each table row builds its update with all its arguments known; an unknown name or argument is one clear error."""
    for name, row in OPTIMIZERS.items():
        assert type(make_update(name, 0.05)).python == row.python
    with pytest.raises(ValueError, match="unknown optimizer 'lamb'"):
        make_update("lamb", 0.05)
    with pytest.raises(ValueError, match="Adam's float64 update has no argument 'foreach'"):
        make_update("adam", 0.05, {"foreach": True})

