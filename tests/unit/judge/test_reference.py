"""The float64 reference: checked against torch autograd in float64, an independent implementation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.judge.reference import REFERENCE_MAX_FLOPS, reference_skip_reason, run_reference
from harness.model.efficiency import workload_flops
from harness.workload.fixtures import ensure_fixtures, load_fixture_arrays
from harness.workload.spec import WorkloadSpec


def _autograd_reference(
    spec: WorkloadSpec, arrays: dict[str, np.ndarray], clip: bool, skipped: frozenset[int] = frozenset()
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    layers: list[torch.nn.Module] = []
    for k, (out_f, in_f) in enumerate(spec.layer_shapes):
        linear = torch.nn.Linear(in_f, out_f, dtype=torch.float64)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(arrays[f"layer{k}.weight"]))
            linear.bias.copy_(torch.from_numpy(arrays[f"layer{k}.bias"]))
        layers += [linear, torch.nn.ReLU()]
    net = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(net.parameters(), lr=spec.lr)
    data, targets = torch.from_numpy(arrays["data"]).double(), torch.from_numpy(arrays["targets"]).double()
    losses = []
    for _ in range(spec.epochs):
        for i in range(spec.num_batches):
            loss = torch.nn.functional.mse_loss(net(data[i]), targets[i])
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=spec.clip_max_norm)
            if len(losses) not in skipped:  # a skipped step: GradScaler.step does not call opt.step()
                opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    weights = {f"layer{k}.weight": m.weight.detach().numpy() for k, m in enumerate(linears)}
    weights |= {f"layer{k}.bias": m.bias.detach().numpy() for k, m in enumerate(linears)}
    return np.array(losses), weights


@pytest.mark.parametrize("clip", [False, True], ids=["plain", "clipped"])
def test_reference_matches_float64_autograd(tmp_path_factory: pytest.TempPathFactory, clip: bool) -> None:
    """Hand-written forward/backward/clip/SGD equals torch float64 autograd to 1e-12."""
    spec = WorkloadSpec.from_preset("tiny", num_batches=4)
    arrays = load_fixture_arrays(ensure_fixtures(spec, tmp_path_factory.mktemp("fx")))
    ref = run_reference(spec, arrays, clip=clip)
    losses, weights = _autograd_reference(spec, arrays, clip)
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
    losses, weights = _autograd_reference(spec, arrays, clip, skipped)
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
