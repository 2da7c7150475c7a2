"""The run spec's model: built from its file in :mod:`py_scripts.models`, its parameters named as the contract names them.
The twin of ``r_scripts/model.R``.

A model is a row of harness/contract/models.py, which the run spec hands over (``model``: its name, its layers, each
parameter's name and layer in the optimizer's order), and a module ``py_scripts/models/<name>.py`` with its ``build``
and ``forward``. Everything else asks here: the parameters by name (the fixtures', the final weights', the trace's),
and by layer (what a loop feature indexes: a frozen layer, two optimizers split by layer).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import torch

__all__ = ["forward", "layer_parameters", "make_model", "model_loss", "named_parameters"]

#: The model of the call in progress: its module (``build``, ``forward``), its parameters' names and each one's layer, in
#: the optimizer's order (the run spec's ``model``). Set by :func:`make_model`, read by everything that names a parameter.
_model_state: dict[str, Any] = {"module": None, "names": [], "layers": [], "dims": {}}


def make_model(spec: dict[str, Any], fixtures: dict[str, torch.Tensor]) -> torch.nn.Module:
    """The run spec's model, built by its module's ``build`` with its parameters copied from the fixtures.

    Raises:
        ValueError: the module built other parameters than the contract declares (their count or a shape): the model's
            row and its forward disagree.
    """
    row = spec["model"]
    module = importlib.import_module(f"py_scripts.models.{row.get('files', row['name'])}")  # a variant runs its row's forward
    net: torch.nn.Module = module.build(spec)
    params = _in_contract_order(net, row["parameters"])
    if len(params) != len(row["parameters"]) or any(p.shape != fixtures[n].shape for n, p in zip(row["parameters"], params, strict=False)):
        raise ValueError(f"model {row['name']}: py_scripts/models/{row['name']}.py builds other parameters than "
                         f"harness/contract/models.py declares ({', '.join(row['parameters'])})")
    with torch.no_grad():
        for name, param in zip(row["parameters"], params, strict=True):
            param.copy_(fixtures[name])
    _model_state.update(module=module, names=list(row["parameters"]), layers=list(row["parameter_layers"]), dims=row.get("dims", {}))
    return net


def _in_contract_order(net: torch.nn.Module, names: list[str]) -> list[torch.nn.Parameter]:
    """The module's parameters in the contract's order: by name where the module names them as the contract does (a
    model whose modules are named, as its PyTorch users name them), else in the module's own order (the MLP's
    ``Sequential`` names them ``0.weight``, ...)."""
    own = dict(net.named_parameters())
    return [own[n] for n in names] if set(names) <= set(own) else list(net.parameters())


def forward(net: torch.nn.Module, x: torch.Tensor, step: int, unused: int = -1, custom: Any = None) -> torch.Tensor:
    """The model's own forward (its module's ``forward``), each intermediate a trace point; ``unused``: a layer left out
    this step (loop feature ``sometimes_used``; -1: none); ``custom``: a layer computed by a function of the input and that
    layer (loop feature ``custom_function``), as ``(layer, function)``."""
    module: ModuleType = _model_state["module"]
    output: torch.Tensor = module.forward(net, x, step, unused, custom)
    return output


def model_loss(output: torch.Tensor, target: torch.Tensor, default: torch.nn.Module) -> torch.Tensor:
    """The model's loss of a batch: its module's ``loss`` where it has one (a classifier's cross-entropy, given the
    model's ``dims``: a variant's options), else ``default`` (the loop's MSE)."""
    own = getattr(_model_state["module"], "loss", None)
    value: torch.Tensor = own(output, target, _model_state["dims"]) if own is not None else default(output, target)
    return value


def named_parameters(net: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    """Every parameter with the name the fixtures, the final weights and the trace give it (``layer0.weight``, ...), in
    the order the optimizer steps them (``net.parameters()``'s, the contract's)."""
    return list(zip(_model_state["names"], _in_contract_order(net, _model_state["names"]), strict=True))


def layer_parameters(net: torch.nn.Module, layers: range | list[int]) -> list[torch.nn.Parameter]:
    """The parameters of ``layers`` (0-based, as the contract numbers a model's layers), in the optimizer's order."""
    chosen = set(layers)
    return [p for layer, p in zip(_model_state["layers"], _in_contract_order(net, _model_state["names"]), strict=True) if layer in chosen]
