"""A finding's standalone reproducers, ``reproducer.py`` and ``reproducer.R``: the optimizer of the minimal example
alone, with its hyperparameters, stepped as many times as the example steps, on parameters shaped as the example's
model's whose values and gradients are fixed numbers (multiples of 1/16 and 1/64, exact in every float dtype): no model,
no data, no harness, as short as docs/bugs/*/ has them. Each prints every parameter after the last step (``%.9g``: a
float32 read back exactly); the R one holds PyTorch's lines (filled in when the finding is written, by running the
Python one) and exits 1 where R torch's differ.

They reproduce what lives in an optimizer's update (a hyperparameter region an R optimizer computes otherwise, a
parameter's index used for the parameter) and, where the example's loop feature is a learning-rate scheduler, the
scheduler too: the optimizer in the row's param groups (weights, then biases with their own lr), the scheduler built
with the row's arguments (its declared ``lr_lambda``; ReduceLROnPlateau fed a constant metric) and stepped after each
step, each group's lr printed per step. A difference of the rest of the loop (autocast, the scaler, another feature)
needs the run the finding's ``example.json`` holds, and the finding's README says which it is, from running both.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from harness.contract.modes import SCRIPTS
from harness.search.example import Example, drawn_feature
from harness.workload.features import FEATURES, NO_FEATURE, second_group_weight_decay
from harness.workload.optimizers import OPTIMIZERS

__all__ = ["python_reproducer", "r_reproducer"]

#: The fixed values: parameter i's element k, and its gradient at step s (the same expressions in both languages).
_VALUE = "((k * 37 + i * 11) % 17 - 8) / 16"
_GRAD = "((k * 13 + s * 7 + i * 5) % 11 - 5) / 64"


def _sizes(example: Example) -> list[int]:
    """The element counts of the example's parameters, in the model's order (the optimizer's)."""
    return [math.prod(p.shape) for p in example.spec().parameters]


def _dtype(example: Example) -> str:
    """The parameters' dtype: the AMP dtype where the mode keeps the weights in it, else float32."""
    weights = SCRIPTS[example.script].mode(example.mode).weights
    return str(example.spec().amp_dtype) if weights == "amp" else "float32"


def _args(example: Example) -> dict[str, Any]:
    return OPTIMIZERS[example.optimizer].run_spec(example.spec().lr, example.optimizer_args)["python"]["args"]  # type: ignore[no-any-return]


def _scheduler(example: Example) -> dict[str, Any] | None:
    """The run spec's feature (:meth:`harness.workload.features.Feature.run_spec`) where the example's feature is a
    learning-rate scheduler, with the example's moved arguments; else ``None``."""
    if example.feature == NO_FEATURE or FEATURES[example.feature].kind != "scheduler":
        return None
    with drawn_feature(example):
        return FEATURES[example.feature].run_spec(float(_args(example)["lr"]))


class _Schedule(NamedTuple):
    """A scheduler finding's row (its run spec), the parameters' names, and the second group's options as number literals
    (``lr``, ``weight_decay``; ``None``: one group), which both languages' reproducers write in their own syntax."""

    feature: dict[str, Any]
    names: list[str]
    bias: dict[str, str] | None


def _schedule(example: Example) -> _Schedule | None:
    """The example's scheduler as both reproducers build it; ``None`` where its feature is no scheduler."""
    feature = _scheduler(example)
    if feature is None:
        return None
    groups = feature["param_groups"]
    bias = None
    if groups is not None:
        bias = {"lr": f"{_args(example)['lr']!r} * {groups['bias_lr_factor']!r}"}
        if second_group_weight_decay(_args(example)) is not None:  # the scripts' rule; the value the example's row drew
            bias["weight_decay"] = repr(groups["bias_weight_decay"])
    return _Schedule(feature, [p.name for p in example.spec().parameters], bias)


def _python_schedule(example: Example) -> tuple[str, str, str, str]:
    """The Python lines before the optimizer (the parameters' names), its parameters (the groups), the scheduler, and its
    step (plain ``params`` and nothing else where there is no scheduler)."""
    schedule = _schedule(example)
    if schedule is None:
        return "", "params", "", ""
    feature, names, bias = schedule
    grouped = "params"
    if bias is not None:
        extra = "".join(f", {k!r}: {v}" for k, v in bias.items())
        grouped = (f"[{{'params': [p for n, p in zip(names, params) if n.endswith('.weight')]}},\n"
                   f"     {{'params': [p for n, p in zip(names, params) if n.endswith('.bias')]{extra}}}]")
    args = ", ".join(f"{k}={v!r}" for k, v in feature["python"]["args"].items())
    if feature["lr_lambda"] is not None:
        declared = feature["lr_lambda"]
        args = f"lr_lambda=lambda epoch: min(1.0, (epoch + 1) / {declared['warmup']!r}) / (1 + {declared['decay']!r} * epoch)"
    prelude = f"names = {names}\n" if bias is not None else ""
    build_scheduler = f"scheduler = torch.optim.lr_scheduler.{feature['python']['class']}(opt{', ' + args if args else ''})\n"
    step = ("    scheduler.step(1.0)  # a constant metric\n" if feature["on_loss"] else "    scheduler.step()\n") + \
        '    print(f"step {s} lr:", " ".join(f"{g[\'lr\']:.9g}" for g in opt.param_groups))\n'
    return prelude, grouped, build_scheduler, step


def _r_schedule(example: Example) -> tuple[str, str, str, str]:
    """R's twin of :func:`_python_schedule`."""
    schedule = _schedule(example)
    if schedule is None:
        return "", "params", "", ""
    feature, names, bias = schedule
    grouped = "params"
    prelude = ""
    if bias is not None:
        prelude = "names <- c(" + ", ".join(f'"{n}"' for n in names) + ")\n"
        extra = "".join(f", {k} = {v}" for k, v in bias.items())
        grouped = ('list(list(params = params[endsWith(names, ".weight")]),\n'
                   f'  list(params = params[endsWith(names, ".bias")]{extra}))')
    args = ", ".join(f"{k} = {_r_value(v)}" for k, v in feature["r"]["args"].items())
    if feature["lr_lambda"] is not None:
        declared = feature["lr_lambda"]
        args = f"lr_lambda = function(epoch) min(1, (epoch + 1) / {declared['warmup']!r}) / (1 + {declared['decay']!r} * epoch)"
    build_scheduler = f"scheduler <- {feature['r']['function']}(opt{', ' + args if args else ''})\n"
    step = ("  scheduler$step(1) # a constant metric\n" if feature["on_loss"] else "  scheduler$step()\n") + \
        '  lrs <- vapply(opt$param_groups, function(g) sprintf("%.9g", g$lr), "")\n' + \
        '  got <- c(got, paste0("step ", s, " lr: ", paste(lrs, collapse = " ")))\n'
    return prelude, grouped, build_scheduler, step


def python_reproducer(example: Example, summary: str) -> str:
    """``reproducer.py``: PyTorch's side."""
    row = OPTIMIZERS[example.optimizer]
    args = ", ".join(f"{k}={tuple(v) if isinstance(v, list) else v!r}" for k, v in _args(example).items())
    dtype = _dtype(example)
    prelude, grouped, build, step = _python_schedule(example)
    return f'''"""Search finding: {summary[:300]}
PyTorch's side of reproducer.R (beside this file): torch.optim.{row.python} alone, {example.spec().steps} steps on fixed
parameters and gradients. Prints every parameter after the last step."""
import torch

torch.set_num_threads(1)
sizes = {_sizes(example)}
params = [torch.tensor([{_VALUE} for k in range(n)], dtype=torch.{dtype}, requires_grad=True) for i, n in enumerate(sizes)]
{prelude}opt = torch.optim.{row.python}({grouped}, {args})
{build}for s in range({example.spec().steps}):
    for i, p in enumerate(params):
        p.grad = torch.tensor([{_GRAD} for k in range(p.numel())], dtype=torch.{dtype})
    opt.step()
{step}for i, p in enumerate(params):
    print(f"param {{i}}:", " ".join(f"{{v:.9g}}" for v in p.detach().float().tolist()))
'''


def _r_value(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (list, tuple)):
        return "c(" + ", ".join(_r_value(v) for v in value) + ")"
    return repr(value)


def r_reproducer(example: Example, summary: str, pytorch_lines: list[str] | None) -> str:
    """``reproducer.R``: R torch's side, holding PyTorch's printed lines (``None``: not known, then it only prints)."""
    row = OPTIMIZERS[example.optimizer]
    args = ", ".join(f"{k} = {_r_value(v)}" for k, v in row.run_spec(example.spec().lr, example.optimizer_args)["r"]["args"].items())
    value, grad = (e.replace("%", "%%").replace("k * ", "k * ").replace("i * ", "(i - 1) * ") for e in (_VALUE, _GRAD))
    dtype = _dtype(example)
    prelude, grouped, build, step = _r_schedule(example)
    expected = "NULL" if pytorch_lines is None else "c(\n  " + ",\n  ".join(f'"{line}"' for line in pytorch_lines) + "\n)"
    return f'''# Search finding: {summary[:300]}
# R torch's side of reproducer.py (beside this file): {row.r} alone, {example.spec().steps} steps on fixed parameters and
# gradients. Prints every parameter after the last step; exits 1 where they differ from PyTorch's (its lines below).
suppressPackageStartupMessages(library(torch))
torch_set_num_threads(1)
sizes <- c({", ".join(str(n) for n in _sizes(example))})
params <- lapply(seq_along(sizes), function(i) {{
  k <- 0:(sizes[i] - 1); torch_tensor({value}, dtype = torch_{dtype}(), requires_grad = TRUE)
}})
{prelude}opt <- {row.r}({grouped}, {args})
{build}got <- character()
for (s in 0:{example.spec().steps - 1}) {{
  for (i in seq_along(params)) {{
    k <- 0:(sizes[i] - 1); params[[i]]$grad <- torch_tensor({grad}, dtype = torch_{dtype}())
  }}
  opt$step()
{step}}}
pytorch <- {expected}
got <- c(got, vapply(seq_along(params), function(i) paste0("param ", i - 1, ": ",
  paste(sprintf("%.9g", as_array(params[[i]]$detach()$to(dtype = torch_float32()))), collapse = " ")), ""))
cat(got, sep = "\\n")
if (!is.null(pytorch) && !identical(got, pytorch)) {{
  first <- which(got != pytorch)[1]
  cat("R torch differs from PyTorch, first at", sub(":.*", "", got[first]), "\\nPyTorch", pytorch[first], "\\n")
  quit(status = 1)
}}
'''
