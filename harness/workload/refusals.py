"""Cells the harness does not run in any language, because their arithmetic cannot work there or what they test cannot act:
each refusal says why and what to change, and the cell is ``unsupported`` in those words instead of a NaN that fails the
run, or a pass that tested nothing.

A loop feature whose mechanism never acts in the spec (a resume whose checkpoint step is past the run's end, a scheduler
that never changes the lr, accumulation that never steps: :meth:`harness.workload.features.Feature.never_acts`) is refused
for every cell of it, so a run of only such cells ends "no cell ran" (exit 4), and a run beside them says why per reason.

A loop feature that cannot run on the cell's model is refused too, in the model row's words
(:meth:`harness.workload.features.Feature.cannot_run_on`): a kind its modules cannot run (the transformer's fused
attention has no double backward, so no gradient penalty), or a layer argument naming a layer the model cannot leave out
or compute by a custom function (``custom_function``'s layer 1 is the MLP's hidden Linear; the transformer's and the conv
net's Linear is their head, layer 2).

The other refusal is the AMP guide's pure low-precision weights (``../shared/seeds/amp_guide_fp16_cli.md``, modes
whose ``weights`` are ``amp``) in float16 with an optimizer whose step divides by ``sqrt(second moment) + eps``: its
default eps of 1e-8 rounds to 0 in float16 state (float16's smallest subnormal is 2^-24 ≈ 5.96e-8), the second moment
of a gradient entry that is 0 (or underflows) is 0, and the first update divides 0 by 0. Both bindings do this alike
(the first CUDA run, docs/results/h100-python-cuda/: loss NaN at step 1 in all 16 such cells); with bfloat16, whose
range is float32's, or a representable eps, the same cells train.
"""

from __future__ import annotations

from harness.contract.dtypes import AMP_DTYPES, DTYPES
from harness.contract.models import MODELS
from harness.workload.features import FEATURES
from harness.workload.matrix import Cell
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import WorkloadSpec

__all__ = ["EPS_UNDER_SQRT", "SAFE_EPS", "refusal"]

#: The optimizer rows whose step divides by ``sqrt(v) + eps`` with ``v`` starting at 0, read from the rows
#: (:attr:`harness.workload.optimizers.Optimizer.eps_under_sqrt`): where ``eps`` is 0 in the weights' dtype, a zero
#: gradient entry makes that 0 / 0.
EPS_UNDER_SQRT: tuple[str, ...] = tuple(name for name, row in OPTIMIZERS.items() if row.eps_under_sqrt)


def refusal(cell: Cell, spec: WorkloadSpec) -> str | None:
    """Why ``cell`` is not run with ``spec`` in any language (one line, with the fix), or ``None``.

    The fixes offered are those that would change the outcome and are not already in use: another AMP dtype only where
    it is not this run's and its smallest number holds the eps (a bfloat16 run with ``eps=0`` is told to raise the eps,
    never to run in bfloat16)."""
    feature = FEATURES.get(cell.feature)
    # the model's fact first: no spec can change it (a GRU has no layer to leave out, at any --num-layers)
    cannot = feature.cannot_run_on(MODELS[cell.model]) if feature is not None else None
    if feature is not None and cannot is not None:
        others = [name for name, row in MODELS.items() if feature.cannot_run_on(row) is None]
        return (f"loop feature {feature.name} cannot run on the {cell.model} model: {cannot}; its cells would only fail. "
                f"Run it with --model {' or '.join(others)}, or leave {feature.name} out (--feature)")
    never = feature.never_acts(spec.steps, spec.model_row.layers(spec.sizes)) if feature is not None else None  # the model's layers
    if feature is not None and never is not None:
        return (f"loop feature {feature.name} cannot act in this spec: it {never} (--num-batches {spec.num_batches} × --epochs "
                f"{spec.epochs}, --num-layers {spec.num_layers}); its cells would pass as the plain loop does, having tested "
                f"nothing of it. Give the run what it needs, or leave {feature.name} out (--feature)")
    if cell.properties.weights != "amp" or not OPTIMIZERS[cell.optimizer].eps_under_sqrt:
        return None
    dtype = DTYPES[str(spec.amp_dtype)]  # resolved for the device when the spec was made
    eps = float(OPTIMIZERS[cell.optimizer].resolved_args(spec.lr, dict(spec.optimizer_args).get(cell.optimizer))["eps"])  # type: ignore[arg-type]
    if not _rounds_to_zero(eps, dtype.name):
        return None
    fixes = [f"--amp-dtype {other}" for other in AMP_DTYPES if other != dtype.name and not _rounds_to_zero(eps, other)]
    fixes.append(f"--optimizer-arg {cell.optimizer}.eps={SAFE_EPS}")
    return (f"{cell.optimizer}'s eps {eps:g} is 0 in {dtype.name} (its smallest number is {dtype.subnormal:.3g}): with the "
            f"weights and the optimizer's state in {dtype.name}, a zero gradient entry's step divides 0 by 0 and the run ends "
            f"in NaN, in PyTorch and R torch alike; run it with {', or '.join(fixes)}")


#: The eps a refusal offers: representable in every AMP dtype (float16's smallest number is 5.96e-8), and small beside
#: the square root of a second moment that acts (tiny's gradients reach 1e-3).
SAFE_EPS = "1e-4"


def _rounds_to_zero(eps: float, dtype: str) -> bool:
    """Whether ``eps`` is 0 once stored in ``dtype`` (at or below half its smallest number, which ties to even: 0)."""
    subnormal = DTYPES[dtype].subnormal
    return subnormal is not None and eps <= subnormal / 2
