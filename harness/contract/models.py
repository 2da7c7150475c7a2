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
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

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
    #: Where the uniform is centred: 0 for a weight, 1 for a norm's scale (its default init is ones).
    center: float = 0.0

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
    #: How one batch's inputs and targets are drawn, when not standard normal (``None``): ``(rng, shape) -> array``,
    #: float32 either way (token ids and class indices are whole numbers, exact in float32 and in bfloat16 up to 256), so
    #: every fixture tensor keeps one dtype, one checksum rule and one loader in both languages.
    draw_inputs: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] | None = None
    draw_targets: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] | None = None
    #: The model's own fixed sizes (a vocabulary, a width), handed to both languages' ``build`` in the run spec.
    dims: Mapping[str, int] | None = None
    #: The row whose forwards it runs (``py_scripts/models/<files>.py`` ↔ ``r_scripts/models/<files>.R``), where it is
    #: that model with other ``dims`` (``None``: its own name): a variant is a row, never a copy of a forward.
    files: str | None = None
    #: The languages whose binding cannot train it: their script refuses each cell in the binding's own words (a condition
    #: of its own), and the cell is ``unsupported``, counted, never an error (``transformer_smoothing`` in R).
    unsupported_in: tuple[str, ...] = ()
    #: Where a loop feature that names a layer can act, where the model allows only some layers (``None``: any layer its
    #: count allows, as the MLP's Linear layers): ``left_out``, the layers a step may go without (``sometimes_used``: what
    #: remains must still map the input to the output); ``replaced``, the Linear layers a custom autograd function may
    #: compute (``custom_function``: its function is a Linear's). Each forward refuses any other in both languages.
    left_out: tuple[int, ...] | None = None
    replaced: tuple[int, ...] | None = None
    #: Loop feature kinds (``harness.workload.features.KINDS``) the model's modules cannot run, each with the fact why
    #: (the binding's error and where it comes from): its cells are refused up front, in these words.
    cannot_run: Mapping[str, str] = field(default_factory=dict)
    #: How many times the MLP's float64 bound under autocast this model's cells are allowed (its own check), and the
    #: measurement that says why: the MLP's bounds were measured on the MLP's arithmetic; a model whose autocast region
    #: rounds more products per output (a convolution's) lands further from float64 in PyTorch itself.
    autocast_bound_factor: float = 1.0
    autocast_bound_why: str = ""

    def run_spec(self, sizes: Sizes) -> dict[str, Any]:
        """What a script receives (the run spec's ``model``): the name, the layers and each parameter's name and layer."""
        params = self.parameters(sizes)
        row = {"name": self.name, "layers": self.layers(sizes), "parameters": [p.name for p in params],
               "parameter_layers": [p.layer for p in params]}
        row = row if self.files is None else {**row, "files": self.files}
        return row if self.dims is None else {**row, "dims": dict(self.dims)}

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


#: The transformer classifier's sizes: tiny, so its cells cost what an MLP cell costs. ``VOCAB`` counts the padding
#: token 0; ``SEQ`` tokens per sequence; ``WIDTH`` the model width (two heads of 4); ``CLASSES`` the head's outputs.
TRANSFORMER = {"VOCAB": 12, "SEQ": 6, "WIDTH": 8, "HEADS": 2, "FEEDFORWARD": 16, "CLASSES": 4}


#: The label smoothing the ``transformer_smoothing`` row's cross-entropies are given, in hundredths (dims are whole
#: numbers): 0.1, the value of PyTorch's examples and of most recipes that smooth (torchvision's classification
#: references pass ``--label-smoothing 0.1``). The ``transformer`` row passes none, PyTorch's default 0.
LABEL_SMOOTHING_PERCENT = 10


