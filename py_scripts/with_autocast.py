"""The ``with_autocast`` workload in PyTorch: default precision vs ``torch.autocast`` (no scaler).

Twin of ``r_scripts/with_autocast.R``: same function, names and order of operations. Every
``trace_point`` names one intermediate for the harness's trace (docs/tracing.md); it costs nothing
unless the harness traces this call.
Shell: ``python py_scripts/with_autocast.py --preset tiny --mode autocast --device cpu``.
"""

from __future__ import annotations

import sys
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

MODES = ("default", "autocast")


def run_workload(spec: dict[str, Any], mode: str) -> dict[str, Any]:
    """Train the MLP for ``spec`` with autocast off (``default``) or on (``autocast``)."""
    workload_start = clock()
    check_mode(mode, MODES)
    torch.set_num_threads(spec["threads"])
    device = spec["device"]
    fixtures = load_fixtures(spec)
    data, targets = fixtures["data"], fixtures["targets"]
    net = make_model(spec, fixtures)
    loss_fn = torch.nn.MSELoss()
    opt = torch.optim.SGD(net.parameters(), lr=spec["lr"])
    use_autocast = mode == "autocast"
    amp_dtype = torch_dtype(spec["amp_dtype"])

    losses: list[torch.Tensor] = []
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
            with torch.autocast(device_type=device, dtype=amp_dtype, enabled=use_autocast):
                output = forward(net, data[i], step)
                loss = loss_fn(output, targets[i])
            trace_point(step, "loss", loss)
            if output_dtype is None:
                output_dtype, loss_dtype = dtype_name(output.dtype), dtype_name(loss.dtype)
            loss.backward()
            trace_parameters(step, "grad.backward", net, grads=True)
            opt.step()
            trace_parameters(step, "param.stepped", net, grads=False)
            opt.zero_grad()
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
        script="with_autocast", mode=mode, device=device, amp_dtype=spec["amp_dtype"],
        losses=loss_values, final_loss=loss_values[-1], loss_scale=None, skipped=None, skipped_steps=None,
        output_dtype=output_dtype, loss_dtype=loss_dtype, weights_path=spec["weights_out"],
        seconds_total=sum(seconds_per_epoch), seconds_per_epoch=seconds_per_epoch,
        workload_start=workload_start, gc_seconds=gc_seconds,
        peak_memory_bytes=peak_memory_bytes(device), threads=torch.get_num_threads(),
        device_name=device_name(device), lifted_check=None,
    )


if __name__ == "__main__":
    main_cli(MODES, run_workload)
