"""The ``with_autocast`` workload in PyTorch: the training loop without a ``GradScaler``.

Twin of ``r_scripts/with_autocast.R``: same function, names and order of operations. Its modes (declared in
harness/contract/modes.py, handed over in the run spec's ``modes``) choose the precision either by autocast
(``default``: off; ``autocast``: on) or by the weights' dtype, the AMP guide's other way to train (``lowp_weights``:
weights and inputs in the AMP dtype, no autocast, its ``--fp16``; ``lowp_weights_scaled``: with a static loss scale,
its ``-s``). The optimizer is the run spec's (``make_optimizer``), and its loop feature a scheduler
(``make_scheduler``), a layer computed by a custom autograd function (``custom_layer``), or none. Every ``trace_point``
names one intermediate for the harness's trace (docs/tracing.md); it costs nothing unless the harness traces this call.
Shell: ``python py_scripts/with_autocast.py --preset tiny --mode autocast --optimizer adam --device cpu``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from py_scripts.common import (
    clip_norm_type,
    clock,
    custom_layer,
    device_name,
    dtype_name,
    forward,
    freeze_layer,
    load_fixtures,
    loop_feature,
    make_model,
    make_optimizer,
    make_record,
    make_scheduler,
    mode_properties,
    named_parameters,
    pause_gc,
    peak_memory_bytes,
    reset_peak_memory,
    resume_gc,
    save_final_weights,
    step_scheduler,
    sync_device,
    torch_dtype,
    trace_optimizer_state,
    trace_parameters,
    trace_point,
)
from py_scripts.patches import applied_switches, binding_patches
from py_scripts.shell import main_cli

SCRIPT = "with_autocast"


def unscale_static(net: torch.nn.Sequential, scale: torch.Tensor) -> None:
    """Divide every gradient by the static loss scale, in place, before the step (the AMP guide's ``-s``); a frozen
    layer's parameters have none."""
    with torch.no_grad():
        for _name, param in named_parameters(net):
            if param.grad is not None:
                param.grad.div_(scale)


def run_workload(spec: dict[str, Any], mode: str) -> dict[str, Any]:
    """Train the MLP for ``spec`` in ``mode`` with the spec's optimizer."""
    workload_start = clock()
    properties = mode_properties(spec, mode)
    torch.set_num_threads(spec["threads"])
    device = spec["device"]
    fixtures = load_fixtures(spec)
    data, targets = fixtures["data"], fixtures["targets"]
    amp_dtype = torch_dtype(spec["amp_dtype"])
    weights_dtype = amp_dtype if properties["weights"] == "amp" else torch.float32
    net = make_model(spec, fixtures).to(weights_dtype)
    freeze_layer(spec, net)  # the run spec's loop feature: a frozen layer, or none
    loss_fn = torch.nn.MSELoss()
    opt = make_optimizer(spec, net)
    # The static scale is a 0-dim float32 tensor, as GradScaler keeps its scale: a scaled loss is float32 in both languages.
    static_scale = torch.full((), spec["static_loss_scale"], dtype=torch.float32, device=device)
    use_static_scale = properties["scaler"] == "static"
    scheduler = make_scheduler(spec, opt)  # the run spec's loop feature: a scheduler, or none (the plain loop)
    custom = custom_layer(spec)  # the run spec's loop feature: a layer computed by a custom autograd function, or none
    clip_norm = loop_feature(spec, "clip_norm")  # the run spec's loop feature: a norm clip before the step, or none

    losses: list[torch.Tensor] = []
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
            for i in range(spec["num_batches"]):
                inputs, target = data[i].to(weights_dtype), targets[i].to(weights_dtype)  # float32: the tensors themselves
                trace_point(step, "batch.data", inputs)
                trace_point(step, "batch.targets", target)
                with torch.autocast(device_type=device, dtype=amp_dtype, enabled=properties["autocast"]):
                    output = forward(net, inputs, step, custom=custom)
                    loss = loss_fn(output, target)
                trace_point(step, "loss", loss)
                if output_dtype is None:
                    output_dtype, loss_dtype = dtype_name(output.dtype, spec), dtype_name(loss.dtype, spec)
                if use_static_scale:
                    scaled_loss = loss * static_scale
                    trace_point(step, "loss.scaled", scaled_loss)
                    scaled_loss.backward()
                    trace_parameters(step, "grad.backward", net, grads=True)
                    unscale_static(net, static_scale)
                    trace_parameters(step, "grad.unscaled", net, grads=True)
                else:
                    loss.backward()
                    trace_parameters(step, "grad.backward", net, grads=True)
                if clip_norm:  # on the gradients as they are: bfloat16 where the weights are
                    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=clip_norm["max_norm"],
                                                   norm_type=clip_norm_type(clip_norm))
                    trace_parameters(step, "grad.clipped", net, grads=True)
                opt.step()
                trace_optimizer_state(step, opt, net, spec)
                trace_parameters(step, "param.stepped", net, grads=False)
                opt.zero_grad()
                if scheduler is not None:
                    step_scheduler(step, spec, opt, scheduler, loss)
                losses.append(loss.detach())
                step += 1
            sync_device(device)
            epoch_end = clock()
            seconds_per_epoch.append(epoch_end - epoch_start)
            epoch_start = epoch_end
    gc_seconds = resume_gc(gc_state)

    loss_values = [float(v) for v in torch.stack(losses).float().cpu().tolist()]
    save_final_weights(net, spec["weights_out"])
    return make_record(
        spec, workload_start, script=SCRIPT, mode=mode, optimizer=spec["optimizer"]["name"], device=device,
        amp_dtype=spec["amp_dtype"], losses=loss_values, final_loss=loss_values[-1], loss_scale=None, skipped=None,
        skipped_steps=None, injected_steps=[], output_dtype=output_dtype, loss_dtype=loss_dtype, weights_path=spec["weights_out"],
        seconds_total=sum(seconds_per_epoch), seconds_per_epoch=seconds_per_epoch, gc_seconds=gc_seconds,
        peak_memory_bytes=peak_memory_bytes(device), threads=torch.get_num_threads(), device_name=device_name(device),
        lifted_check=None, switches=applied_switches(spec),
    )


if __name__ == "__main__":
    main_cli(SCRIPT, run_workload)
