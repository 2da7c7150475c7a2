"""The ``cuda_amp_grad_scaler`` workload in PyTorch: autocast + ``torch.amp.GradScaler``.

Twin of ``r_scripts/cuda_amp_grad_scaler.R``. Its modes (harness/contract/modes.py, handed over in the run spec's
``modes``): ``default`` builds the scaler and autocast with ``enabled=False`` (the AMP recipe's ``use_amp=False``, so
×default compares within this script); ``autocast_scaler`` scales; ``autocast_scaler_clip`` also unscales the gradients
and clips their norm before ``step``, as in the recipe. The optimizer is the run spec's. The scale is recorded after
every ``update()``; a step is *skipped* when that update lowered the scale (the backoff rule fired because the gradients
held inf/NaN). ``overflow_steps`` (0-based) puts an inf into one gradient at those steps, in the modes with a scaler:
after ``backward`` (``overflow_point`` ``backward``, as a real fp16 overflow) or after an explicit ``unscale_``
(``unscale``), where only a scaler that checks the gradients again in ``step`` can see it; the record's
``injected_steps`` says where it did, so a script that ignores an injection fails its cell. The run spec's loop feature
(harness/workload/features.py) adds a learning-rate scheduler stepped after every ``update()`` (skipped steps included),
gradient accumulation (the scaler steps and updates every ``every`` micro-batches, each loss divided by ``every``; the
scale is recorded at every micro-batch, and an injection after ``unscale_`` happens only on a micro-batch that steps),
clipping by value after ``unscale_``, a layer unused on some steps with ``zero_grad``'s ``set_to_none`` as the row says,
two losses and two optimizers under the one scaler (each loss scaled, or both in one ``scale`` of a list; one ``update``,
once with an explicit new scale), a gradient penalty, a layer computed by a custom autograd function, or a checkpoint
and resume: each kind's hooks are py_scripts/features.py's. Each step's scale is kept
on the device and copied to the host after the loop: reading it inside the loop would be a host sync per step on CUDA
that ``default`` mode does not pay. Every ``trace_point`` names one intermediate for the harness's trace
(docs/tracing.md); it costs nothing unless the harness traces this call.
Shell: ``python py_scripts/cuda_amp_grad_scaler.py --preset tiny --mode autocast_scaler --optimizer adam --device cpu``.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from py_scripts.features import hook, step_scheduler
from py_scripts.loop import Loop, finish_loop, forward_loss, run_epochs, start_loop
from py_scripts.scaler import found_inf, inject_overflow
from py_scripts.shell import main_cli
from py_scripts.timing import clock
from py_scripts.tracing import trace_optimizer_state, trace_parameters, trace_point

SCRIPT = "cuda_amp_grad_scaler"


def keep_scale(loop: Loop) -> None:
    """This iteration's loss, and with a dynamic scaler its scale, kept on the device until the loop ends.

    ``get_scale()`` is ``.item()``, a host sync. GradScaler has no public getter that does not sync; ``_get_scale_async()``
    is the one torch's own code uses (it returns the scale tensor, set by the first ``scale()``). A clone, because
    ``update()`` changes that tensor in place.
    """
    if loop.use_scaler:
        loop.scales.append(loop.scaler._get_scale_async().detach().clone())


def unscale_and_clip(loop: Loop, step: int, inject: bool, after_unscale: bool) -> None:
    """Before the step: ``unscale_`` where anything clips or an inf goes in after it, the mode's norm clip and the
    feature's clip."""
    clip = hook(loop, "clip")
    if loop.properties["clip"] or clip is not None or (inject and after_unscale):
        for opt in loop.opts:
            loop.scaler.unscale_(opt)
        trace_parameters(step, "grad.unscaled", loop.net, grads=True)
        if inject and after_unscale:
            inject_overflow(loop.net)
    if loop.properties["clip"]:
        torch.nn.utils.clip_grad_norm_(loop.net.parameters(), max_norm=loop.spec["clip_max_norm"])
        trace_parameters(step, "grad.clipped", loop.net, grads=True)
    if clip is not None:
        clip(loop, step)


def step_and_update(loop: Loop, step: int) -> None:
    """Each optimizer's ``scaler.step`` (each one's inf check traced: where two are, only one may have found the inf),
    then the scaler's ``update`` as the feature's hook says, its scale and growth tracker traced."""
    scaler, net = loop.scaler, loop.net
    for k, opt in enumerate(loop.opts):
        scaler.step(opt)
        if loop.use_scaler:
            suffix = f".opt{k}" if len(loop.opts) > 1 else ""
            trace_point(step, "scaler.found_inf" + suffix, partial(found_inf, scaler, opt))
        trace_optimizer_state(step, opt, net, loop.spec)
    trace_parameters(step, "param.stepped", net, grads=False)
    hook(loop, "update")(loop, step)
    if loop.use_scaler:
        trace_point(step, "scaler.scale", scaler._scale)
        trace_point(step, "scaler.growth_tracker", scaler._growth_tracker)


def train_step(loop: Loop) -> None:
    """One iteration (a micro-batch under accumulation): forward and loss, the scaled backward as the feature's hook
    does it, an injected inf where the run spec says, and on an iteration that steps: unscale and clip, the steps, the
    update, ``zero_grad``, the scheduler's step, and the feature's hook after the iteration (a checkpoint and resume)."""
    step = loop.step
    loss, loss1 = forward_loss(loop, step)
    hook(loop, "backward")(loop, loss, loss1, step)
    trace_parameters(step, "grad.backward", loop.net, grads=True)
    steps_now = (step + 1) % hook(loop, "micro_batches")(loop) == 0  # under accumulation, the last micro-batch steps
    after_unscale = loop.spec["overflow_point"] == "unscale"
    inject = loop.use_scaler and step in loop.spec["overflow_steps"] and (steps_now or not after_unscale)
    if inject:
        loop.injected_steps.append(step)
    if inject and not after_unscale:
        inject_overflow(loop.net)
    if not steps_now:
        loop.losses.append(loss.detach())
        keep_scale(loop)
        loop.step = step + 1
        return
    unscale_and_clip(loop, step, inject, after_unscale)
    step_and_update(loop, step)
    for opt in loop.opts:
        hook(loop, "zero_grad")(loop, opt)  # set_to_none as the loop feature says (sometimes_used), else the default
    if loop.scheduler is not None:
        step_scheduler(step, loop.spec, loop.opts[0], loop.scheduler, loss)
    loop.losses.append(loss.detach())
    keep_scale(loop)
    loop.step = hook(loop, "after_iteration")(loop, step) + 1


def run_workload(spec: dict[str, Any], mode: str) -> dict[str, Any]:
    """Train the run spec's model for ``spec`` in ``mode``: under autocast with gradient scaling (and clipping in
    ``*_clip``), or with both disabled (``default``), with the spec's optimizer."""
    workload_start = clock()
    loop = start_loop(spec, mode, with_scaler=True)
    run_epochs(loop, train_step)
    return finish_loop(loop, workload_start, SCRIPT)


if __name__ == "__main__":
    main_cli(SCRIPT, run_workload)
