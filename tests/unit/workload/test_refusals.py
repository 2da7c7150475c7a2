"""The cells no language runs (harness/workload/refusals.py): pure float16 weights with an eps that is 0 in float16, a
feature whose mechanism cannot act in the spec, a feature that cannot run on the cell's model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.contract.dtypes import DTYPES
from harness.contract.models import MODELS
from harness.workload.features import FEATURES
from harness.workload.matrix import Cell
from harness.workload.refusals import EPS_UNDER_SQRT, refusal
from harness.workload.spec import WorkloadSpec


def _cell(mode: str = "lowp_weights", optimizer: str = "adam", script: str = "with_autocast") -> Cell:
    return Cell("python", script, mode, optimizer, "cpu")


@pytest.mark.parametrize("optimizer", EPS_UNDER_SQRT)
def test_float16_weights_with_an_eps_that_is_zero_there_are_refused_with_the_fix(optimizer: str) -> None:
    """The first CUDA run's 16 NaN cells (float16 lowp_weights with an eps of 1e-8): refused, saying why and what to pass."""
    spec = WorkloadSpec.from_preset("tiny", amp_dtype="float16")
    why = refusal(_cell(optimizer=optimizer), spec)
    assert why is not None and "is 0 in float16" in why and f"--optimizer-arg {optimizer}.eps=1e-4" in why
    assert refusal(_cell("lowp_weights_scaled", optimizer), spec) is not None


@pytest.mark.parametrize(("mode", "optimizer", "amp_dtype", "args"), [
    ("lowp_weights", "adam", "bfloat16", {}),  # bfloat16 has float32's range: 1e-8 is a number there
    ("autocast", "adam", "float16", {}),  # float32 weights and state under autocast
    ("lowp_weights", "sgd", "float16", {}),  # no eps
    ("lowp_weights", "adagrad", "float16", {}),  # its sum starts at 0.1: never 0 / 0
    ("lowp_weights", "adam", "float16", {"adam": {"eps": 1e-4}}),  # an eps float16 holds
])
def test_what_can_train_is_not_refused(mode: str, optimizer: str, amp_dtype: str, args: dict[str, dict[str, float]]) -> None:
    assert refusal(_cell(mode, optimizer), WorkloadSpec.from_preset("tiny", amp_dtype=amp_dtype, optimizer_args=args)) is None


def test_the_threshold_is_half_the_smallest_subnormal() -> None:
    """An eps at half float16's smallest number is a tie that rounds to even, 0 (refused); just above it rounds up (kept)."""
    tiny = DTYPES["float16"].subnormal
    assert tiny == 2.0**-24
    refused = WorkloadSpec.from_preset("tiny", amp_dtype="float16", optimizer_args={"adam": {"eps": tiny / 2}})
    kept = WorkloadSpec.from_preset("tiny", amp_dtype="float16", optimizer_args={"adam": {"eps": tiny / 2 * 1.01}})
    assert refusal(_cell(), refused) is not None and refusal(_cell(), kept) is None


def test_the_threshold_is_what_float16_itself_rounds_to_zero() -> None:
    """The rule is float16's own rounding, checked against torch: 0 + eps in float16 is 0 exactly where a cell is refused."""
    import torch

    for eps in (1e-8, 2.0**-25, 2.0**-25 * 1.01, 1e-7, 1e-4):
        spec = WorkloadSpec.from_preset("tiny", amp_dtype="float16", optimizer_args={"adam": {"eps": eps}})
        zero = float(torch.zeros(1, dtype=torch.float16).add_(eps)) == 0.0
        assert (refusal(_cell(), spec) is not None) is zero, eps


def _fixes(why: str) -> list[str]:
    """The flags a refusal advises (each ``--flag VALUE`` after "run it with")."""
    return [f"--{part.strip()}" for part in why.partition("run it with ")[2].replace(", or ", " ").split("--") if part.strip()]