def _transformer_parameters(sizes: Sizes) -> tuple[Parameter, ...]:
    """The classifier's parameters, named as PyTorch's ``named_parameters()`` names them (R torch's names are the same,
    its order is not: its multi-head attention registers ``out_proj`` before ``in_proj_weight``). Layers: 0 the two
    embeddings, 1 the encoder layer, 2 the head."""
    v, n, d, f, c = (TRANSFORMER[k] for k in ("VOCAB", "SEQ", "WIDTH", "FEEDFORWARD", "CLASSES"))
    enc = "encoder."
    return (
        Parameter("embed.weight", (v, d), 0, 1), Parameter("position.weight", (n, d), 0, 1),
        Parameter(enc + "self_attn.in_proj_weight", (3 * d, d), 1, d), Parameter(enc + "self_attn.in_proj_bias", (3 * d,), 1, d),
        Parameter(enc + "self_attn.out_proj.weight", (d, d), 1, d), Parameter(enc + "self_attn.out_proj.bias", (d,), 1, d),
        Parameter(enc + "linear1.weight", (f, d), 1, d), Parameter(enc + "linear1.bias", (f,), 1, d),
        Parameter(enc + "linear2.weight", (d, f), 1, f), Parameter(enc + "linear2.bias", (d,), 1, f),
        Parameter(enc + "norm1.weight", (d,), 1, 16, 1.0), Parameter(enc + "norm1.bias", (d,), 1, 16),
        Parameter(enc + "norm2.weight", (d,), 1, 16, 1.0), Parameter(enc + "norm2.bias", (d,), 1, 16),
        Parameter("head.weight", (c, d), 2, d), Parameter("head.bias", (c,), 2, d),
    )


