"""The float64 reference: the same fixtures and steps in NumPy float64, the exact trajectory.

AMP error is judged against this, so a difference between frontends can be blamed on one side: the
side further from the reference is the one that moved. Forward, backward, clipping and SGD are written
out by hand (no autograd) so nothing here shares code with either frontend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.contract.optimizers import DEFAULT_OPTIMIZER
from harness.judge.loop_kinds import reference_loop
from harness.judge.models import reference_model
from harness.judge.optimizer_updates import make_update
from harness.model.efficiency import workload_flops
from harness.model.verdicts import ReferenceDistance, finite_or_none
from harness.workload.features import FEATURES, NO_FEATURE, Feature, epoch_factor, second_group_weight_decay
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import WorkloadSpec

__all__ = [
    "REFERENCE_MAX_FLOPS",
    "Reference",
    "largest_loss_error",
    "measure_distance",
    "reference_skip_reason",
    "relative_loss_errors",
    "run_reference",
    "zero_grad_default_zeroes",
]

#: Above this many float64 operations the reference is skipped: NumPy float64 runs at roughly
#: 5-20 GFLOP/s on 2 cores, so this keeps it under ~10-40 s. ``tiny`` needs ~2e8; ``recipe`` ~2e13.
REFERENCE_MAX_FLOPS = 2e11
#: ``torch.nn.utils.clip_grad_norm_`` (and R's twin) add this to the norm before dividing.
_CLIP_EPS = 1e-6


def zero_grad_default_zeroes(language: str, optimizer: str, feature: str) -> bool:
    """Whether the loop of ``feature`` calls ``zero_grad()`` with no argument (a ``sometimes_used`` row whose
    ``set_to_none`` is -1) and ``language``'s binding then zeroes ``optimizer``'s grads instead of setting them to None:
    R torch's R-code optimizers inherit ``Optimizer$zero_grad(set_to_none = FALSE)`` (R/optim.R:91-93 at mlverse/torch
    e4de110); PyTorch's default is ``set_to_none=True`` and R torch's ignite optimizers' is libtorch's (true). Each
    binding's default is defensible (known difference ``zero-grad-default``), so each cell is judged against its own
    binding's: a layer unused at a step steps on zero in R."""
    row = FEATURES.get(feature)
    return (row is not None and row.args.get("set_to_none") == -1 and language == "r"
            and OPTIMIZERS[optimizer].family == "r")


@dataclass(frozen=True)
class Reference:
    """Per-step losses and final weights of the exact (float64) run."""

    losses: np.ndarray
    weights: dict[str, np.ndarray]


def reference_skip_reason(spec: WorkloadSpec) -> str | None:
    """Why the reference is not computed for ``spec``, or ``None`` when it is feasible."""
    flops = workload_flops(spec)
    if flops > REFERENCE_MAX_FLOPS:
        return (
            f"float64 reference skipped: {flops:.1e} FLOPs exceed the {REFERENCE_MAX_FLOPS:.0e} budget "
            "(minutes to hours in NumPy float64); use a smaller preset such as tiny for it"
        )
    return None


