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
once with an explicit new scale), a gradient penalty (:func:`gradient_norm`), or a layer computed by a custom autograd
function. Each step's scale is kept
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

from py_scripts.common import (
    checkpoint_prefix,
    clip_norm_type,
    clock,
    custom_layer,
    device_name,
    dtype_name,
    forward,
    found_inf,
    freeze_layer,
    inject_overflow,
    load_checkpoint,
    load_fixtures,
    loop_feature,
    make_grad_scaler,
    make_model,
    make_optimizers,
    make_record,
    make_scheduler,
    mode_properties,
    pause_gc,
    peak_memory_bytes,
    reset_peak_memory,
    resume_gc,
    save_checkpoint,
    save_final_weights,
    step_scheduler,
    sync_device,
    torch_dtype,
    trace_optimizer_state,
    trace_parameters,
    trace_point,
    unused_layer,
    zero_grad,
)
from py_scripts.patches import applied_switches, binding_patches
from py_scripts.shell import main_cli

SCRIPT = "cuda_amp_grad_scaler"


def gradient_norm(scaler: torch.amp.GradScaler, loss: torch.Tensor, net: torch.nn.Sequential, step: int) -> torch.Tensor:
    """The norm of the loss's gradients as PyTorch's AMP examples compute it for a gradient penalty: the gradients of the
    scaled loss with ``create_graph`` (so the penalty's own backward goes through them), unscaled by hand (times
    ``1 / get_scale()``; 1.0 where the scaler is disabled), the norm of them all. The caller adds it under autocast."""
    scaled_grads = torch.autograd.grad(scaler.scale(loss), list(net.parameters()), create_graph=True)
    inv_scale = 1.0 / scaler.get_scale()
    grads = [grad * inv_scale for grad in scaled_grads]
    norm = torch.stack([grad.pow(2).sum() for grad in grads]).sum().sqrt()
    trace_point(step, "penalty.grad_norm", norm)
    return norm