@pytest.mark.parametrize("amp_dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("eps", [0.0, 1e-8, 1e-30])
def test_a_refusal_advises_only_fixes_that_are_not_in_use_and_that_work(amp_dtype: str, eps: float) -> None:
    """Issue 48 (8): a bfloat16 run with eps=0 was told "run it with --amp-dtype bfloat16". Every fix a refusal offers is
    another value than the run's, and applying it alone makes the cell run."""
    spec = WorkloadSpec.from_preset("tiny", amp_dtype=amp_dtype, optimizer_args={"adam": {"eps": eps}})
    why = refusal(_cell(), spec)
    if why is None:  # a number bfloat16 holds: nothing to fix
        assert amp_dtype == "bfloat16" and eps > 0
        return
    fixes = _fixes(why)
    assert fixes, why
    assert f"--amp-dtype {amp_dtype}" not in why
    for fix in fixes:
        flag, _, value = fix.partition(" ")
        if flag == "--amp-dtype":
            fixed = spec.replace(amp_dtype=value)
        else:
            assert flag == "--optimizer-arg" and value.startswith("adam.eps="), fix
            fixed = spec.replace(optimizer_args={"adam": {"eps": float(value.partition("=")[2])}})
        assert fixed.to_json() != spec.to_json() and refusal(_cell(), fixed) is None, (fix, why)


@pytest.mark.parametrize("feature", list(FEATURES))
def test_every_feature_acts_in_tiny_and_is_refused_where_its_mechanism_cannot(feature: str) -> None:
    """Issue 48 (7)'s class: no loop feature's cells pass having tested nothing of it. In ``tiny`` (the main job) every row
    acts; a run of one step, or a model of one layer, refuses each row whose mechanism needs more, naming what it needs;
    and the steps it names are exactly the fewest at which it is no longer refused."""
    row = FEATURES[feature]
    tiny = WorkloadSpec.from_preset("tiny")
    assert row.never_acts(tiny.steps, tiny.num_layers) is None
    cell = Cell("python", "cuda_amp_grad_scaler", "default", "sgd", "cpu", feature)
    for steps in range(1, tiny.steps + 1):
        why = row.never_acts(steps, tiny.num_layers)
        refused = refusal(cell, WorkloadSpec.from_preset("tiny", num_batches=steps, epochs=1))
        assert (why is None) is (refused is None)
        if why is not None:
            needed = int(why.split("needs ")[1].split(" steps")[0])
            assert needed > steps and row.never_acts(needed, tiny.num_layers) is None, why
            assert refused is not None and f"loop feature {feature} cannot act in this spec: it {why}" in refused
            assert f"--num-batches {steps} × --epochs 1" in refused and "leave" in refused


@pytest.mark.parametrize(("feature", "steps"), [("resume", 7), ("resume_lr_step", 7), ("accumulate", 1), ("lr_step", 4),
                                                ("lr_cosine", 1), ("lr_reduce_on_plateau", 4), ("multi_optimizer", 14),
                                                ("sometimes_used", 1)])
def test_a_feature_is_refused_below_what_its_mechanism_needs(feature: str, steps: int) -> None:
    """The rows' own numbers: resume's checkpoint after 7 iterations, accumulation's 2 micro-batches, lr_step's decay after
    4 scheduler steps, the plateau's patience, multi_optimizer's explicit scale at step 14, a layer left out every 2nd step."""
    assert FEATURES[feature].never_acts(steps, 3) is not None and FEATURES[feature].never_acts(steps + 1, 3) is None


#: The feature x model cells that failed at run time before the model rows said where a feature can act (the Python half
#: of ``--feature all`` with each ``--model``): the transformer's fused attention has no double backward, and
#: custom_function's layer 1 is a Linear only in the MLP (the GRU's head is its layer 1); the GRU, which has no layer to
#: leave out, was refused for a layer count no --num-layers could change.
_CANNOT_RUN = {**{(m, "penalty"): "has no double backward" for m in ("transformer", "transformer_smoothing")},
               **{(m, "custom_function"): "only layer 2" for m in ("transformer", "transformer_smoothing", "convnet")},
               **{("gru", f"sometimes_used{kind}"): "no layer can be left out" for kind in ("", "_zeros", "_default")}}


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("feature", list(FEATURES))
def test_a_feature_that_cannot_run_on_a_model_is_refused_in_the_model_rows_words(model: str, feature: str) -> None:
    """Every feature x model cell of tiny runs or is refused up front with the model row's fact and the models it runs
    on; none is left to fail at run time in the binding's error."""
    spec = WorkloadSpec.from_preset("tiny", model=model)
    why = refusal(Cell("python", "cuda_amp_grad_scaler", "default", "sgd", "cpu", feature, model), spec)
    layers = MODELS[model].layers(spec.sizes)
    if (model, feature) in _CANNOT_RUN:
        assert why is not None and f"loop feature {feature} cannot run on the {model} model" in why, why
        assert _CANNOT_RUN[model, feature] in why and "--model mlp" in why and f"--model {model}" not in why, why
    elif FEATURES[feature].never_acts(spec.steps, layers) is None:
        assert why is None, why


def _python_net(model: str) -> Any:
    """The Python forward's modules of ``model`` on the CPU, as the scripts build them."""
    import importlib

    spec = WorkloadSpec.from_preset("tiny", model=model)
    return importlib.import_module(f"py_scripts.models.{MODELS[model].files or model}"), spec  # a variant: its row's forward


@pytest.mark.parametrize("model", [m for m, row in MODELS.items() if row.left_out is not None or row.replaced is not None])
def test_the_model_rows_say_which_layers_the_python_forward_can_leave_out_or_replace(model: str) -> None:
    """``left_out`` and ``replaced`` are what the forwards do: a layer the row does not list is refused by the forward
    (``ValueError``), a layer it lists runs."""
    import torch

    module, spec = _python_net(model)
    net = module.build({"model": MODELS[model].run_spec(spec.sizes), "device": "cpu"})
    row = MODELS[model]
    x = torch.tensor(row.draw_inputs(np.random.default_rng(0), row.inputs(spec.sizes)) if row.draw_inputs else
                     np.random.default_rng(0).standard_normal(row.inputs(spec.sizes)), dtype=torch.float32)
    for layer in range(row.layers(spec.sizes)):
        for listed, call in ((row.left_out, lambda k: module.forward(net, x, 0, k, None)),
                             (row.replaced, lambda k: module.forward(net, x, 0, -1, (k, lambda h, linear: linear(h))))):
            if listed is None:
                continue
            if layer in listed:
                call(layer)
            else:
                with pytest.raises(ValueError, match="only"):
                    call(layer)


def test_the_transformers_attention_still_has_no_double_backward() -> None:
    """The fact behind the transformer's penalty refusal, checked against the installed PyTorch: the penalty's backward
    through the encoder layer's create_graph gradients stops in the fused attention. When a PyTorch release gives it a
    double backward, this fails: lift the refusal (harness/contract/models.py, ``cannot_run``)."""
    import torch

    module, spec = _python_net("transformer")
    net = module.build({"model": MODELS["transformer"].run_spec(spec.sizes), "device": "cpu"})
    row = MODELS["transformer"]
    x = torch.tensor(row.draw_inputs(np.random.default_rng(0), row.inputs(spec.sizes)))  # type: ignore[misc]
    out = module.forward(net, x, 0, -1, None)
    grads = torch.autograd.grad(out.square().mean(), list(net.parameters()), create_graph=True)
    norm = torch.stack([g.square().sum() for g in grads]).sum().sqrt()
    with pytest.raises(RuntimeError, match="derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is not implemented"):
        norm.backward()
