"""The machine's own noise, measured in a worker: a fixed bare training step of the cell's own MLP, timed as a cell's loop is.

A cell's round-to-round spread mixes the cell's own irregularity with the machine's (other processes, frequency
changes, a neighbour on a shared VM). The harness times this loop after each timed round of a cell, in the same worker,
so a drift of the machine lands on both; the spread of these rounds is the *floor* the cell's spread is judged against
(:mod:`harness.judge.spread`).

The loop is the cell's kind of work, bare: the forward of a plain MLP of the cell's shapes (batch, widths, layers) under
autocast in the cell's GEMM dtype, a loss, the backward, and an in-place update of every weight. No module, no optimizer,
no scaler, no data loading and no script: nothing of the binding's code beyond the tensor ops, so what a script, the
harness or the binding adds to a cell is never in its floor. Until issue 47 the floor was a loop of fixed 256-square
matrix products. On the 2-vCPU EPYC (AVX512-BF16) of 2026-11-28 the machine's slow spells slowed a training step 2-5
times as much as such a product (timed step by step beside each other, the products' and the steps' seconds correlated
0.78, the steps +10-13 % where the products were +1.4-2.7 %), so the product floor read 0.6-1.1 % where the cells read
2.9-4.1 % in one process without the harness, and the spread target missed on the machine alone; this step, timed after
each round as the floor is, read 2.3-4.9 % beside the same cells (docs/timing.md, *What made the timings noisy*).

Twin of ``amp_parity_calibrate()`` in ``r_scripts/_bridge.R``: same names, same order. The R worker's handler
(:mod:`harness.worker_side.r_handler`) checks the request here and hands R :data:`FLOOR_LR`, so the number lives in one
place. Runs in a worker: ``torch`` is imported inside the function, so the parent can import this module without it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Mapping
from typing import Any

from harness.worker_side.matmul_peak import DEVICES, DTYPES

__all__ = ["FLOOR_LR", "SHAPE_FIELDS", "calibrate", "check_calibration"]

#: The step's learning rate: the update is there for its work (one elementwise pass over every weight, as an optimizer's
#: step makes), not to learn. Every weight starts at ``1/fan_in`` and every input at 1, so every activation is 1, every
#: output gradient 2 and every weight gradient about twice the batch (512 at ``bench``): at this rate a weight of
#: ``1/512`` moves by about 3e-7 of itself per step, so a floor round of thousands of steps does the same work from
#: first step to last (no value drifts towards a denormal or an overflow, in any of the GEMM dtypes), and the weights
#: are made afresh for each call.
FLOOR_LR = 1e-12
#: The request's fields that give the MLP's shapes: the run spec's names (harness.workload.spec), so the floor is the
#: cell's own shapes.
SHAPE_FIELDS = ("batch_size", "in_size", "out_size", "num_layers")


def check_calibration(request: Mapping[str, Any]) -> dict[str, Any]:
    """The loop's arguments from a ``calibrate`` request, refused where the loop would misread them; the one check both
    workers run (the R handler before it hands them to R).

    Raises:
        ValueError: an unknown device or dtype, or threads, iterations or a shape field missing or below 1.
    """
    device, dtype = request.get("device"), request.get("dtype")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(map(repr, DEVICES))}, but got {device!r}.")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(map(repr, DTYPES))}, but got {dtype!r}.")
    counts = {name: request.get(name) for name in ("threads", "iterations", *SHAPE_FIELDS)}
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number of at least 1, but got {value!r}.")
    return {"device": device, "dtype": dtype, **counts}


def calibrate(device: str, dtype: str, threads: int, iterations: int, batch_size: int, in_size: int, out_size: int,
              num_layers: int) -> dict[str, Any]:
    """Seconds of ``iterations`` bare training steps of a fixed MLP of the given shapes in ``dtype`` on ``device``.

    The MLP is the scripts' (``num_layers`` linear layers, ``in_size`` wide but the last, ReLU between them), without
    biases or modules: plain weight tensors, every one ``1/fan_in`` everywhere, and an input of ones, so every
    activation is 1 and every step the same work in every dtype (:data:`FLOOR_LR`). A step is the forward under autocast
    in ``dtype`` (off for float32, as a float32 cell's GEMMs run), the sum of squares in float32 as the loss, its backward,
    and each weight updated in place and its gradient dropped. One step before the clock pays a first call's kernel
    selection. The thread count is set for the loop and restored, as a worker goes on to run cells; the collector is off
    inside it, as a cell's loop runs with it off; the global RNG is not touched. Returns ``{"seconds", "iterations"}``.

    Raises:
        RuntimeError: ``device`` is ``cuda`` but CUDA is not available.
    """
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for, but torch.cuda.is_available() is False.")

    def sync_device() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    widths = [in_size] * num_layers + [out_size]
    previous_threads = torch.get_num_threads()
    was_enabled = gc.isenabled()
    torch.set_num_threads(threads)
    try:
        weights = [torch.full((widths[k + 1], widths[k]), 1.0 / widths[k], device=device, requires_grad=True)
                   for k in range(num_layers)]
        inputs = torch.ones(batch_size, in_size, device=device)

        def step() -> None:
            with torch.autocast(device_type=device, dtype=getattr(torch, dtype), enabled=dtype != "float32"):
                hidden = inputs
                for k, weight in enumerate(weights):
                    hidden = torch.nn.functional.linear(hidden, weight)
                    if k < num_layers - 1:
                        hidden = torch.relu(hidden)
                loss = hidden.float().pow(2).sum()
            loss.backward()  # type: ignore[no-untyped-call]
            with torch.no_grad():
                for weight in weights:
                    assert weight.grad is not None  # every weight is in the loss
                    weight.sub_(weight.grad, alpha=FLOOR_LR)
                    weight.grad = None

        step()
        gc.disable()
        sync_device()
        start = time.perf_counter()
        for _ in range(iterations):
            step()
        sync_device()
        seconds = time.perf_counter() - start
    finally:
        if was_enabled:
            gc.enable()
        torch.set_num_threads(previous_threads)
    return {"seconds": seconds, "iterations": iterations}