def run_reference(
    spec: WorkloadSpec, arrays: dict[str, np.ndarray], clip: bool, skipped: frozenset[int] = frozenset(),
    optimizer: str = DEFAULT_OPTIMIZER, feature: str = NO_FEATURE, default_zeroes: bool = False,
) -> Reference:
    """Train in float64 from the fixture ``arrays`` with ``optimizer`` (a row of
    :data:`harness.workload.optimizers.OPTIMIZERS`, with the spec's ``optimizer_args`` for it) in the loop of ``feature``
    (a row of :data:`harness.workload.features.FEATURES`, or ``none``); ``clip`` applies the clip mode's gradient
    clipping, to the raw gradients before the optimizer's step adds any weight decay (as ``clip_grad_norm_`` before
    ``optimizer.step()`` does).

    The feature's arithmetic, exactly: a scheduler's documented closed form sets each step's lr (PyTorch computes some
    recursively: their rounding is part of a cell's distance); accumulation sums the gradients of ``every`` micro-batch
    losses each divided by ``every`` and steps once at the last (every micro-batch's loss is recorded, undivided);
    clipping by value clamps every gradient element; a frozen layer is never updated (nor counted in a clip's norm); with
    param groups the biases step with their own lr and weight decay; a layer unused at a step is left out of its forward
    pass and gets no gradient (its optimizer skips it) or, under ``set_to_none`` false, a zero one (it steps on zero);
    two optimizers (``multi_optimizer``) step on the gradient of both losses, and at a skipped step only the first skips
    (the main job's overflow lands in its layer 0; the second's found_inf is 0, so PyTorch steps it); a gradient penalty
    adds ``weight`` times the norm of the loss's gradient, whose gradient is the exact Hessian-vector product.

    ``skipped``: the steps (0-based, micro-batches under accumulation) a scaler run skipped. The reference replays them:
    the loss is computed, the optimizer is not called (no update, no state change, no step count), as
    ``GradScaler.step`` does when the gradients held inf/NaN; a scheduler still steps, as the loop steps it. So an fp16
    run that skipped is judged against the steps it really took, not against a trajectory it could never follow.

    ``default_zeroes``: the binding's ``zero_grad()`` with no argument zeroes the grads (:func:`zero_grad_default_zeroes`),
    so a ``sometimes_used`` row at each binding's default (``set_to_none`` -1) steps its unused layer on zero.

    A spec that diverges (a huge learning rate) diverges here too: the losses become inf/NaN, quietly,
    as they do in the frontends, rather than raising NumPy's overflow warnings.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return _train(spec, arrays, clip, skipped, optimizer, FEATURES.get(feature), default_zeroes)


def _norm_clipped(grads: list[np.ndarray | None], max_norm: float, inf_norm: bool) -> list[np.ndarray | None]:
    """``clip_grad_norm_`` in float64: the gradients scaled by ``max_norm / (norm + eps)`` where that is below 1, the
    norm being the 2-norm of all of them, or with ``inf_norm`` their largest |element| (``norm_type`` inf)."""
    present = [g for g in grads if g is not None]
    if inf_norm:
        total = max(float(np.max(np.abs(g))) for g in present)
    else:
        total = float(np.sqrt(sum(float(np.sum(g * g)) for g in present)))
    coef = min(max_norm / (total + _CLIP_EPS), 1.0)
    return [None if g is None else g * coef for g in grads]


def _train(spec: WorkloadSpec, arrays: dict[str, np.ndarray], clip: bool, skipped: frozenset[int], optimizer: str,
           feature: Feature | None, default_zeroes: bool = False) -> Reference:
    overrides: Mapping[str, Mapping[str, Any]] = getattr(spec, "optimizer_args", None) or {}  # a field the spec is gaining
    update = make_update(optimizer, spec.lr, overrides.get(optimizer))
    loop = reference_loop(feature)  # what the feature's kind changes (harness/judge/loop_kinds.py)
    model = reference_model(spec.model)  # the model's loss and gradients (harness/judge/models/)
    bias_args: dict[str, Any] = {}
    if loop.groups:  # the biases' own group: its lr (and weight decay, where the optimizer takes one, as the scripts give it)
        group_args = FEATURES["param_groups"].args  # the param_groups row's, also where a scheduler runs over its groups
        bias_args = {"lr": float(update.args["lr"]) * float(group_args["bias_lr_factor"])}
        # the arguments the run is given (the row's and the spec's: the search's draws), not the update's defaults
        weight_decay = second_group_weight_decay(OPTIMIZERS[optimizer].resolved_args(spec.lr, overrides.get(optimizer)))
        if weight_decay is not None:
            bias_args["weight_decay"] = weight_decay
    bias_update = make_update(optimizer, spec.lr, {**(overrides.get(optimizer) or {}), **bias_args}) if loop.groups else update
    row_lr = float(update.args["lr"])  # OneCycleLR's max_lr is a factor of the row's lr, the same for every group
    schedules = [_Schedule(feature, u, row_lr) for u in ((update, bias_update) if loop.groups else (update,))] \
        if feature is not None and feature.scheduler else []
    rows = spec.parameters  # in torch's parameter order: layer0.weight, layer0.bias, layer1.weight, ...
    params = {p.name: arrays[p.name].astype(np.float64) for p in rows}
    # a frozen layer has no gradient: the optimizer (and a clip) never sees it, as PyTorch's skip a parameter whose grad is None
    trained = [p.name for p in rows if p.layer != loop.frozen]
    # multi_optimizer: the second optimizer's update (the model's last head_layers layers), as the first's
    split = spec.model_row.layers(spec.sizes) - int(loop.multi["head_layers"]) if loop.multi else -1
    first = [p.name for p in rows if p.layer < split]
    head = [p.name for p in rows if p.layer >= split] if loop.multi else []
    head_update = make_update(optimizer, spec.lr, overrides.get(optimizer)) if loop.multi else update
    data, targets = arrays["data"].astype(np.float64), arrays["targets"].astype(np.float64)
    losses = np.empty(spec.steps, dtype=np.float64)
    used, multi = loop.used, loop.multi
    accumulated: list[np.ndarray | None] | None = None
    step = 0
    for _epoch in range(spec.epochs):
        for i in range(spec.num_batches):
            unused = int(used["layer"]) if used is not None and step % int(used["every"]) else -1
            second = float(multi["second_loss_weight"]) if multi else 0.0
            losses[step], named = model.gradients(params, data[i], targets[i], unused, loop.every, second)
            if loop.penalty:
                named = model.penalized(params, data[i], targets[i], named, loop.penalty)
            # zero_grad(set_to_none=False), or zero_grad() where the binding's default zeroes: zeros
            if unused >= 0 and used is not None and (used["set_to_none"] == 0 or (used["set_to_none"] < 0 and default_zeroes)):
                named |= {p.name: np.zeros_like(params[p.name]) for p in rows if p.layer == unused}
            grads = [named[name] for name in trained]
            accumulated = grads if accumulated is None else [
                g if a is None else a if g is None else a + g for a, g in zip(accumulated, grads, strict=True)]
            if (step + 1) % loop.every:  # a micro-batch that only accumulates
                step += 1
                continue
            grads, accumulated = accumulated, None
            if multi:  # two optimizers: the main job's overflow lands in layer 0, so only the first one skips
                if step not in skipped:
                    update.step([params[name] for name in first], grads[:len(first)])
                head_update.step([params[name] for name in head], grads[len(first):])
            elif step not in skipped:
                if clip:
                    grads = _norm_clipped(grads, spec.clip_max_norm, inf_norm=False)
                if loop.clip_norm is not None:
                    grads = _norm_clipped(grads, *loop.clip_norm)
                if loop.clip_value is not None:
                    limit = loop.clip_value
                    grads = [None if g is None else np.clip(g, -limit, limit) for g in grads]
                if loop.groups:  # weights, then biases: the two groups, each its own update
                    is_weight = [name.endswith(".weight") for name in trained]
                    update.step([params[n] for n, w in zip(trained, is_weight, strict=True) if w],
                                [g for g, w in zip(grads, is_weight, strict=True) if w])
                    bias_update.step([params[n] for n, w in zip(trained, is_weight, strict=True) if not w],
                                     [g for g, w in zip(grads, is_weight, strict=True) if not w])
                else:
                    update.step([params[name] for name in trained], grads)
            for schedule in schedules:  # after the step (or the skip), as the loop steps the scheduler
                schedule.step(float(losses[step]))
            step += 1
    order = getattr(model, "weights_order", None)  # the order the final weights are measured in (a sum: its rounding)
    names = order([p.name for p in rows]) if order is not None else [p.name for p in rows]
    return Reference(losses=losses, weights={name: params[name] for name in names})


class _Schedule:
    """One param group's scheduler in float64: sets the group's lr (and a cycled momentum or beta1) in its update's
    arguments when built and at each :meth:`step`, as the scheduler sets the optimizer's param group.

    Closed forms where PyTorch documents one (``torch/optim/lr_scheduler.py``, :func:`scheduled_lr`; OneCycleLR's phases
    and momentum, :func:`one_cycle`); ReduceLROnPlateau's decisions from the reference's own float64 losses, with its
    state as the class keeps it.
    """

    def __init__(self, feature: Feature, update: Any, row_lr: float) -> None:
        self.feature, self.update, self.row_lr = feature, update, row_lr
        self.base_lr = float(update.args["lr"])
        self.iteration = 0
        self.best, self.bad = math.inf, 0
        self.beta2 = update.args["betas"][1] if "betas" in update.args else None
        self._set(self.base_lr if feature.python == "ReduceLROnPlateau" else None)

    def step(self, loss: float) -> None:
        """The scheduler's step after an iteration whose loss was ``loss``."""
        self.iteration += 1
        lr = None
        if self.feature.python == "ReduceLROnPlateau":
            args = self.feature.args
            if loss < self.best * (1.0 - float(args["threshold"])):
                self.best, self.bad = loss, 0
            else:
                self.bad += 1
            lr = float(self.update.args["lr"])
            if self.bad > int(args["patience"]):
                self.bad = 0
                lr = lr * float(args["factor"])
        self._set(lr)

    def _set(self, lr: float | None) -> None:
        if self.feature.python == "OneCycleLR":
            lr, momentum = one_cycle(self.feature, self.row_lr, self.iteration)
            key = "betas" if self.beta2 is not None else "momentum"
            self.update.args[key] = (momentum, self.beta2) if self.beta2 is not None else momentum
        elif lr is None:
            lr = scheduled_lr(self.feature, self.base_lr, self.iteration)
        self.update.args["lr"] = lr
