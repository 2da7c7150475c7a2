"""The loop features' hooks: for each kind of harness/workload/features.py, what it does at the training loop's points,
in one place. The twin of ``r_scripts/features.R``; the float64 reference of each kind is
``harness/judge/loop_kinds.py``.

The training loop (:mod:`py_scripts.loop` and the scripts' ``train_step``) asks :func:`hook` for the function at each of
its points (:data:`PLAIN_LOOP` names them, with what the plain loop does there), and gets the run spec's feature's where
its kind has one (:data:`FEATURE_HOOKS`). A new kind is a set of hooks here and in R, and its reference
(tests/unit/scripts/test_feature_hooks.py fails while one is missing); a new row of a known kind needs none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from py_scripts.checkpoint import checkpoint_prefix, load_checkpoint, save_checkpoint
from py_scripts.model import layer_parameters
from py_scripts.optimizer import make_optimizer
from py_scripts.tracing import trace_parameters, trace_point, trace_scheduler

if TYPE_CHECKING:
    from py_scripts.loop import Loop

__all__ = ["FEATURE_HOOKS", "PLAIN_LOOP", "epoch_factor", "hook", "loop_feature", "make_scheduler", "scaled_backward",
           "step_scheduler"]


def loop_feature(spec: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The arguments of the run spec's loop feature (``feature``: its row of harness/workload/features.py) when it is of
    ``kind``, else ``None`` (the plain loop, or another feature)."""
    feature = spec.get("feature")
    return dict(feature["args"]) if feature and feature["kind"] == kind else None


def hook(loop: Loop, point: str) -> Any:
    """The function at the loop's ``point``: the run spec's feature kind's (:data:`FEATURE_HOOKS`), else the plain loop's
    (:data:`PLAIN_LOOP`; ``None`` where the plain loop does nothing there)."""
    feature = loop.spec.get("feature")
    hooks = FEATURE_HOOKS[feature["kind"]] if feature else {}
    return hooks.get(point, PLAIN_LOOP[point])


def one_optimizer(loop: Loop) -> list[torch.optim.Optimizer]:
    """The plain loop's optimizers: the run spec's one over every parameter."""
    return [make_optimizer(loop.spec, loop.net)]


def scaled_backward(loop: Loop, loss: torch.Tensor, loss1: torch.Tensor | None, step: int) -> None:
    """The plain loop's backward: the loss scaled by the scaler (its calls pass through where it is disabled), traced,
    and its backward."""
    scaled_loss = loop.scaler.scale(loss)
    trace_point(step, "loss.scaled", scaled_loss)
    scaled_loss.backward()


# scheduler (and resume, whose row may checkpoint one): built once per optimizer, stepped after every update

def make_scheduler(spec: dict[str, Any], opt: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The run spec's learning-rate scheduler (a ``scheduler`` feature, or a ``resume`` one that checkpoints a scheduler:
    the row names its class; ``torch.optim.lr_scheduler.<class>(opt, **args)``), or ``None``. R's twin calls the R torch
    function the row names with the same values."""
    feature = spec.get("feature")
    if not feature or not feature["python"]["class"]:
        return None
    python = spec["feature"]["python"]
    args = dict(python["args"])
    if spec["feature"]["lr_lambda"] is not None:  # the row's declared factor, not code
        args["lr_lambda"] = epoch_factor(spec["feature"]["lr_lambda"])
    scheduler: torch.optim.lr_scheduler.LRScheduler = getattr(torch.optim.lr_scheduler, python["class"])(opt, **args)
    return scheduler


def epoch_factor(declared: dict[str, Any]) -> Callable[[int], float]:
    """A row's declared ``lr_lambda`` (harness/workload/features.py, ``LR_LAMBDA_ARGS``): a linear warmup then an
    inverse-time decay, in the order of operations R's twin uses."""
    warmup, decay = declared["warmup"], declared["decay"]
    return lambda epoch: min(1.0, (epoch + 1) / warmup) / (1 + decay * epoch)


