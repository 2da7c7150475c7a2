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
from harness.judge.optimizer_updates import make_update
from harness.model.efficiency import workload_flops
from harness.model.verdicts import ReferenceDistance, finite_or_none
from harness.workload.features import FEATURES, NO_FEATURE, Feature
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
]

#: Above this many float64 operations the reference is skipped: NumPy float64 runs at roughly
#: 5-20 GFLOP/s on 2 cores, so this keeps it under ~10-40 s. ``tiny`` needs ~2e8; ``recipe`` ~2e13.
REFERENCE_MAX_FLOPS = 2e11
#: ``torch.nn.utils.clip_grad_norm_`` (and R's twin) add this to the norm before dividing.
_CLIP_EPS = 1e-6


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
    optimizer: str = DEFAULT_OPTIMIZER, feature: str = NO_FEATURE,
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
    param groups the biases step with their own lr and weight decay.

    ``skipped``: the steps (0-based, micro-batches under accumulation) a scaler run skipped. The reference replays them:
    the loss is computed, the optimizer is not called (no update, no state change, no step count), as
    ``GradScaler.step`` does when the gradients held inf/NaN; a scheduler still steps, as the loop steps it. So an fp16
    run that skipped is judged against the steps it really took, not against a trajectory it could never follow.

    A spec that diverges (a huge learning rate) diverges here too: the losses become inf/NaN, quietly,
    as they do in the frontends, rather than raising NumPy's overflow warnings.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return _train(spec, arrays, clip, skipped, optimizer, FEATURES.get(feature))


def _train(spec: WorkloadSpec, arrays: dict[str, np.ndarray], clip: bool, skipped: frozenset[int], optimizer: str,
           feature: Feature | None) -> Reference:
    overrides: Mapping[str, Mapping[str, Any]] = getattr(spec, "optimizer_args", None) or {}  # a field the spec is gaining
    update = make_update(optimizer, spec.lr, overrides.get(optimizer))
    groups = feature is not None and feature.kind == "param_groups"
    bias_args: dict[str, Any] = {}
    if groups:  # the biases' own group: its lr (and weight decay, where the row has one)
        assert feature is not None
        bias_args = {"lr": float(update.args["lr"]) * float(feature.args["bias_lr_factor"])}
        if "weight_decay" in OPTIMIZERS[optimizer].args:
            bias_args["weight_decay"] = float(feature.args["bias_weight_decay"])
    bias_update = make_update(optimizer, spec.lr, {**(overrides.get(optimizer) or {}), **bias_args}) if groups else update
    base_lr = float(update.args["lr"])
    every = int(feature.args["every"]) if feature is not None and feature.kind == "accumulate" else 1
    # a frozen layer has no gradient: the optimizer (and a clip) never sees it, as PyTorch's skip a parameter whose grad is None
    frozen = int(feature.args["layer"]) if feature is not None and feature.kind == "frozen" else -1
    n = spec.num_layers
    weights = [arrays[f"layer{k}.weight"].astype(np.float64) for k in range(n)]
    biases = [arrays[f"layer{k}.bias"].astype(np.float64) for k in range(n)]
    data, targets = arrays["data"].astype(np.float64), arrays["targets"].astype(np.float64)
    losses = np.empty(spec.steps, dtype=np.float64)
    # in torch's parameter order: layer0.weight, layer0.bias, layer1.weight, ...
    accumulated: list[np.ndarray] | None = None
    step = 0
    for _epoch in range(spec.epochs):
        for i in range(spec.num_batches):
            inputs = [data[i]]  # the input of each Linear layer
            pre = []  # each layer's output before ReLU
            for k in range(n):
                z = inputs[k] @ weights[k].T + biases[k]
                pre.append(z)
                if k < n - 1:
                    inputs.append(np.maximum(z, 0.0))
            diff = pre[-1] - targets[i]
            losses[step] = np.mean(diff * diff)
            grad = 2.0 * diff / diff.size / every  # d(mean squared error / every)/d(output)
            grad_w: list[np.ndarray] = [np.empty(0)] * n
            grad_b: list[np.ndarray] = [np.empty(0)] * n
            for k in reversed(range(n)):
                grad_w[k] = grad.T @ inputs[k]
                grad_b[k] = grad.sum(axis=0)
                if k > 0:
                    grad = (grad @ weights[k]) * (pre[k - 1] > 0)
            grads = [g for k in range(n) if k != frozen for g in (grad_w[k], grad_b[k])]
            accumulated = grads if accumulated is None else [a + g for a, g in zip(accumulated, grads, strict=True)]
            if (step + 1) % every:  # a micro-batch that only accumulates
                step += 1
                continue
            grads, accumulated = accumulated, None
            if feature is not None and feature.scheduler:
                update.args["lr"] = scheduled_lr(feature, base_lr, step // every)
            if step not in skipped:
                if clip:
                    total = np.sqrt(sum(float(np.sum(g * g)) for g in grads))
                    coef = min(spec.clip_max_norm / (total + _CLIP_EPS), 1.0)
                    grads = [g * coef for g in grads]
                if feature is not None and feature.kind == "clip_value":
                    limit = float(feature.args["clip_value"])
                    grads = [np.clip(g, -limit, limit) for g in grads]
                if groups:  # weights, then biases: the two groups, each its own update
                    update.step(weights, grads[0::2])
                    bias_update.step(biases, grads[1::2])
                else:
                    update.step([p for k in range(n) if k != frozen for p in (weights[k], biases[k])], grads)
            step += 1
    final = {f"layer{k}.weight": weights[k] for k in range(n)} | {f"layer{k}.bias": biases[k] for k in range(n)}
    return Reference(losses=losses, weights=final)


def scheduled_lr(feature: Feature, base_lr: float, iteration: int) -> float:
    """The lr a scheduler row sets for the optimizer step of ``iteration`` (0-based: the scheduler has stepped that many
    times since it was built), from PyTorch's documented closed form (``torch/optim/lr_scheduler.py``)."""
    args = feature.args
    if feature.python == "StepLR":
        return base_lr * float(args["gamma"]) ** (iteration // int(args["step_size"]))
    if feature.python == "CosineAnnealingLR":
        eta_min, t_max = float(args["eta_min"]), float(args["T_max"])
        return eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * iteration / t_max)) / 2
    raise ValueError(f"feature {feature.name}: the reference has no closed form for scheduler {feature.python!r}")


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
