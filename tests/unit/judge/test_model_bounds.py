"""A model's own check under autocast: the MLP's float64 bound times the model row's measured factor, said in the bound's
reason; float32 and the low-precision-weights modes keep the MLP's bound (measured within it for every model)."""

from __future__ import annotations

from harness.contract.modes import SCRIPTS
from harness.judge.cells import bound_for_model
from harness.judge.tolerances import float64_bound_for
from harness.workload.spec import WorkloadSpec


def test_a_models_autocast_bound_is_the_mlps_times_its_measured_factor() -> None:
    spec = WorkloadSpec.from_preset("tiny")
    autocast, lowp = SCRIPTS["with_autocast"].mode("autocast"), SCRIPTS["with_autocast"].mode("lowp_weights")
    mlp = float64_bound_for(autocast, "cpu", "bfloat16", spec.steps, "sgd")
    assert bound_for_model(mlp, spec, "bfloat16") == mlp
    convnet = bound_for_model(mlp, spec.for_model("convnet"), "bfloat16")
    assert (convnet.loss_rtol, convnet.weight_rtol) == (8 * mlp.loss_rtol, 8 * mlp.weight_rtol)
    assert "x8 for the convnet model under autocast (measured" in convnet.reason
    assert bound_for_model(mlp, spec.for_model("gru"), "bfloat16").loss_rtol == 2 * mlp.loss_rtol
    weights = float64_bound_for(lowp, "cpu", "bfloat16", spec.steps, "sgd")
    assert bound_for_model(weights, spec.for_model("convnet"), "bfloat16") == weights