def step_scheduler(step: int, spec: dict[str, Any], opt: torch.optim.Optimizer,
                   scheduler: torch.optim.lr_scheduler.LRScheduler, loss: torch.Tensor) -> None:
    """The scheduler's step after the iteration's ``update()`` (skipped iterations included), fed the iteration's loss
    where the row says (ReduceLROnPlateau's ``step(metrics)``, as its docs' loop does), then its trace."""
    if spec["feature"]["on_loss"]:
        scheduler.step(loss.detach())  # type: ignore[arg-type]  # ReduceLROnPlateau.step(metrics), the loss tensor as it is
    else:
        scheduler.step()
    trace_scheduler(step, spec, opt, scheduler)


def grouped_optimizers(loop: Loop) -> list[torch.optim.Optimizer]:
    """The run spec's optimizer with the ``param_groups`` row's two groups where the row asks for them (a ``param_groups``
    row, or a scheduler's that reads per-group values: ``groups``), else one group."""
    return [make_optimizer(loop.spec, loop.net, groups=loop.spec["feature"]["param_groups"])]


def the_scheduler(loop: Loop) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The row's scheduler over the first optimizer."""
    return make_scheduler(loop.spec, loop.opts[0])


# accumulate: every micro-batches per optimizer step, each loss divided by every

def micro_batches(loop: Loop) -> int:
    """Micro-batches per optimizer step: the row's ``every``."""
    return int(loop.spec["feature"]["args"]["every"])


def accumulated_backward(loop: Loop, loss: torch.Tensor, loss1: torch.Tensor | None, step: int) -> None:
    """The plain backward of the loss divided by ``every``."""
    scaled_backward(loop, loss / loop.spec["feature"]["args"]["every"], loss1, step)


# clip_value, clip_norm: after unscale_ (the scaler script) or on the gradients as they are (with_autocast)

def clip_by_value(loop: Loop, step: int) -> None:
    """``clip_grad_value_`` with the row's ``clip_value``, traced."""
    torch.nn.utils.clip_grad_value_(loop.net.parameters(), clip_value=loop.spec["feature"]["args"]["clip_value"])
    trace_parameters(step, "grad.clipped", loop.net, grads=True)


def clip_norm_type(clip_norm: dict[str, Any]) -> float:
    """A ``clip_norm`` row's ``norm_type`` for ``clip_grad_norm_``: infinity where ``inf_norm`` is 1 (the run spec's JSON
    has no infinity, so the row carries a flag), else 2."""
    return float("inf") if clip_norm["inf_norm"] else 2.0


def clip_by_norm(loop: Loop, step: int) -> None:
    """``clip_grad_norm_`` with the row's ``max_norm`` and norm type, traced."""
    clip_norm = loop.spec["feature"]["args"]
    torch.nn.utils.clip_grad_norm_(loop.net.parameters(), max_norm=clip_norm["max_norm"], norm_type=clip_norm_type(clip_norm))
    trace_parameters(step, "grad.clipped", loop.net, grads=True)


# frozen: one layer's parameters without requires_grad, still handed to the optimizer

def freeze_layer(loop: Loop) -> None:
    """The row's layer gets ``requires_grad`` false (its parameters are still handed to the optimizer, which then sees
    them without a gradient at every step)."""
    for param in layer_parameters(loop.net, [loop.spec["feature"]["args"]["layer"]]):
        param.requires_grad_(False)


# sometimes_used: a layer left out of some steps' forward; zero_grad's set_to_none as the row says

def forward_unused(loop: Loop, step: int) -> tuple[int, Any]:
    """The layer left out of the forward at ``step`` (0-based), or -1 (every layer used): the row's layer, on the steps
    that are not a multiple of its ``every``."""
    used = loop.spec["feature"]["args"]
    return (int(used["layer"]) if step % used["every"] != 0 else -1), None


def zero_grad(loop: Loop, opt: torch.optim.Optimizer) -> None:
    """``opt.zero_grad()`` as the loop feature says: a ``sometimes_used`` row's ``set_to_none`` (1 true, 0 false, -1 no
    argument: the binding's default, PyTorch's True); otherwise with no argument, as the plain loop always did."""
    used = loop_feature(loop.spec, "sometimes_used")
    if used is None or used["set_to_none"] < 0:
        opt.zero_grad()
    else:
        opt.zero_grad(set_to_none=bool(used["set_to_none"]))


