"""The ``with_autocast`` workload in PyTorch: the training loop without a ``GradScaler``.

Twin of ``r_scripts/with_autocast.R``: same function, names and order of operations. Its modes (declared in
harness/contract/modes.py, handed over in the run spec's ``modes``) choose the precision either by autocast
(``default``: off; ``autocast``: on) or by the weights' dtype, the AMP guide's other way to train (``lowp_weights``:
weights and inputs in the AMP dtype, no autocast, its ``--fp16``; ``lowp_weights_scaled``: with a static loss scale,
its ``-s``). The model and the optimizer are the run spec's, and its loop feature's hooks (py_scripts/features.py) change the
loop where the feature's kind says (a scheduler, a frozen layer, param groups, a norm clip, a layer computed by a custom
autograd function). Every ``trace_point``
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

from py_scripts.features import hook, step_scheduler
from py_scripts.loop import Loop, finish_loop, forward_loss, run_epochs, start_loop
from py_scripts.model import named_parameters
from py_scripts.shell import main_cli
from py_scripts.timing import clock
from py_scripts.tracing import trace_optimizer_state, trace_parameters, trace_point

SCRIPT = "with_autocast"


def unscale_static(net: torch.nn.Module, scale: torch.Tensor) -> None:
    """Divide every gradient by the static loss scale, in place, before the step (the AMP guide's ``-s``); a frozen
    layer's parameters have none."""
    with torch.no_grad():
        for _name, param in named_parameters(net):
            if param.grad is not None:
                param.grad.div_(scale)


def train_step(loop: Loop) -> None:
    """One iteration: forward and loss, the backward (of the loss times the static scale, then the gradients divided by
    it, in the mode that scales statically), a feature's clip on the gradients as they are (bfloat16 where the weights
    are), the step, ``zero_grad`` and the scheduler's step."""
    step, net = loop.step, loop.net
    loss, _ = forward_loss(loop, step)
    if loop.static_scale is not None:
        scaled_loss = loss * loop.static_scale
        trace_point(step, "loss.scaled", scaled_loss)
        scaled_loss.backward()
        trace_parameters(step, "grad.backward", net, grads=True)
        unscale_static(net, loop.static_scale)
        trace_parameters(step, "grad.unscaled", net, grads=True)
    else:
        loss.backward()
        trace_parameters(step, "grad.backward", net, grads=True)
    clip = hook(loop, "clip")
    if clip is not None:
        clip(loop, step)
    for opt in loop.opts:
        opt.step()
        trace_optimizer_state(step, opt, net, loop.spec)
    trace_parameters(step, "param.stepped", net, grads=False)
    for opt in loop.opts:
        hook(loop, "zero_grad")(loop, opt)
    if loop.scheduler is not None:
        step_scheduler(step, loop.spec, loop.opts[0], loop.scheduler, loss)
    loop.losses.append(loss.detach())
    loop.step = hook(loop, "after_iteration")(loop, step) + 1


def run_workload(spec: dict[str, Any], mode: str) -> dict[str, Any]:
    """Train the run spec's model for ``spec`` in ``mode`` with the spec's optimizer."""
    workload_start = clock()
    loop = start_loop(spec, mode, with_scaler=False)
    if loop.properties["scaler"] == "static":
        # A 0-dim float32 tensor, as GradScaler keeps its scale: a scaled loss is float32 in both languages.
        loop.static_scale = torch.full((), spec["static_loss_scale"], dtype=torch.float32, device=loop.device)
    run_epochs(loop, train_step)
    return finish_loop(loop, workload_start, SCRIPT)


if __name__ == "__main__":
    main_cli(SCRIPT, run_workload)