def scheduled_lr(feature: Feature, base_lr: float, iteration: int) -> float:
    """The lr a scheduler row sets for the optimizer step of ``iteration`` (0-based: the scheduler has stepped that many
    times since it was built), from PyTorch's documented closed form (``torch/optim/lr_scheduler.py``)."""
    args = feature.args
    if feature.python == "StepLR":
        return base_lr * float(args["gamma"]) ** (iteration // int(args["step_size"]))
    if feature.python == "CosineAnnealingLR":
        eta_min, t_max = float(args["eta_min"]), float(args["T_max"])
        return eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * iteration / t_max)) / 2
    if feature.python == "LambdaLR":
        return base_lr * epoch_factor(args, iteration)
    if feature.python == "MultiplicativeLR":  # the product of every step's factor since the first
        return base_lr * math.prod(epoch_factor(args, k) for k in range(1, iteration + 1))
    raise ValueError(f"feature {feature.name}: the reference has no closed form for scheduler {feature.python!r}")


def one_cycle(feature: Feature, lr: float, iteration: int) -> tuple[float, float]:
    """OneCycleLR's lr and momentum (or beta1) at ``iteration`` for an optimizer row whose lr is ``lr``: two cosine
    phases, up to ``max_lr`` over the first ``pct_start`` of ``total_steps`` and down to its 25e4th, the momentum from
    0.95 to 0.85 and back (PyTorch's defaults for div_factor, final_div_factor, base and max momentum)."""
    args = feature.args
    max_lr = float(args["max_lr"]) * lr
    initial, top = max_lr / 25.0, max_lr
    low, high = 0.85, 0.95
    rise = float(args["pct_start"]) * int(args["total_steps"]) - 1
    fall = int(args["total_steps"]) - 1 - rise

    def cosine(start: float, end: float, pct: float) -> float:
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    if iteration <= rise:
        pct = iteration / rise
        return cosine(initial, top, pct), cosine(high, low, pct)
    pct = (iteration - rise) / fall
    return cosine(top, initial / 1e4, pct), cosine(low, high, pct)


