"""Each model's float64 reference (a module per row of harness/contract/models.py, beside its forwards in
``py_scripts/models/`` and ``r_scripts/models/``): its loss and gradients written out by hand, no autograd, so nothing here
shares code with either frontend.

A module defines ``gradients(params, x, target, unused, every, second)``: the MSE loss of one batch and every parameter's
gradient (by name; ``None`` for a parameter of the layer ``unused`` left out this step), of the loss divided by ``every``
plus ``second`` times the MSE of the output against zero; and, for the gradient penalty, ``penalized(params, x, target,
grads, weight)``: the gradients of the loss plus ``weight`` times the norm of its gradient. A module whose reference needs
something started (a worker process) may define ``start()``, which :func:`start_reference` calls ahead.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["reference_model", "start_reference"]


def reference_model(name: str) -> ModuleType:
    """The float64 reference of the model ``name`` (``harness.judge.models.<name>``)."""
    return importlib.import_module(f"harness.judge.models.{name}")


def start_reference(name: str) -> None:
    """Start what the model ``name``'s reference needs ahead of its first request, where it needs anything (its module's
    ``start``: the autograd worker, whose import of torch takes seconds), so that start overlaps the cells' own work."""
    start = getattr(reference_model(name), "start", None)
    if start is not None:
        start()
