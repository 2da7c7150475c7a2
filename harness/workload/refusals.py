"""Cells the harness does not run in any language, because their arithmetic cannot work there: each refusal says why
and what to change, and the cell is ``unsupported`` in those words instead of a NaN that fails the run.

The one refusal so far is the AMP guide's pure low-precision weights (``../shared/seeds/amp_guide_fp16_cli.md``, modes
whose ``weights`` are ``amp``) in float16 with an optimizer whose step divides by ``sqrt(second moment) + eps``: its
default eps of 1e-8 rounds to 0 in float16 state (float16's smallest subnormal is 2^-24 ≈ 5.96e-8), the second moment
of a gradient entry that is 0 (or underflows) is 0, and the first update divides 0 by 0. Both bindings do this alike
(the first CUDA run, docs/results/h100-python-cuda/: loss NaN at step 1 in all 16 such cells); with bfloat16, whose
range is float32's, or a representable eps, the same cells train.
"""

from __future__ import annotations

from harness.contract.dtypes import DTYPES
from harness.workload.matrix import Cell
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import WorkloadSpec

__all__ = ["EPS_UNDER_SQRT", "refusal"]

#: The optimizer rows whose step divides by ``sqrt(v) + eps`` with ``v`` starting at 0, read from the rows
#: (:attr:`harness.workload.optimizers.Optimizer.eps_under_sqrt`): where ``eps`` is 0 in the weights' dtype, a zero
#: gradient entry makes that 0 / 0.
EPS_UNDER_SQRT: tuple[str, ...] = tuple(name for name, row in OPTIMIZERS.items() if row.eps_under_sqrt)


def refusal(cell: Cell, spec: WorkloadSpec) -> str | None:
    """Why ``cell`` is not run with ``spec`` in any language (one line, with the fix), or ``None``."""
    if cell.properties.weights != "amp" or not OPTIMIZERS[cell.optimizer].eps_under_sqrt:
        return None
    dtype = DTYPES[str(spec.amp_dtype)]  # resolved for the device when the spec was made
    eps = float(OPTIMIZERS[cell.optimizer].resolved_args(spec.lr, dict(spec.optimizer_args).get(cell.optimizer))["eps"])  # type: ignore[arg-type]
    if dtype.subnormal is None or eps > dtype.subnormal / 2:  # half of it ties to even: 0
        return None
    return (f"{cell.optimizer}'s eps {eps:g} is 0 in {dtype.name} (its smallest number is {dtype.subnormal:.3g}): with the "
            f"weights and the optimizer's state in {dtype.name}, a zero gradient entry's step divides 0 by 0 and the run ends "
            f"in NaN, in PyTorch and R torch alike; run it with --amp-dtype bfloat16, or --optimizer-arg "
            f"{cell.optimizer}.eps=1e-4")