def run_workload(spec: dict[str, Any], mode: str) -> dict[str, Any]:
    """Train the MLP for ``spec`` in ``mode``: under autocast with gradient scaling (and clipping in ``*_clip``), or with
    both disabled (``default``), with the spec's optimizer."""
    workload_start = clock()
    properties = mode_properties(spec, mode)
    torch.set_num_threads(spec["threads"])
    device = spec["device"]
    fixtures = load_fixtures(spec)
    data, targets = fixtures["data"], fixtures["targets"]
    net = make_model(spec, fixtures)
    freeze_layer(spec, net)  # the run spec's loop feature: a frozen layer, or none
    loss_fn = torch.nn.MSELoss()
    opts = make_optimizers(spec, net)  # one, or two under the loop feature multi_optimizer
    use_scaler = properties["scaler"] == "dynamic"
    use_clip = properties["clip"]
    amp_dtype = torch_dtype(spec["amp_dtype"])
    scaler, lifted_check = make_grad_scaler(spec, enabled=use_scaler)
    scheduler = make_scheduler(spec, opts[0])
    accumulate = loop_feature(spec, "accumulate")
    every = accumulate["every"] if accumulate else 1
    clip_value = loop_feature(spec, "clip_value")
    clip_norm = loop_feature(spec, "clip_norm")
    multi = loop_feature(spec, "multi_optimizer")
    penalty = loop_feature(spec, "penalty")
    custom = custom_layer(spec)  # a layer computed by a custom autograd function, or none
    resume = loop_feature(spec, "resume")

    overflow_steps = set(spec["overflow_steps"]) if use_scaler else set()
    injected_steps: list[int] = []
    inject_after_unscale = spec["overflow_point"] == "unscale"
    losses: list[torch.Tensor] = []
    scales: list[torch.Tensor] = []
    output_dtype = loss_dtype = None
    seconds_per_epoch: list[float] = []
    gc_state = pause_gc(spec)
    reset_peak_memory(device)
    sync_device(device)
    # The binding's functions as the run spec patches them (reconciliation switches; trace points when traced).
    with binding_patches(spec):
        epoch_start = clock()
        step = 0
        for _epoch in range(spec["epochs"]):
            for _ in range(spec["num_batches"]):
                i = step % spec["num_batches"]  # the batch follows the step, which a resumed run takes from its checkpoint
                trace_point(step, "batch.data", data[i])
                trace_point(step, "batch.targets", targets[i])
                with torch.autocast(device_type=device, dtype=amp_dtype, enabled=properties["autocast"]):
                    output = forward(net, data[i], step, unused_layer(spec, step), custom)
                    loss = loss_fn(output, targets[i])
                    if multi:  # the second loss: an output penalty, the MSE against zero
                        loss1 = multi["second_loss_weight"] * loss_fn(output, torch.zeros_like(output))
                trace_point(step, "loss", loss)
                if output_dtype is None:
                    output_dtype, loss_dtype = dtype_name(output.dtype, spec), dtype_name(loss.dtype, spec)
                if multi:  # each scaled loss's backward; the first keeps the graph the second goes through
                    scaled = scaler.scale([loss, loss1]) if multi["scale_list"] else [scaler.scale(loss), scaler.scale(loss1)]
                    trace_point(step, "loss.scaled", scaled[0])
                    trace_point(step, "loss1.scaled", scaled[1])
                    scaled[0].backward(retain_graph=True)
                    scaled[1].backward()
                else:
                    total = loss
                    if penalty:  # the AMP examples' gradient penalty, added to the loss under autocast
                        with torch.autocast(device_type=device, dtype=amp_dtype, enabled=properties["autocast"]):
                            total = loss + penalty["weight"] * gradient_norm(scaler, loss, net, step)
                    scaled_loss = scaler.scale(total / every if accumulate else total)
                    trace_point(step, "loss.scaled", scaled_loss)
                    scaled_loss.backward()
                trace_parameters(step, "grad.backward", net, grads=True)
                steps_now = (step + 1) % every == 0  # under accumulation, only the last micro-batch of each group steps
                inject = step in overflow_steps and (steps_now or not inject_after_unscale)
                if inject:
                    injected_steps.append(step)
                if inject and not inject_after_unscale:
                    inject_overflow(net)
                if not steps_now:
                    losses.append(loss.detach())
                    if use_scaler:
                        scales.append(scaler._get_scale_async().detach().clone())  # type: ignore[union-attr]
                    step += 1
                    continue
                if use_clip or clip_value or clip_norm or (inject and inject_after_unscale):
                    for opt in opts:
                        scaler.unscale_(opt)
                    trace_parameters(step, "grad.unscaled", net, grads=True)
                    if inject and inject_after_unscale:
                        inject_overflow(net)
                if use_clip:
                    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=spec["clip_max_norm"])
                    trace_parameters(step, "grad.clipped", net, grads=True)
                if clip_value:
                    torch.nn.utils.clip_grad_value_(net.parameters(), clip_value=clip_value["clip_value"])
                    trace_parameters(step, "grad.clipped", net, grads=True)
                if clip_norm:
                    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=clip_norm["max_norm"],
                                                   norm_type=clip_norm_type(clip_norm))
                    trace_parameters(step, "grad.clipped", net, grads=True)
                for k, opt in enumerate(opts):
                    scaler.step(opt)
                    if use_scaler:  # each optimizer's own: where two are, only one may have found the inf
                        trace_point(step, "scaler.found_inf" + (f".opt{k}" if multi else ""), partial(found_inf, scaler, opt))
                    trace_optimizer_state(step, opt, net, spec)
                trace_parameters(step, "param.stepped", net, grads=False)
                if multi and step == multi["new_scale_step"]:
                    scaler.update(float(multi["new_scale"]))  # GradScaler takes a Python float or a tensor
                else:
                    scaler.update()
                if use_scaler:
                    trace_point(step, "scaler.scale", scaler._scale)  # type: ignore[arg-type]
                    trace_point(step, "scaler.growth_tracker", scaler._growth_tracker)  # type: ignore[arg-type]
                for opt in opts:
                    zero_grad(spec, opt)  # set_to_none as the loop feature says (sometimes_used), else the default
                if scheduler is not None:
                    step_scheduler(step, spec, opts[0], scheduler, loss)
                losses.append(loss.detach())
                if use_scaler:
                    # get_scale() is .item(), a host sync. GradScaler has no public getter that does not sync;
                    # _get_scale_async() is the one torch's own code uses (it returns the scale tensor, set by
                    # the first scale()). A clone, because update() changes that tensor in place.
                    scales.append(scaler._get_scale_async().detach().clone())  # type: ignore[union-attr]
                if resume and step + 1 == resume["at_step"]:
                    # Checkpoint, then build everything afresh and train on from the checkpoint (the other language's
                    # where the run spec hands one over: resume_from).
                    prefix = checkpoint_prefix(spec)
                    save_checkpoint(spec, prefix, step + 1, net, opts[0], scheduler, scaler)  # resume runs one optimizer
                    net = make_model(spec, fixtures)
                    freeze_layer(spec, net)
                    opts = make_optimizers(spec, net)
                    scheduler = make_scheduler(spec, opts[0])
                    scaler, lifted_check = make_grad_scaler(spec, enabled=use_scaler)
                    step = load_checkpoint(spec, spec["resume_from"] or prefix, net, opts[0], scheduler, scaler, step) - 1
                step += 1
            sync_device(device)
            epoch_end = clock()
            seconds_per_epoch.append(epoch_end - epoch_start)
            epoch_start = epoch_end
    gc_seconds = resume_gc(gc_state)

    loss_values = [float(v) for v in torch.stack(losses).float().cpu().tolist()]
    loss_scale = skipped = skipped_steps = None  # a disabled scaler has no scale (default mode)
    if use_scaler:
        loss_scale = [float(v) for v in torch.stack(scales).cpu().tolist()]
        previous_scale = [float(spec["init_scale"]), *loss_scale[:-1]]
        skipped = [after < before for before, after in zip(previous_scale, loss_scale, strict=True)]
        skipped_steps = sum(skipped)
    save_final_weights(net, spec["weights_out"])
    return make_record(
        spec, workload_start, script=SCRIPT, mode=mode, optimizer=spec["optimizer"]["name"], device=device,
        amp_dtype=spec["amp_dtype"], losses=loss_values, final_loss=loss_values[-1], loss_scale=loss_scale, skipped=skipped,
        skipped_steps=skipped_steps, injected_steps=injected_steps, output_dtype=output_dtype, loss_dtype=loss_dtype,
        weights_path=spec["weights_out"], seconds_total=sum(seconds_per_epoch), seconds_per_epoch=seconds_per_epoch,
        gc_seconds=gc_seconds, peak_memory_bytes=peak_memory_bytes(device), threads=torch.get_num_threads(),
        device_name=device_name(device), lifted_check=lifted_check, switches=applied_switches(spec),
    )


if __name__ == "__main__":
    main_cli(SCRIPT, run_workload)
