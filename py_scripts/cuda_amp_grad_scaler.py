"""The ``cuda_amp_grad_scaler`` workload in PyTorch: autocast + ``torch.amp.GradScaler``.

Twin of ``r_scripts/cuda_amp_grad_scaler.R``. Mode ``autocast_scaler_clip`` unscales the gradients
and clips their norm before ``step``, as in the recipe. The scale is recorded after every
``update()``; a step is *skipped* when that update lowered the scale (the backoff rule fired because
the gradients held inf/NaN). ``overflow_steps`` (0-based) puts an inf into one gradient at those
steps: after ``backward`` (``overflow_point`` ``backward``, as a real fp16 overflow) or after an
explicit ``unscale_`` (``unscale``), where only a scaler that checks the gradients again in ``step``
can see it. Each step's scale is kept on the device and copied to the host after the loop: reading it
inside the loop would be a host sync per step on CUDA that ``default`` mode does not pay.
Every ``trace_point`` names one intermediate for the harness's trace (docs/tracing.md); it costs nothing
unless the harness traces this call.
Shell: ``python py_scripts/cuda_amp_grad_scaler.py --preset tiny --mode autocast_scaler --device cpu``.
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
    check_mode,
    clock,
    device_name,
    dtype_name,
    forward,
    linear_layers,
    load_fixtures,
    make_model,
    make_record,
    pause_gc,
    peak_memory_bytes,
    reset_peak_memory,
    resume_gc,
    save_final_weights,
    sync_device,
    torch_dtype,
    trace_parameters,
    trace_point,
)
from py_scripts.shell import main_cli

MODES = ("autocast_scaler", "autocast_scaler_clip")


def make_grad_scaler(spec: dict[str, Any]) -> tuple[torch.amp.GradScaler, str | None]:
    """The spec's gradient scaler, and which check of the binding was lifted to get it (never one here).

    ``torch.amp.GradScaler(device)`` takes CPU tensors itself; R's twin may have to lift R torch's CUDA-only
    check on CPU, and the record says so (``lifted_check``).
    """
    scaler = torch.amp.GradScaler(
        spec["device"], init_scale=spec["init_scale"], growth_factor=spec["growth_factor"],
        backoff_factor=spec["backoff_factor"], growth_interval=spec["growth_interval"],
    )
    return scaler, None


def inject_overflow(net: torch.nn.Sequential) -> None:
    """Put an inf into one gradient element (the first layer's first weight), as an fp16 overflow would."""
    with torch.no_grad():
        linear_layers(net)[0].weight.grad[0, 0] = float("inf")


def clip_coef(max_norm: float, total_norm: torch.Tensor) -> torch.Tensor:
    """The clip coefficient as ``clip_grad_norm_`` computes it from the norm it returns (for the trace only).

    The same expression as torch/nn/utils/clip_grad.py (``max_norm / (total_norm + 1e-6)``, before the
    clamp to 1), evaluated by this language's operators: a Python number over a tensor is
    ``Tensor.__rtruediv__``, which torch/_tensor.py computes as ``reciprocal() * max_norm``.
    """
    return max_norm / (total_norm + 1e-6)


def found_inf(scaler: torch.amp.GradScaler, opt: torch.optim.Optimizer) -> torch.Tensor:
    """What the scaler's inf check found for ``opt`` this step, summed over devices (0: the step ran).

    GradScaler keeps it per optimizer until ``update()``; ``_found_inf_per_device`` is its own accessor
    (torch/amp/grad_scaler.py), filled by ``unscale_`` and read by ``step`` to decide the skip.
    """
    return sum(scaler._found_inf_per_device(opt).values(), torch.zeros((), device=scaler._scale.device))  # type: ignore[union-attr]


def run_workload(spec: dict[str, Any], mode: str) -> dict[str, Any]:
    """Train the MLP for ``spec`` under autocast with gradient scaling (and clipping in ``*_clip``)."""
    workload_start = clock()
    check_mode(mode, MODES)
    torch.set_num_threads(spec["threads"])
    device = spec["device"]
    fixtures = load_fixtures(spec)
    data, targets = fixtures["data"], fixtures["targets"]
    net = make_model(spec, fixtures)
    loss_fn = torch.nn.MSELoss()
    opt = torch.optim.SGD(net.parameters(), lr=spec["lr"])
    use_clip = mode == "autocast_scaler_clip"
    amp_dtype = torch_dtype(spec["amp_dtype"])
    scaler, lifted_check = make_grad_scaler(spec)

    overflow_steps = set(spec["overflow_steps"])
    inject_after_unscale = spec["overflow_point"] == "unscale"
    losses: list[torch.Tensor] = []
    scales: list[torch.Tensor] = []
    output_dtype = loss_dtype = None
    seconds_per_epoch: list[float] = []
    gc_state = pause_gc()
    reset_peak_memory(device)
    sync_device(device)
    epoch_start = clock()
    step = 0
    for _epoch in range(spec["epochs"]):
        for i in range(spec["num_batches"]):
            trace_point(step, "batch.data", data[i])
            trace_point(step, "batch.targets", targets[i])
            with torch.autocast(device_type=device, dtype=amp_dtype):
                output = forward(net, data[i], step)
                loss = loss_fn(output, targets[i])
            trace_point(step, "loss", loss)
            if output_dtype is None:
                output_dtype, loss_dtype = dtype_name(output.dtype), dtype_name(loss.dtype)
            scaled_loss = scaler.scale(loss)
            trace_point(step, "loss.scaled", scaled_loss)
            scaled_loss.backward()
            trace_parameters(step, "grad.backward", net, grads=True)
            inject = step in overflow_steps
            if inject and not inject_after_unscale:
                inject_overflow(net)
            if use_clip or (inject and inject_after_unscale):
                scaler.unscale_(opt)
                trace_parameters(step, "grad.unscaled", net, grads=True)
                if inject and inject_after_unscale:
                    inject_overflow(net)
            if use_clip:
                total_norm = torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=spec["clip_max_norm"])
                trace_point(step, "clip.total_norm", total_norm)
                trace_point(step, "clip.coef", partial(clip_coef, spec["clip_max_norm"], total_norm))
                trace_parameters(step, "grad.clipped", net, grads=True)
            scaler.step(opt)
            trace_point(step, "scaler.found_inf", partial(found_inf, scaler, opt))
            trace_parameters(step, "param.stepped", net, grads=False)
            scaler.update()
            trace_point(step, "scaler.scale", scaler._scale)  # type: ignore[arg-type]
            trace_point(step, "scaler.growth_tracker", scaler._growth_tracker)  # type: ignore[arg-type]
            opt.zero_grad()
            losses.append(loss.detach())
            # get_scale() is .item(), a host sync. GradScaler has no public getter that does not sync;
            # _get_scale_async() is the one torch's own code uses (it returns the scale tensor, set by
            # the first scale()). A clone, because update() changes that tensor in place.
            scales.append(scaler._get_scale_async().detach().clone())  # type: ignore[union-attr]
            step += 1
        sync_device(device)
        epoch_end = clock()
        seconds_per_epoch.append(epoch_end - epoch_start)
        epoch_start = epoch_end
    gc_seconds = resume_gc(gc_state)

    loss_values = [float(v) for v in torch.stack(losses).float().cpu().tolist()]
    loss_scale = [float(v) for v in torch.stack(scales).cpu().tolist()]
    previous_scale = [float(spec["init_scale"]), *loss_scale[:-1]]
    skipped = [after < before for before, after in zip(previous_scale, loss_scale, strict=True)]
    save_final_weights(net, spec["weights_out"])
    return make_record(
        script="cuda_amp_grad_scaler", mode=mode, device=device, amp_dtype=spec["amp_dtype"],
        losses=loss_values, final_loss=loss_values[-1], loss_scale=loss_scale, skipped=skipped,
        skipped_steps=sum(skipped), output_dtype=output_dtype, loss_dtype=loss_dtype,
        weights_path=spec["weights_out"], seconds_total=sum(seconds_per_epoch),
        seconds_per_epoch=seconds_per_epoch, workload_start=workload_start, gc_seconds=gc_seconds,
        peak_memory_bytes=peak_memory_bytes(device),
        threads=torch.get_num_threads(), device_name=device_name(device), lifted_check=lifted_check,
    )


if __name__ == "__main__":
    main_cli(MODES, run_workload)
