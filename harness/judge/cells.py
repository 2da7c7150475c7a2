"""Every cell judged on its own: its distance from float64 against a bound, and its scale history against GradScaler's rule.

Parity says nothing about a cell without a partner (an R scaler cell on CPU is ``unsupported``, every
R cell is ``skipped`` without R torch, a ``--frontend python`` run has no pairs). The float64
reference is the one witness every cell has: a cell further from it than
:func:`harness.judge.tolerances.float64_bound_for` allows fails, naming the first step whose loss is past
the bound and the final-weights tensor furthest from float64. A scaler cell's scale history must
also follow GradScaler's rule exactly (:mod:`harness.judge.scaler_oracle`). Either failure fails the run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.judge.reference import Reference
from harness.judge.scaler_oracle import check_scale_history
from harness.model.result import CellResult, Status
from harness.model.verdicts import CellVerdict, Float64Bound, Float64Check
from harness.workload.spec import WorkloadSpec

__all__ = ["check_float64", "judge_cell"]


def check_float64(
    losses: list[Any], weights: Mapping[str, np.ndarray], reference: Reference, bound: Float64Bound, skipped: frozenset[int]
) -> Float64Check:
    """Judge a run's losses and final weights against ``reference`` (already replayed over ``skipped``).

    A skipped step's loss may be non-finite (that is why it was skipped) and is left out; a non-finite
    loss at a step that was not skipped fails.
    """
    run = np.array([np.nan if v is None else float(v) for v in losses], dtype=np.float64)
    if run.shape != reference.losses.shape:
        raise ValueError(f"run has {run.size} losses, reference has {reference.losses.size}")
    with np.errstate(invalid="ignore", over="ignore"):
        rel = np.abs(run - reference.losses) / np.maximum(np.abs(reference.losses), np.finfo(np.float64).tiny)
    judged = np.array([step not in skipped or math.isfinite(run[step]) for step in range(run.size)])
    allowed = np.array([bound.loss_bound_at(step) for step in range(run.size)])
    beyond = judged & ~(rel <= allowed)  # NaN is beyond
    first = int(np.argmax(beyond)) if beyond.any() else None
    max_loss = float(np.max(rel[judged])) if judged.any() else 0.0  # NaN if any judged step is NaN
    per_tensor, num, den = {}, 0.0, 0.0
    for name, ref in reference.weights.items():
        got = np.asarray(weights[name], dtype=np.float64) if name in weights else np.full_like(ref, np.nan)
        diff_sq = float(np.sum((got - ref) ** 2)) if got.shape == ref.shape else math.nan
        norm_sq = float(np.sum(ref * ref))
        per_tensor[name] = math.sqrt(diff_sq / norm_sq) if norm_sq > 0 else (0.0 if diff_sq == 0 else math.inf)
        num, den = num + diff_sq, den + norm_sq
    weights_err = math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)
    worst = max(per_tensor, key=lambda k: math.inf if math.isnan(per_tensor[k]) else per_tensor[k], default=None)
    weights_ok = weights_err <= bound.weight_rtol
    passed = first is None and weights_ok
    if first is not None:
        head = (
            f"loss past the float64 bound from step {first}: rel error {rel[first]:.2e} > {allowed[first]:.2e} "
            f"({int(beyond.sum())} of {int(judged.sum())} steps beyond)"
        )
    else:
        head = f"loss within the float64 bound at every step (max rel error {max_loss:.2e})"
    head += f"; final weights rel L2 {weights_err:.2e} {'<=' if weights_ok else '>'} {bound.weight_rtol:.2e}"
    if worst is not None:
        head += f", worst tensor {worst} ({per_tensor[worst]:.2e})"
    if skipped:
        head += f"; reference replayed the skipped steps {sorted(skipped)}"
    return Float64Check(
        passed=passed, max_rel_loss_error=max_loss, final_weights_rel_error=weights_err, first_step_beyond=first,
        worst_tensor=worst, worst_tensor_rel_error=per_tensor.get(worst) if worst else None,
        replayed_skipped_steps=tuple(sorted(skipped)), bound=bound, message=head,
    )


def judge_cell(cell: CellResult, spec: WorkloadSpec, float64: Float64Check | None, no_float64: str | None) -> CellVerdict:
    """The verdict for ``cell`` from its checks.

    ``float64`` is the float64 check when the reference ran; ``no_float64`` why it did not. The scale
    history of a scaler cell is checked here, from the record and ``spec``.
    """
    record = cell.record
    if cell.status is not Status.OK or record is None:
        return CellVerdict(cell.id, "not_judged", None, None, f"the cell is {cell.status}: nothing to judge")
    scaler = check_scale_history(record.to_json(), spec.to_dict()) if record.loss_scale is not None else None
    failures = [c.message for c in (float64, scaler) if c is not None and not c.passed]
    if failures:
        return CellVerdict(cell.id, "fail", float64, scaler, "; ".join(failures))
    if float64 is None and scaler is None:
        return CellVerdict(cell.id, "not_judged", None, None, no_float64 or "no float64 reference")
    parts = ["within the float64 bound" if float64 else f"float64 not judged ({no_float64})"]
    parts += ["scale history follows GradScaler's rule"] if scaler else []
    return CellVerdict(cell.id, "pass", float64, scaler, "; ".join(parts))