def relative_loss_errors(losses: Sequence[Any], reference_losses: np.ndarray, skipped: frozenset[int]) -> tuple[np.ndarray, np.ndarray]:
    """Each step's relative loss error against ``reference_losses`` (replayed over ``skipped``), and which steps are judged.

    A skipped step's loss may be non-finite (that is why it was skipped) and is not judged; a non-finite loss at a
    step that was not skipped is judged, and fails. The run's measure (:func:`measure_distance`) and every later
    judgement (:func:`harness.judge.cells.check_float64`) use this one function, so they cannot disagree.

    Raises:
        ValueError: the run and the reference have different step counts.
    """
    run = np.array([np.nan if v is None else float(v) for v in losses], dtype=np.float64)
    if run.shape != reference_losses.shape:
        raise ValueError(f"run has {run.size} losses, reference has {reference_losses.size}")
    with np.errstate(invalid="ignore", over="ignore"):
        rel = np.abs(run - reference_losses) / np.maximum(np.abs(reference_losses), np.finfo(np.float64).tiny)
    judged = np.array([step not in skipped or math.isfinite(run[step]) for step in range(run.size)], dtype=bool)
    return rel, judged


def largest_loss_error(rel: np.ndarray, judged: np.ndarray) -> float:
    """The largest relative loss error over the judged steps (0 when none is judged; NaN if a judged step is NaN)."""
    return float(np.max(rel[judged])) if judged.any() else 0.0


def measure_distance(
    losses: Sequence[Any], weights: Mapping[str, np.ndarray], reference: Reference, skipped: frozenset[int]
) -> ReferenceDistance:
    """How far a run is from ``reference`` (already replayed over ``skipped``): what the result stores, and every
    judgement of the cell reads.

    The weights part needs the reference's weights, which the result does not keep: it is measured here, once.
    A tensor missing from ``weights`` or of another shape is infinitely far (its error NaN, stored as ``None``).
    """
    rel, judged = relative_loss_errors(losses, reference.losses, skipped)
    max_loss = largest_loss_error(rel, judged)
    per_tensor, num, den = {}, 0.0, 0.0
    for name, ref in reference.weights.items():
        got = np.asarray(weights[name], dtype=np.float64) if name in weights else np.full_like(ref, np.nan)
        with np.errstate(over="ignore", invalid="ignore"):
            diff_sq = float(np.sum((got - ref) ** 2)) if got.shape == ref.shape else math.nan
        norm_sq = float(np.sum(ref * ref))
        per_tensor[name] = math.sqrt(diff_sq / norm_sq) if norm_sq > 0 else (0.0 if diff_sq == 0 else math.inf)
        num, den = num + diff_sq, den + norm_sq
    weights_err = math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)
    worst = max(per_tensor, key=lambda k: math.inf if math.isnan(per_tensor[k]) else per_tensor[k], default=None)
    return ReferenceDistance(
        finite_or_none(max_loss), finite_or_none(weights_err), worst, finite_or_none(per_tensor[worst]) if worst else None
    )
