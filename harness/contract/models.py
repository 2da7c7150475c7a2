"""The models a workload trains, each declared once: its layers, its parameters' names and shapes, its fixtures and
its FLOP count, as data both languages and the judges read.

A model is a row of :data:`MODELS`. Its forward is one function per language in a file of its own
(``py_scripts/models/<name>.py`` ↔ ``r_scripts/models/<name>.R``, each defining ``build`` and ``forward``), and its
float64 reference sits beside the harness's reference (``harness/judge/models/<name>.py``). The run spec hands a script
the row (``model`` in docs/contract.md): the parameters' names in the order the optimizer steps them, each with its
layer, so what indexes a layer (a frozen layer, a layer left out, two optimizers split by layer) asks the model.

The sizes come from the workload spec (batch, input and output width, number of layers); a model reads those it needs.
``mlp`` is the default, the AMP recipe's Linear+ReLU stack: a cell of it keeps the id it always had.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["DEFAULT_MODEL", "MODELS", "Model", "Parameter", "Sizes"]

#: The model a spec, a cell or a run spec names when none is said: the MLP every result before issue 45 trained.
DEFAULT_MODEL = "mlp"


class Sizes(NamedTuple):
    """The workload spec's sizes a model is built from (``harness.workload.spec.WorkloadSpec.sizes``)."""

    batch_size: int
    in_size: int
    out_size: int
    num_layers: int
    num_batches: int


@dataclass(frozen=True)
class Parameter:
    """One parameter: its name (the fixtures', the final weights' and the trace's), its shape, its layer (what a loop
    feature indexes, 0-based) and its fan-in (the initial values are U(-1/sqrt(fan_in), 1/sqrt(fan_in)), torch's
    default init for Linear and Conv layers; the values themselves are drawn by NumPy)."""

    name: str
    shape: tuple[int, ...]
    layer: int
    fan_in: int

    @property
    def bound(self) -> float:
        """The half-width of the uniform the initial values are drawn from."""
        return 1.0 / math.sqrt(self.fan_in)


@dataclass(frozen=True)
class Model:
    """One model: what it is called, how many layers a loop feature may index, its parameters in the optimizer's order
    (also the order the fixtures are drawn in), the shape of one batch of inputs and of targets, and the FLOPs of one
    training step (forward and backward GEMMs, the usual accounting: ``torch.utils.flop_counter`` counts the same)."""

    name: str
    title: str
    layers: Callable[[Sizes], int]
    parameters: Callable[[Sizes], tuple[Parameter, ...]]
    inputs: Callable[[Sizes], tuple[int, ...]]
    targets: Callable[[Sizes], tuple[int, ...]]
    step_flops: Callable[[Sizes], float]

    def run_spec(self, sizes: Sizes) -> dict[str, Any]:
        """What a script receives (the run spec's ``model``): the name, the layers and each parameter's name and layer."""
        params = self.parameters(sizes)
        return {"name": self.name, "layers": self.layers(sizes), "parameters": [p.name for p in params],
                "parameter_layers": [p.layer for p in params]}

    def layer_of(self, sizes: Sizes) -> Mapping[str, int]:
        """Each parameter's layer by its name."""
        return {p.name: p.layer for p in self.parameters(sizes)}


def _mlp_shapes(sizes: Sizes) -> list[tuple[int, int]]:
    """``(out_features, in_features)`` of each Linear layer: ``num_layers - 1`` square hidden layers, then the output."""
    return [*[(sizes.in_size, sizes.in_size)] * (sizes.num_layers - 1), (sizes.out_size, sizes.in_size)]


def _mlp_parameters(sizes: Sizes) -> tuple[Parameter, ...]:
    return tuple(Parameter(f"layer{k}.{kind}", (o, i) if kind == "weight" else (o,), k, i)
                 for k, (o, i) in enumerate(_mlp_shapes(sizes)) for kind in ("weight", "bias"))


def _mlp_flops(sizes: Sizes) -> float:
    """Each Linear layer of shape (out, in) costs ``2·batch·out·in`` per GEMM: one forward, one for the weight gradient,
    and one for the input gradient, which the first layer does not need (the data does not require a gradient)."""
    per_gemm = [2.0 * sizes.batch_size * o * i for o, i in _mlp_shapes(sizes)]
    return 3.0 * sum(per_gemm) - per_gemm[0]


#: Every model, by name. A new one is a row here, its forward in both languages and its float64 reference
#: (docs/development.md, "A model").
MODELS: dict[str, Model] = {
    DEFAULT_MODEL: Model(
        DEFAULT_MODEL, "Linear+ReLU ... Linear, MSE: the AMP recipe's and the R torch AMP vignette's workload",
        layers=lambda s: s.num_layers, parameters=_mlp_parameters,
        inputs=lambda s: (s.batch_size, s.in_size), targets=lambda s: (s.batch_size, s.out_size), step_flops=_mlp_flops,
    ),
}