def _draw_tokens(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Token ids 1..VOCAB-1, each sequence padded (id 0) after a length drawn from 1..SEQ: the key-padding mask and the
    embedding's padding index both act."""
    tokens = rng.integers(1, TRANSFORMER["VOCAB"], shape)
    lengths = rng.integers(1, shape[-1] + 1, shape[:-1])
    tokens[np.arange(shape[-1]) >= lengths[..., None]] = 0
    return tokens.astype(np.float32)


def _draw_classes(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Per example its class index (column 0, 0-based as PyTorch counts), then a probability over the classes (columns
    1..): the two target forms ``CrossEntropyLoss`` takes."""
    classes = rng.integers(0, TRANSFORMER["CLASSES"], shape[:-1])
    logits = rng.standard_normal((*shape[:-1], TRANSFORMER["CLASSES"]))
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    return np.concatenate([classes[..., None].astype(np.float64), probs], axis=-1).astype(np.float32)


def _transformer_flops(sizes: Sizes) -> float:
    """The GEMMs of one step, three per Linear-like product (forward, weight and input gradient), attention's two
    batched products included; the embeddings are gathers, no FLOPs."""
    b, n, d, f, c = sizes.batch_size, TRANSFORMER["SEQ"], TRANSFORMER["WIDTH"], TRANSFORMER["FEEDFORWARD"], TRANSFORMER["CLASSES"]
    tokens = b * n
    linear = 2.0 * tokens * d * (3 * d + d + 2 * f) + 2.0 * b * d * c
    attention = 2.0 * 2 * b * n * n * d
    return 3.0 * (linear + attention)


#: The conv net's sizes: ``CHANNELS`` input channels of ``SIZE`` x ``SIZE`` images, ``WIDTH`` channels in both
#: convolutions, ``GROUPS`` groups in the group norm, the pooled maps resized to ``RESIZED`` x ``RESIZED`` and average-pooled
#: by 2 before the head's ``OUTPUTS``. Tiny, so its cells cost what an MLP cell costs.
CONVNET = {"CHANNELS": 2, "SIZE": 8, "WIDTH": 4, "GROUPS": 2, "RESIZED": 6, "OUTPUTS": 4}


def _convnet_parameters(sizes: Sizes) -> tuple[Parameter, ...]:
    """The conv net's parameters by their module names. Layers: 0 the first convolution and its batch norm, 1 the second
    convolution and its group norm, 2 the head."""
    c, w, r, o = CONVNET["CHANNELS"], CONVNET["WIDTH"], CONVNET["RESIZED"], CONVNET["OUTPUTS"]
    flat = w * (r // 2) ** 2
    return (
        Parameter("conv1.weight", (w, c, 3, 3), 0, c * 9), Parameter("conv1.bias", (w,), 0, c * 9),
        Parameter("bn.weight", (w,), 0, 16, 1.0), Parameter("bn.bias", (w,), 0, 16),
        Parameter("conv2.weight", (w, w, 3, 3), 1, w * 9), Parameter("conv2.bias", (w,), 1, w * 9),
        Parameter("norm.weight", (w,), 1, 16, 1.0), Parameter("norm.bias", (w,), 1, 16),
        Parameter("head.weight", (o, flat), 2, flat), Parameter("head.bias", (o,), 2, flat),
    )


def _convnet_flops(sizes: Sizes) -> float:
    """Each convolution a GEMM of ``batch·H·W`` rows, ``out`` columns and ``in·9`` depth (the first at full size, the
    second after the 2x2 max pool), and the head; three each (forward, weight and input gradient)."""
    b, c, n, w = sizes.batch_size, CONVNET["CHANNELS"], CONVNET["SIZE"], CONVNET["WIDTH"]
    flat = w * (CONVNET["RESIZED"] // 2) ** 2
    gemms = 2.0 * b * n * n * w * c * 9 + 2.0 * b * (n // 2) ** 2 * w * w * 9 + 2.0 * b * flat * CONVNET["OUTPUTS"]
    return 3.0 * gemms


#: The recurrent model's sizes: sequences of ``STEPS`` steps of ``FEATURES`` numbers, a GRU of ``HIDDEN`` units, a head
#: of ``OUTPUTS``. Tiny, so its cells cost what an MLP cell costs.
GRU = {"STEPS": 5, "FEATURES": 3, "HIDDEN": 6, "OUTPUTS": 2}


def _gru_parameters(sizes: Sizes) -> tuple[Parameter, ...]:
    """The GRU's parameters as PyTorch names them (``gru.weight_ih_l0``; R torch names the first layer ``_l1``, so they are
    copied in its order, which is PyTorch's). Layers: 0 the GRU, 1 the head. Both use U(-1/sqrt(hidden), 1/sqrt(hidden))
    for the GRU, as ``nn.GRU`` does."""
    f, h, o = GRU["FEATURES"], GRU["HIDDEN"], GRU["OUTPUTS"]
    return (
        Parameter("gru.weight_ih_l0", (3 * h, f), 0, h), Parameter("gru.weight_hh_l0", (3 * h, h), 0, h),
        Parameter("gru.bias_ih_l0", (3 * h,), 0, h), Parameter("gru.bias_hh_l0", (3 * h,), 0, h),
        Parameter("head.weight", (o, h), 1, h), Parameter("head.bias", (o,), 1, h),
    )


def _gru_flops(sizes: Sizes) -> float:
    """Per step, the input and hidden GEMMs of the three gates, then the head; three each (forward, weight and input
    gradient)."""
    b, n, f, h = sizes.batch_size, GRU["STEPS"], GRU["FEATURES"], GRU["HIDDEN"]
    return 3.0 * (2.0 * b * n * 3 * h * (f + h) + 2.0 * b * h * GRU["OUTPUTS"])


#: Why the transformer cannot run a gradient penalty in PyTorch: ``TransformerEncoderLayer``'s attention calls
#: ``scaled_dot_product_attention``, which on the CPU runs the fused ``_scaled_dot_product_flash_attention_for_cpu``, and
#: its backward has no derivative of its own (torch/csrc/autograd/generated: "derivative for
#: aten::_scaled_dot_product_flash_attention_for_cpu_backward is not implemented"), so the penalty's backward through the
#: ``create_graph`` gradients stops there (seen with torch 2.13.0 on the CPU).
_NO_DOUBLE_BACKWARD_ATTENTION = (
    "PyTorch's fused attention (TransformerEncoderLayer's scaled_dot_product_attention, on the CPU "
    "_scaled_dot_product_flash_attention_for_cpu) has no double backward: the penalty's backward through its create_graph "
    "gradients stops with \"derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is not implemented\""
)

#: Every model, by name. A new one is a row here, its forward in both languages and its float64 reference
#: (docs/development.md, "A model").
MODELS: dict[str, Model] = {
    DEFAULT_MODEL: Model(
        DEFAULT_MODEL, "Linear+ReLU ... Linear, MSE: the AMP recipe's and the R torch AMP vignette's workload",
        layers=lambda s: s.num_layers, parameters=_mlp_parameters,
        inputs=lambda s: (s.batch_size, s.in_size), targets=lambda s: (s.batch_size, s.out_size), step_flops=_mlp_flops,
    ),
    "transformer": Model(
        "transformer", "token and position embeddings (padding index 0), a transformer encoder layer with a key-padding "
        "mask, masked mean pooling, a Linear head; cross-entropy on class indices plus on class probabilities",
        layers=lambda s: 3, parameters=_transformer_parameters,
        inputs=lambda s: (s.batch_size, TRANSFORMER["SEQ"]), targets=lambda s: (s.batch_size, 1 + TRANSFORMER["CLASSES"]),
        step_flops=_transformer_flops, draw_inputs=_draw_tokens, draw_targets=_draw_classes, dims=TRANSFORMER,
        left_out=(1,), replaced=(2,), cannot_run={"penalty": _NO_DOUBLE_BACKWARD_ATTENTION},
    ),
    "transformer_smoothing": Model(
        "transformer_smoothing", "the transformer classifier with label_smoothing = 0.1 in both its cross-entropies, as "
        "PyTorch users pass it (R torch's nn_cross_entropy_loss() has no such argument: its R cells are unsupported, in "
        "R's words)",
        layers=lambda s: 3, parameters=_transformer_parameters,
        inputs=lambda s: (s.batch_size, TRANSFORMER["SEQ"]), targets=lambda s: (s.batch_size, 1 + TRANSFORMER["CLASSES"]),
        step_flops=_transformer_flops, draw_inputs=_draw_tokens, draw_targets=_draw_classes,
        dims={**TRANSFORMER, "LABEL_SMOOTHING_PERCENT": LABEL_SMOOTHING_PERCENT}, files="transformer", unsupported_in=("r",),
        left_out=(1,), replaced=(2,), cannot_run={"penalty": _NO_DOUBLE_BACKWARD_ATTENTION},
    ),
    "convnet": Model(
        "convnet", "a convolution with reflect padding, batch norm, max pool; one with circular padding, group norm; "
        "bilinear interpolation, average pool, a Linear head; MSE",
        layers=lambda s: 3, parameters=_convnet_parameters,
        inputs=lambda s: (s.batch_size, CONVNET["CHANNELS"], CONVNET["SIZE"], CONVNET["SIZE"]),
        targets=lambda s: (s.batch_size, CONVNET["OUTPUTS"]), step_flops=_convnet_flops, dims=CONVNET,
        left_out=(1,), replaced=(2,),
        autocast_bound_factor=8.0,
        autocast_bound_why="measured at tiny on CPU: PyTorch's own bfloat16 autocast cells of the conv net are up to 4.8x "
                           "(loss) and 5.9x (weights) the MLP's bound from float64 (ignite_sgd), R torch's bitwise the same",
    ),
    "gru": Model(
        "gru", "a GRU over a sequence, its last hidden state into a Linear head; MSE",
        layers=lambda s: 2, parameters=_gru_parameters, inputs=lambda s: (s.batch_size, GRU["STEPS"], GRU["FEATURES"]),
        targets=lambda s: (s.batch_size, GRU["OUTPUTS"]), step_flops=_gru_flops, dims=GRU,
        left_out=(), replaced=(1,),
        autocast_bound_factor=2.0,
        autocast_bound_why="measured at tiny on CPU: PyTorch's own bfloat16 autocast cells of the GRU are up to 1.44x the "
                           "MLP's loss bound from float64 (the gradient penalty, the inf-norm clip), R torch's the same",
    ),
}