def plain_zero_grad(loop: Loop, opt: torch.optim.Optimizer) -> None:
    """The plain loop's ``zero_grad()``, with no argument."""
    opt.zero_grad()


# multi_optimizer: two losses, two optimizers split by layer, one scaler; one update with an explicit new scale

def two_optimizers(loop: Loop) -> list[torch.optim.Optimizer]:
    """Two of the row's optimizer: the first over the model's layers before the last ``head_layers``, the second over
    those."""
    layers = loop.spec["model"]["layers"]
    split = layers - loop.spec["feature"]["args"]["head_layers"]
    return [make_optimizer(loop.spec, loop.net, range(split)), make_optimizer(loop.spec, loop.net, range(split, layers))]


def second_loss(loop: Loop, output: torch.Tensor) -> torch.Tensor:
    """The second loss, under autocast as the first: an output penalty, the MSE against zero, times its weight."""
    return loop.spec["feature"]["args"]["second_loss_weight"] * loop.loss_fn(output, torch.zeros_like(output))


def two_backward(loop: Loop, loss: torch.Tensor, loss1: torch.Tensor | None, step: int) -> None:
    """Each scaled loss's backward (each scaled, or both in one ``scale`` of a list); the first keeps the graph the
    second goes through."""
    scaler = loop.scaler
    scaled = scaler.scale([loss, loss1]) if loop.spec["feature"]["args"]["scale_list"] else [scaler.scale(loss), scaler.scale(loss1)]
    trace_point(step, "loss.scaled", scaled[0])
    trace_point(step, "loss1.scaled", scaled[1])
    scaled[0].backward(retain_graph=True)
    scaled[1].backward()


def explicit_update(loop: Loop, step: int) -> None:
    """The scaler's ``update()``; at the row's ``new_scale_step``, with its ``new_scale``."""
    multi = loop.spec["feature"]["args"]
    if step == multi["new_scale_step"]:
        loop.scaler.update(float(multi["new_scale"]))  # GradScaler takes a Python float or a tensor
    else:
        loop.scaler.update()


def plain_update(loop: Loop, step: int) -> None:
    """The plain loop's ``update()``."""
    loop.scaler.update()


# penalty: the AMP examples' gradient penalty

def gradient_norm(scaler: torch.amp.GradScaler, loss: torch.Tensor, net: torch.nn.Module, step: int) -> torch.Tensor:
    """The norm of the loss's gradients as PyTorch's AMP examples compute it for a gradient penalty: the gradients of the
    scaled loss with ``create_graph`` (so the penalty's own backward goes through them), unscaled by hand (times
    ``1 / get_scale()``; 1.0 where the scaler is disabled), the norm of them all. The caller adds it under autocast."""
    scaled_grads = torch.autograd.grad(scaler.scale(loss), list(net.parameters()), create_graph=True)
    inv_scale = 1.0 / scaler.get_scale()
    grads = [grad * inv_scale for grad in scaled_grads]
    norm = torch.stack([grad.pow(2).sum() for grad in grads]).sum().sqrt()
    trace_point(step, "penalty.grad_norm", norm)
    return norm


def penalized_backward(loop: Loop, loss: torch.Tensor, loss1: torch.Tensor | None, step: int) -> None:
    """The plain backward of the loss plus the row's ``weight`` times the gradient norm, added under autocast."""
    with torch.autocast(device_type=loop.device, dtype=loop.amp_dtype, enabled=loop.properties["autocast"]):
        total = loss + loop.spec["feature"]["args"]["weight"] * gradient_norm(loop.scaler, loss, loop.net, step)
    scaled_backward(loop, total, loss1, step)


# custom_function: one layer computed by a custom autograd function made AMP aware

@functools.cache
def amp_linear(device: str) -> type[torch.autograd.Function]:
    """A Linear layer's forward and backward as a custom autograd function (``addmm``; the gradients by hand), made AMP
    aware as PyTorch's AMP examples' last section says: ``custom_fwd`` records the autocast state of the forward and
    ``custom_bwd`` runs the backward in it. One class per device type (the decorators take it)."""

    class AmpLinear(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type=device)
        def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x, weight)
            return torch.addmm(bias, x, weight.t())

        @staticmethod
        @torch.amp.custom_bwd(device_type=device)
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            x, weight = ctx.saved_tensors
            return grad.mm(weight), grad.t().mm(x), grad.sum(0)

    return AmpLinear


