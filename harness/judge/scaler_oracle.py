"""The loss-scaler oracle: a recorded scale history against GradScaler's rule, replayed exactly.

Parity can only say that Python's and R's scalers agree; on CUDA R's scaler is R code (R torch's
``R/autocast.R``), so a bug in it would have nothing to be caught against but Python's. This module
is the rule both claim to implement, torch's ``_amp_update_scale_`` (aten ``AmpKernels.cu`` and
``cpu/AmpGradScalerKernels.cpp``, torch 2.13; PyTorch's ``test_grad_scaling_update_scale`` checks the
same), in the scale's own float32 arithmetic:

- the scale starts as ``float32(init_scale)`` and the growth tracker at 0;
- a step whose gradients held inf/NaN: ``scale = float32(scale * backoff_factor)`` (the product in
  double, as the kernel multiplies a float by a double), tracker = 0;
- otherwise tracker + 1; when that reaches ``growth_interval``: ``scale = float32(scale * growth_factor)``
  unless that is inf (the kernel never grows past float32's range), and tracker = 0.

Which steps held inf/NaN is not recorded by the scripts; they record each step's scale and mark a
step *skipped* when the scale went down. So the oracle also checks what that marking cannot hide: a
step given an injected overflow (``overflow_steps``) or with a non-finite loss must be skipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.model.verdicts import ScalerCheck

__all__ = ["ScalerCheck", "check_scale_history", "expected_scale_history"]


def expected_scale_history(
    init_scale: float, growth_factor: float, backoff_factor: float, growth_interval: int, found_inf: Sequence[bool],
    explicit: Mapping[int, float] | None = None,
) -> list[float]:
    """The scale after each step's ``update()`` under GradScaler's rule, given which steps found inf/NaN.

    ``explicit``: the updates (0-based) called with a new scale (``update(new_scale)``): the scale becomes it (a float32
    ``fill_``) and the growth tracker stands, whatever the step found (torch/amp/grad_scaler.py ``update``).
    """
    scale = np.float32(init_scale)
    tracker = 0
    history = []
    for update, inf in enumerate(found_inf):
        if explicit and update in explicit:
            scale = np.float32(explicit[update])
        elif inf:
            scale = np.float32(float(scale) * backoff_factor)
            tracker = 0
        else:
            tracker += 1
            if tracker == growth_interval:
                with np.errstate(over="ignore"):  # beyond float32's range: inf, and the kernel keeps the scale
                    grown = np.float32(float(scale) * growth_factor)
                if np.isfinite(grown):
                    scale = grown
                tracker = 0
        history.append(float(scale))
    return history


def check_scale_history(record: dict[str, Any], spec: dict[str, Any], micro_batches: int = 1,
                        explicit: Mapping[int, float] | None = None) -> ScalerCheck:
    """Judge ``record``'s ``loss_scale`` and ``skipped`` against the rule for ``spec``'s scaler settings.

    Compares first, then judges once: the first broken step is named with both values. ``micro_batches``: under gradient
    accumulation (a loop feature) the scaler updates once every that many recorded steps, at the last of each group; a
    step between records the scale as it stands, and an overflow or a non-finite loss in a group must skip its update.
    ``explicit``: the updates given a new scale (a loop feature's ``update(new_scale)``; :func:`expected_scale_history`).
    """

    def update_of(step: int) -> int:  # the recorded step whose update sees ``step``'s gradients
        return (step // micro_batches) * micro_batches + micro_batches - 1

    scales, skipped = record.get("loss_scale"), record.get("skipped")
    losses = record.get("losses") or []
    if not isinstance(scales, list) or not isinstance(skipped, list) or len(scales) != len(skipped):
        return ScalerCheck(False, len(losses), (), None, None, None, "no usable loss_scale/skipped history recorded")
    steps = len(scales)
    skipped_steps = tuple(i for i, s in enumerate(skipped) if s)
    # What the record's own marking says: skipped where the scale went down.
    previous = [float(np.float32(spec["init_scale"])), *scales[:-1]]
    for step, (before, after, flag) in enumerate(zip(previous, scales, skipped, strict=True)):
        if bool(flag) != (after < before):
            why = f"skipped is {bool(flag)} but the scale went {before:.9g} -> {after:.9g}"
            return _broken(steps, skipped_steps, step, None, after, why)
    for step in spec.get("overflow_steps") or []:
        if update_of(step) < steps and not skipped[update_of(step)]:
            return _broken(
                steps, skipped_steps, step, None, scales[step],
                f"an inf was injected into a gradient but the step was not skipped (scale {scales[step]:.9g})",
            )
    for step, loss in enumerate(losses[:steps]):
        if (loss is None or not math.isfinite(float(loss))) and update_of(step) < steps and not skipped[update_of(step)]:
            return _broken(steps, skipped_steps, step, None, scales[step], f"the loss is {loss} but the step was not skipped")
    updates = [step for step in range(steps) if step == update_of(step)]
    after_update = expected_scale_history(
        float(spec["init_scale"]), float(spec["growth_factor"]), float(spec["backoff_factor"]), int(spec["growth_interval"]),
        [bool(skipped[step]) for step in updates], explicit,
    )
    expected, scale = [], float(np.float32(spec["init_scale"]))
    for step in range(steps):  # between updates the scale stands
        if step == update_of(step):
            scale = after_update[step // micro_batches]
        expected.append(scale)
    for step, (want, got) in enumerate(zip(expected, scales, strict=True)):
        if want != got:
            return _broken(steps, skipped_steps, step, want, got, f"scale {got:.9g} where GradScaler's rule gives {want:.9g}")
    growths = sum(1 for before, after in zip(previous, scales, strict=True) if after > before)
    return ScalerCheck(
        True, steps, skipped_steps, None, None, None,
        f"scale follows GradScaler's rule at all {steps} steps ({growths} growths, {len(skipped_steps)} back-offs"
        + (f" at steps {list(skipped_steps)}" if skipped_steps else "") + ")",
    )


def _broken(steps: int, skipped_steps: tuple[int, ...], step: int, expected: float | None, recorded: float, why: str) -> ScalerCheck:
    message = f"loss scale breaks GradScaler's rule at step {step}: {why}"
    return ScalerCheck(False, steps, skipped_steps, step, expected, float(recorded), message)
