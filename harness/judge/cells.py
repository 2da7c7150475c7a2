"""Every cell judged on its own: its distance from float64 against a bound, and its scale history against GradScaler's rule.

Parity says nothing about a cell without a partner (an R scaler cell on CPU is ``unsupported``, every
R cell is ``skipped`` without R torch, a ``--frontend python`` run has no pairs). The float64
reference is the one witness every cell has: a cell further from it than
:func:`harness.judge.tolerances.float64_bound_for` allows fails, naming the first step whose loss is past
the bound and the final-weights tensor furthest from float64. A scaler cell's scale history must
also follow GradScaler's rule exactly (:mod:`harness.judge.scaler_oracle`). Either failure fails the run.

Judged from what the result stores (its losses, the reference's losses, the distance the run measured), so a
result is judged the same at the end of its run and every time it is loaded (:mod:`harness.judge.assess`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.judge.reference import largest_loss_error, relative_loss_errors, zero_grad_default_zeroes
from harness.judge.scaler_oracle import check_scale_history
from harness.judge.tolerances import float64_bound_for
from harness.model.result import CellResult, ReferenceSummary, Status
from harness.model.verdicts import CellVerdict, Float64Bound, Float64Check, Outcome, ReferenceDistance
from harness.workload.features import explicit_scales, micro_batches
from harness.workload.spec import WorkloadSpec

__all__ = ["bound_for_model", "check_float64", "judge_cell", "reference_losses_for"]

def reference_losses_for(cell: CellResult, reference: ReferenceSummary) -> np.ndarray | None:
    """The float64 losses ``cell`` is judged against: its optimizer's, plain or clipped, replayed over the steps it skipped.

    ``None`` when the result has no reference, or none replayed over this cell's skipped steps.
    """
    if cell.record is None:
        return None
    losses = reference.losses_for(cell.optimizer, cell.cell.properties.clip, cell.record.skipped_step_indices, cell.cell.feature,
                                  zero_grad_default_zeroes(cell.language, cell.optimizer, cell.cell.feature))
    return None if losses is None else np.array([math.nan if v is None else float(v) for v in losses], dtype=np.float64)


def check_float64(
    losses: Sequence[Any], reference_losses: np.ndarray, distance: ReferenceDistance, bound: Float64Bound, skipped: frozenset[int]
) -> Float64Check:
    """Judge a run's losses (against ``reference_losses``, replayed over ``skipped``) and its measured weights
    ``distance`` against ``bound``."""
    rel, judged = relative_loss_errors(losses, reference_losses, skipped)
    allowed = np.array([bound.loss_bound_at(step) for step in range(rel.size)])
    beyond = judged & ~(rel <= allowed)  # NaN is beyond
    first = int(np.argmax(beyond)) if beyond.any() else None
    max_loss = largest_loss_error(rel, judged)
    weights_err = math.nan if distance.final_weights_rel_error is None else distance.final_weights_rel_error
    worst = distance.worst_tensor
    worst_err = math.nan if distance.worst_tensor_rel_error is None else distance.worst_tensor_rel_error
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
        head += f", worst tensor {worst} ({worst_err:.2e})"
    if skipped:
        head += f"; reference replayed the skipped steps {sorted(skipped)}"
    return Float64Check(
        passed=passed, max_rel_loss_error=max_loss, final_weights_rel_error=weights_err, first_step_beyond=first,
        worst_tensor=worst, worst_tensor_rel_error=None if worst is None else worst_err,
        replayed_skipped_steps=tuple(sorted(skipped)), bound=bound, message=head,
    )


def bound_for_model(bound: Float64Bound, spec: WorkloadSpec, amp_dtype: str) -> Float64Bound:
    """``bound`` for the spec's model: under autocast, times the model row's measured factor (the MLP's bounds are the
    MLP's arithmetic's: :attr:`harness.contract.models.Model.autocast_bound_factor` says why another model's differ)."""
    model = spec.model_row
    if bound.precision != amp_dtype or model.autocast_bound_factor == 1.0:
        return bound
    factor = model.autocast_bound_factor
    return Float64Bound(bound.loss_rtol * factor, bound.weight_rtol * factor, bound.precision, bound.steps,
                        f"{bound.reason}; x{factor:g} for the {model.name} model under autocast ({model.autocast_bound_why})")


def judge_cell(cell: CellResult, spec: WorkloadSpec, reference: ReferenceSummary) -> CellVerdict:
    """The verdict for ``cell`` on its own, from what the result stores: its float64 check where the result has a
    reference (and the run measured the cell's distance from it), and the scale history of a scaler cell."""
    record = cell.record
    if cell.status is not Status.OK or record is None:
        return CellVerdict(cell.id, Outcome.NOT_JUDGED, None, None, reason=f"the cell is {cell.status}: nothing to judge")
    float64, no_float64 = None, reference.reason or "no float64 reference"
    losses = reference_losses_for(cell, reference)
    if losses is not None and cell.reference_distance is not None:
        amp_dtype = (cell.record.amp_dtype if cell.record else None) or spec.amp_dtype  # a merged CUDA cell may differ
        bound = bound_for_model(float64_bound_for(cell.cell.properties, cell.device, str(amp_dtype), spec.steps, cell.cell.optimizer),
                           spec, str(amp_dtype))
        float64 = check_float64(list(record.losses), losses, cell.reference_distance, bound, record.skipped_step_indices)
    elif reference.available:
        no_float64 = "the run measured no distance from float64 for this cell"
    scaler = (check_scale_history(record.to_json(), spec.to_json(), micro_batches(cell.cell.feature),
                                  explicit_scales(cell.cell.feature))
              if record.loss_scale is not None else None)
    failures = [c.message for c in (float64, scaler) if c is not None and not c.passed]
    if failures:
        return CellVerdict(cell.id, Outcome.FAIL, float64, scaler, reason="; ".join(failures))
    if float64 is None and scaler is None:
        return CellVerdict(cell.id, Outcome.NOT_JUDGED, None, None, reason=no_float64)
    parts = ["within the float64 bound" if float64 else f"float64 not judged ({no_float64})"]
    parts += ["scale history follows GradScaler's rule"] if scaler else []
    return CellVerdict(cell.id, Outcome.PASS, float64, scaler, reason="; ".join(parts))
