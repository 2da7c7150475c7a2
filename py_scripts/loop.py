"""The training loop's frame both scripts share: its state, what it builds, the timed epochs, a step's forward and loss,
and the record it ends with. The twin of ``r_scripts/loop.R``.

A script's ``run_workload`` starts a loop (:func:`start_loop`), runs its epochs with its own ``train_step``
(:func:`run_epochs`) and returns :func:`finish_loop`'s record. What a loop feature changes is asked of its hooks
(:func:`py_scripts.features.hook`) at each point; what a mode changes is read from its properties.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from py_scripts.features import hook
from py_scripts.model import forward, make_model, model_loss
from py_scripts.patches import applied_switches, binding_patches
from py_scripts.record import device_name, make_record, save_final_weights
from py_scripts.run_spec import dtype_name, load_fixtures, mode_properties, torch_dtype
from py_scripts.scaler import make_grad_scaler
from py_scripts.timing import clock, pause_gc, peak_memory_bytes, reset_peak_memory, resume_gc, sync_device
from py_scripts.tracing import trace_point

__all__ = ["Loop", "build_loop", "finish_loop", "forward_loss", "run_epochs", "set_determinism", "start_loop"]


@dataclass
class Loop:
    """One call's training state: what the script's ``train_step`` and the feature hooks read and change (R keeps it in
    an environment). ``build``: :func:`build_loop` of this loop, for a hook that builds everything afresh (``resume``)."""

    spec: dict[str, Any]
    mode: str
    properties: dict[str, Any]
    device: str
    fixtures: dict[str, torch.Tensor]
    amp_dtype: torch.dtype
    weights_dtype: torch.dtype
    loss_fn: torch.nn.Module
    use_scaler: bool
    with_scaler: bool
    net: Any = None
    opts: list[torch.optim.Optimizer] = field(default_factory=list)
    scheduler: Any = None
    scaler: Any = None
    lifted_check: str | None = None
    static_scale: torch.Tensor | None = None
    step: int = 0
    losses: list[torch.Tensor] = field(default_factory=list)
    scales: list[torch.Tensor] = field(default_factory=list)
    injected_steps: list[int] = field(default_factory=list)
    output_dtype: str | None = None
    loss_dtype: str | None = None
    seconds_per_epoch: list[float] = field(default_factory=list)
    gc_seconds: float = 0.0


def set_determinism(device: str) -> None:
    """On CUDA, PyTorch's deterministic algorithms (``torch.use_deterministic_algorithms``; the worker's environment holds
    the ``CUBLAS_WORKSPACE_CONFIG`` it asks for): without them the conv net's bilinear interpolation differentiates by
    atomic adds (``upsample_bilinear2d_backward``) and no two runs agree bitwise; with them ``F.interpolate`` takes its
    decomposition, whose backward is deterministic (torch/nn/functional.py, ``interpolate``: "Use slow decomp whose
    backward will be in terms of index_put"). ``warn_only``: an operation with no deterministic implementation warns and
    runs, as it did. Off on the CPU, whose kernels the pairs compare as users run them (docs/determinism.md). R torch has
    no such switch (``r_scripts/loop.R``)."""
    torch.use_deterministic_algorithms(device == "cuda", warn_only=True)


def start_loop(spec: dict[str, Any], mode: str, with_scaler: bool) -> Loop:
    """The loop of ``mode``: its properties, the fixtures, the dtypes, and everything :func:`build_loop` builds;
    ``with_scaler``: the script scales with a ``GradScaler`` (enabled only where the mode's scaler is ``dynamic``)."""
    properties = mode_properties(spec, mode)
    torch.set_num_threads(spec["threads"])
    set_determinism(spec["device"])
    amp_dtype = torch_dtype(spec["amp_dtype"])
    loop = Loop(spec, mode, properties, spec["device"], load_fixtures(spec), amp_dtype,
                amp_dtype if properties["weights"] == "amp" else torch.float32, torch.nn.MSELoss(),
                properties["scaler"] == "dynamic", with_scaler)
    build_loop(loop)
    return loop


def build_loop(loop: Loop) -> None:
    """The model in the mode's weights dtype, then what the feature's hooks build on it (a frozen layer, the optimizers,
    a scheduler), and the scaler (``enabled=False`` outside the dynamic modes: its calls pass through)."""
    loop.net = make_model(loop.spec, loop.fixtures).to(loop.weights_dtype)
    hook(loop, "prepare")(loop)
    loop.opts = hook(loop, "optimizers")(loop)
    loop.scheduler = hook(loop, "scheduler")(loop)
    if loop.with_scaler:
        loop.scaler, loop.lifted_check = make_grad_scaler(loop.spec, enabled=loop.use_scaler)


def run_epochs(loop: Loop, train_step: Callable[[Loop], None]) -> None:
    """The timed loop: ``train_step`` once per batch of every epoch, each epoch's seconds, the collector paused, under
    the binding's functions as the run spec patches them (reconciliation switches; trace points when traced)."""
    spec, device = loop.spec, loop.device
    gc_state = pause_gc(spec)
    reset_peak_memory(device)
    sync_device(device)
    with binding_patches(spec):
        epoch_start = clock()
        for _epoch in range(spec["epochs"]):
            for _ in range(spec["num_batches"]):
                train_step(loop)
            sync_device(device)
            epoch_end = clock()
            loop.seconds_per_epoch.append(epoch_end - epoch_start)
            epoch_start = epoch_end
    loop.gc_seconds = resume_gc(gc_state)


def forward_loss(loop: Loop, step: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The step's batch (it follows the step, which a resumed run takes from its checkpoint) in the weights' dtype, the
    model's forward and the loss under the mode's autocast (and a feature's second loss beside it), traced."""
    i = step % loop.spec["num_batches"]
    # A copy of its own (clone): a GEMM's result depends on where its input lies (MKL's small-matrix kernels round
    # otherwise at an address not 16-byte aligned), and the two bindings' safetensors loaders place the file's tensors
    # differently; a fresh tensor lies where libtorch's allocator puts it (64-byte aligned) in both.
    inputs = loop.fixtures["data"][i].to(loop.weights_dtype).clone()
    target = loop.fixtures["targets"][i].to(loop.weights_dtype).clone()
    trace_point(step, "batch.data", inputs)
    trace_point(step, "batch.targets", target)
    unused, custom = hook(loop, "forward")(loop, step)
    second = hook(loop, "second_loss")
    loss1 = None
    with torch.autocast(device_type=loop.device, dtype=loop.amp_dtype, enabled=loop.properties["autocast"]):
        output = forward(loop.net, inputs, step, unused, custom)
        loss = model_loss(output, target, loop.loss_fn)
        if second is not None:
            loss1 = second(loop, output)
    trace_point(step, "loss", loss)
    if loop.output_dtype is None:
        loop.output_dtype, loop.loss_dtype = dtype_name(output.dtype, loop.spec), dtype_name(loss.dtype, loop.spec)
    return loss, loss1


def finish_loop(loop: Loop, workload_start: float, script: str) -> dict[str, Any]:
    """The run record: the losses, and with a dynamic scaler the scale after every iteration and the steps it skipped
    (an update that lowered the scale: the backoff rule fired because the gradients held inf/NaN); the final weights
    written where the run spec says."""
    spec, device = loop.spec, loop.device
    loss_values = [float(v) for v in torch.stack(loop.losses).float().cpu().tolist()]
    loss_scale = skipped = skipped_steps = None  # a disabled scaler has no scale (default mode)
    if loop.use_scaler:
        loss_scale = [float(v) for v in torch.stack(loop.scales).cpu().tolist()]
        previous_scale = [float(spec["init_scale"]), *loss_scale[:-1]]
        skipped = [after < before for before, after in zip(previous_scale, loss_scale, strict=True)]
        skipped_steps = sum(skipped)
    save_final_weights(loop.net, spec["weights_out"])
    return make_record(
        spec, workload_start, script=script, mode=loop.mode, optimizer=spec["optimizer"]["name"], device=device,
        amp_dtype=spec["amp_dtype"], losses=loss_values, final_loss=loss_values[-1], loss_scale=loss_scale, skipped=skipped,
        skipped_steps=skipped_steps, injected_steps=loop.injected_steps, output_dtype=loop.output_dtype,
        loss_dtype=loop.loss_dtype, weights_path=spec["weights_out"], seconds_total=sum(loop.seconds_per_epoch),
        seconds_per_epoch=loop.seconds_per_epoch, gc_seconds=loop.gc_seconds, peak_memory_bytes=peak_memory_bytes(device),
        threads=torch.get_num_threads(), device_name=device_name(device), lifted_check=loop.lifted_check,
        switches=applied_switches(spec),
    )