def forward_custom(loop: Loop, step: int) -> tuple[int, Any]:
    """The row's layer and the function that computes it (:func:`amp_linear`), for the model's forward."""
    function = amp_linear(loop.device)
    return -1, (int(loop.spec["feature"]["args"]["layer"]), lambda x, linear: function.apply(x, linear.weight, linear.bias))


# resume: checkpoint, build everything afresh, load the checkpoint, train on

def resume_from_checkpoint(loop: Loop, step: int) -> int:
    """After the row's ``at_step`` iterations: checkpoint, then build everything afresh and train on from the checkpoint
    (the other language's where the run spec hands one over: ``resume_from``). Returns the step to go on from."""
    if step + 1 != loop.spec["feature"]["args"]["at_step"]:
        return step
    prefix = checkpoint_prefix(loop.spec)
    save_checkpoint(loop.spec, prefix, step + 1, loop.net, loop.opts[0], loop.scheduler, loop.scaler)  # resume runs one optimizer
    # Imported here: py_scripts.loop imports this module for its hooks. Called, not kept on the loop (a bound
    # functools.partial there was a reference cycle that kept every call's model, optimizer and tensors alive until the
    # cyclic collector ran: a worker's heap grew by a call's memory, and the next call faulted it in).
    from py_scripts.loop import build_loop

    build_loop(loop)
    return load_checkpoint(loop.spec, loop.spec["resume_from"] or prefix, loop.net, loop.opts[0], loop.scheduler, loop.scaler, step) - 1


def go_on(loop: Loop, step: int) -> int:
    """The plain loop goes on from the step it is at."""
    return step


def nothing(loop: Loop) -> None:
    """The plain loop does nothing here."""


#: The training loop's points and what the plain loop does at each: ``prepare`` (the model just built), ``optimizers``,
#: ``scheduler``, ``forward`` (per step: the layer left out, -1 for none, and a custom layer or None), ``second_loss``
#: (under autocast, beside the loss; None: none), ``backward`` (the scaler script's), ``micro_batches`` (per optimizer
#: step), ``clip`` (after unscale_ in the scaler script, after backward in with_autocast; None: none), ``update`` (the
#: scaler's), ``zero_grad`` and ``after_iteration`` (returns the step the loop goes on from).
PLAIN_LOOP: dict[str, Callable[..., Any] | None] = {
    "prepare": nothing, "optimizers": one_optimizer, "scheduler": lambda loop: None, "forward": lambda loop, step: (-1, None),
    "second_loss": None, "backward": scaled_backward, "micro_batches": lambda loop: 1, "clip": None, "update": plain_update,
    "zero_grad": plain_zero_grad, "after_iteration": go_on,
}

#: Each kind's hooks, by the point it acts at (:data:`PLAIN_LOOP`): every kind of harness/workload/features.py's
#: ``KINDS``, as in R's ``feature_hooks`` and the reference's ``REFERENCE_HOOKS``.
FEATURE_HOOKS: dict[str, dict[str, Callable[..., Any]]] = {
    "scheduler": {"optimizers": grouped_optimizers, "scheduler": the_scheduler},
    "accumulate": {"micro_batches": micro_batches, "backward": accumulated_backward},
    "clip_value": {"clip": clip_by_value},
    "clip_norm": {"clip": clip_by_norm},
    "frozen": {"prepare": freeze_layer},
    "param_groups": {"optimizers": grouped_optimizers},
    "sometimes_used": {"forward": forward_unused, "zero_grad": zero_grad},
    "multi_optimizer": {"optimizers": two_optimizers, "second_loss": second_loss, "backward": two_backward,
                        "update": explicit_update},
    "penalty": {"backward": penalized_backward},
    "custom_function": {"forward": forward_custom},
    "resume": {"scheduler": the_scheduler, "after_iteration": resume_from_checkpoint},
}
