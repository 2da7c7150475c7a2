"""The run spec's gradient scaler, and what the scaler modes do to it: an injected overflow, what its inf check found.
The twin of ``r_scripts/scaler.R`` (which also holds the lift of R torch's CUDA-only check on CPU)."""

from __future__ import annotations

from typing import Any

import torch

from py_scripts.model import named_parameters

__all__ = ["found_inf", "inject_overflow", "make_grad_scaler"]


def make_grad_scaler(spec: dict[str, Any], enabled: bool) -> tuple[torch.amp.GradScaler, str | None]:
    """The spec's gradient scaler (``enabled=False``: one whose calls pass through), and which check of the binding was
    lifted to get it (never one here).

    ``torch.amp.GradScaler(device)`` takes CPU tensors itself; R's twin may have to lift R torch's CUDA-only check on
    CPU, and the record says so (``lifted_check``).
    """
    scaler = torch.amp.GradScaler(
        spec["device"], init_scale=spec["init_scale"], growth_factor=spec["growth_factor"],
        backoff_factor=spec["backoff_factor"], growth_interval=spec["growth_interval"], enabled=enabled,
    )
    return scaler, None


def inject_overflow(net: torch.nn.Module) -> None:
    """Put an inf into one gradient element (the first element of the first parameter that has a gradient: a frozen
    layer's have none), as an fp16 overflow would."""
    with torch.no_grad():
        grad = next(param.grad for _name, param in named_parameters(net) if param.grad is not None)
        grad[(0,) * grad.dim()] = float("inf")


def found_inf(scaler: torch.amp.GradScaler, opt: torch.optim.Optimizer) -> torch.Tensor:
    """What the scaler's inf check found for ``opt`` this step, summed over devices (0: the step ran).

    GradScaler keeps it per optimizer until ``update()``; ``_found_inf_per_device`` is its own accessor
    (torch/amp/grad_scaler.py), filled by ``unscale_`` and read by ``step`` to decide the skip.
    """
    return sum(scaler._found_inf_per_device(opt).values(), torch.zeros((), device=scaler._scale.device))  # type: ignore[union-attr]
