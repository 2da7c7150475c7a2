"""Where the models beside the MLP run in a matrix of several models: each model's covering design, as data with its reasons.

The MLP (the default model) runs the whole matrix: every optimizer, every mode, each loop feature where its own covering
design puts it. A model beside it (harness/contract/models.py) does not repeat that product: what a model can change is
its forward and backward (its modules, their dtypes under autocast, their gradients), so each model runs

- every mode of every script (all its modules allow: each of the three runs in float32, under autocast and in the AMP
  dtype's weights on CPU), each mode with one optimizer of each R torch family (:data:`FAMILY_ROTATION`), the family's
  optimizers taking the modes in turn so that each kind of optimizer state meets the model;
- the loop features that act on what a model has (:data:`MODEL_FEATURES`), each once, where the feature's own covering
  design runs it (a test holds each placement inside it), with the reason beside it.

A run of one model alone (``run --model transformer``) runs that model's whole matrix, as the MLP's; a feature the model's
modules cannot do is refused up front for it (harness/workload/refusals.py): ``unsupported``, in the model row's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.contract.models import DEFAULT_MODEL, MODELS
from harness.contract.modes import SCRIPTS
from harness.workload.choices import parse_choices
from harness.workload.features import FEATURES, NO_FEATURE

__all__ = ["FAMILY_ROTATION", "MODEL_FEATURES", "PRESET_MODELS", "ModelPlacement", "design_applies", "design_cells",
           "parse_models"]

#: Each R torch optimizer family's optimizers a model trains with, taken in turn by the modes (the first mode the first,
#: the second mode the second, ...), so that each mode meets each family and each kind of state meets the model:
#: ``r`` (R code): ``sgd``, no state, bitwise identical to PyTorch in the plain loop, so a difference in the model shows
#: first; ``adam``, two moments and a step count. ``ignite`` (libtorch's C++): ``ignite_adam``, the moments in C++ (a
#: proven known difference of its own); ``ignite_sgd``, a momentum buffer. The two families start on different kinds
#: (stateless beside the moments), so no mode pairs two stateful rows alone.
FAMILY_ROTATION: Mapping[str, tuple[str, ...]] = {"r": ("sgd", "adam"), "ignite": ("ignite_adam", "ignite_sgd")}

_SCALER = ("cuda_amp_grad_scaler", "autocast_scaler")


@dataclass(frozen=True)
class ModelPlacement:
    """One loop feature of one model: where it runs (a script's mode, an optimizer) and why it means something there."""

    feature: str
    script: str
    mode: str
    optimizer: str
    why: str


def _place(feature: str, why: str, optimizer: str = "sgd", where: tuple[str, str] = _SCALER) -> ModelPlacement:
    return ModelPlacement(feature, where[0], where[1], optimizer, why)


#: Why each loop feature runs with the models: what it does to a model that the MLP cannot show. Left out: the
#: schedulers (they change the lr alone, which a model never reads: the MLP covers them in every optimizer), the param
#: groups (split by weight and bias names, whatever the model), the clips by value and by norm (the clip mode,
#: ``autocast_scaler_clip``, already clips each model's gradient norm in its parameters' order) and the second optimizer
#: (optimizer-level: its head is a Linear, as the MLP's). Each model cell costs up to 3 MLP cells (R torch's per-op
#: cost over a model's many small ops), so the design keeps what only a model can show.
_WHY = {
    "accumulate": "the batch split in two micro-batches: a per-batch module (batch norm's statistics, cross-entropy's mean, "
                  "the key-padding mask of the shorter batch) sees half a batch",
    "frozen": "layer 0 (the embeddings, the first convolution and its batch norm, the GRU) handed to the optimizer without "
              "gradients, as a fine-tuning loop that freezes what is nearest the data",
    "resume": "the model checkpointed and loaded mid-run: its buffers (batch norm's running statistics) and the optimizer's "
              "state by parameter name",
    "sometimes_used": "layer 1 (the encoder layer, the second convolution; the GRU has none to leave out) left out of the "
                      "forward on odd steps: a module with no gradient there",
    "penalty": "the gradients' norm through the model with create_graph: a double backward through its modules (the "
               "transformer's fused attention has none)",
    "custom_function": "layer 1 computed by a custom autograd function made AMP aware (custom_fwd/custom_bwd): the GRU's "
                       "head (the transformer's and the conv net's layer 1 is no Linear)",
}

#: The resume runs with ``ignite_adam`` (a state in C++ to checkpoint by parameter name), every other feature with the
#: stateless ``sgd`` (bitwise identical in the plain loop, so the feature's difference in the model shows first).
_OPTIMIZER = {"resume": "ignite_adam"}
#: Where a feature runs: in the AMP loop with the scaler (autocast, a dynamic scale, a skipped step), but the custom
#: function, whose design has it in the plain script's autocast mode, and the resume, in the scaler script with the scaler
#: disabled: R torch's scaler cannot be checkpointed (the resume row refuses R's dynamic scaler), so only there does R's
#: side checkpoint the model's buffers and the optimizer's state at all.
_WHERE = {"custom_function": ("with_autocast", "autocast"), "resume": ("cuda_amp_grad_scaler", "default")}
#: The loop features each model beside the MLP runs (:data:`_WHY` says why each one means something for a model): the
#: same for every model, so a feature a model's modules cannot do is not left out by hand here but refused up front for
#: that model, in the model row's words (harness/workload/refusals.py): its cell is ``unsupported`` with the reason.
_MODEL_FEATURE_NAMES = ("accumulate", "frozen", "resume", "sometimes_used", "penalty", "custom_function")
MODEL_FEATURES: Mapping[str, tuple[ModelPlacement, ...]] = {
    model: tuple(_place(name, _WHY[name], _OPTIMIZER.get(name, "sgd"), _WHERE.get(name, _SCALER)) for name in _MODEL_FEATURE_NAMES)
    for model in MODELS if model != DEFAULT_MODEL
}

#: The models each preset runs by default. ``tiny`` (the README's main job) all of them, the three beside the MLP by their
#: designs: 60 pairs (120 cells) beside the MLP's 340. The timing presets time the MLP alone: a ratio is read there.
#: A variant of a model (a row with ``files``: the same forwards with another option, ``transformer_smoothing``) is not in
#: ``tiny``: ``--model NAME`` or ``all`` runs it.
PRESET_MODELS: Mapping[str, tuple[str, ...]] = {"tiny": tuple(m for m, row in MODELS.items() if row.files is None),
                                                "bench": (DEFAULT_MODEL,), "recipe": (DEFAULT_MODEL,)}


def _mode_optimizers() -> dict[tuple[str, str], tuple[str, ...]]:
    """Each (script, mode) with its optimizer of each family (:data:`FAMILY_ROTATION`)."""
    modes = [(script.stem, mode.name) for script in SCRIPTS.values() for mode in script.modes]
    return {where: tuple(rows[i % len(rows)] for rows in FAMILY_ROTATION.values()) for i, where in enumerate(modes)}


_MODE_OPTIMIZERS = _mode_optimizers()


def design_applies(model: str, script: str, mode: str, optimizer: str, feature: str) -> bool:
    """Whether ``model``'s covering design runs this cell (a model without a design, the MLP's whole matrix: every cell)."""
    if model not in MODEL_FEATURES:
        return True
    if feature == NO_FEATURE:
        return optimizer in _MODE_OPTIMIZERS.get((script, mode), ())
    return any((p.feature, p.script, p.mode, p.optimizer) == (feature, script, mode, optimizer) for p in MODEL_FEATURES[model])


def design_cells(model: str) -> list[tuple[str, str, str, str]]:
    """``model``'s design as (feature, script, mode, optimizer), the plain loop's first: for docs and tests."""
    plain = [(NO_FEATURE, s, m, o) for (s, m), rows in _MODE_OPTIMIZERS.items() for o in rows]
    return plain + [(p.feature, p.script, p.mode, p.optimizer) for p in MODEL_FEATURES.get(model, ())]


def parse_models(values: list[str] | tuple[str, ...] | None, preset: str, narrowed: bool = False,
                 spec_model: str = DEFAULT_MODEL) -> tuple[str, ...]:
    """The models from repeated or comma-separated ``--model`` values (``all``: every row), in the table's order.

    None given: the preset's (:data:`PRESET_MODELS`), or the spec's model alone where the run is narrowed to some modes or
    optimizers (as the loop features are), or where the spec (a spec file) names another model than the default.

    Raises:
        UsageError: an unknown model (``all`` beside a name included).
    """
    if not values:
        if narrowed or spec_model != DEFAULT_MODEL:
            return (spec_model,)
        return tuple(PRESET_MODELS.get(preset, (DEFAULT_MODEL,)))
    chosen = parse_choices("model", values, (*MODELS, "all"))
    return tuple(MODELS) if "all" in chosen else tuple(m for m in MODELS if m in chosen)


def _check() -> None:
    """Every placement is inside its feature's own covering design (a test says so too; here it fails at import)."""
    for model, placements in MODEL_FEATURES.items():
        if model not in MODELS:
            raise ValueError(f"model design for {model!r}: not a row of harness/contract/models.py")
        for p in placements:
            if p.feature not in FEATURES or not FEATURES[p.feature].applies(p.script, p.mode, p.optimizer):
                raise ValueError(f"model {model}: {p.feature} in {p.script} {p.mode} with {p.optimizer} is outside the "
                                 "feature's own covering design")


_check()
