"""The loop features: shapes of the AMP training loop beyond the plain one, declared as data like the optimizers.

The plain loop (feature ``none``) is forward under autocast, ``scale``, ``backward``, optionally ``unscale_`` and a norm
clip, ``step``, ``update``, with a fixed learning rate. Each row here changes that loop in one way people write it (a
learning-rate scheduler, gradient accumulation, clipping by value), with hyperparameters and the reason for each.
Both scripts of a pair build the loop from the row the run spec carries (``feature`` in docs/contract.md; ``make_scheduler``
and the feature branches of ``run_workload`` in both languages), so there is one code path per language; the float64
reference (:mod:`harness.judge.reference`) follows each row's arithmetic.

A row does not run in the whole product of modes and optimizers: it names its :class:`Cover` lines, each a set of
(script, mode) and a set of optimizers with the reason that combination is there (a covering design). What a feature
can change is covered once per thing it touches: a scheduler touches every optimizer's use of ``lr`` (all optimizers,
in the scaler mode where a skipped step meets the scheduler) and every mode's loop (one optimizer per mode).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.contract.modes import SCRIPTS
from harness.errors import UsageError
from harness.workload.optimizers import OPTIMIZERS

__all__ = ["FEATURES", "KINDS", "LOOP_ARGS", "NO_FEATURE", "PRESET_FEATURES", "Cover", "Feature", "check_feature", "micro_batches",
           "parse_features"]

#: The plain loop: no row, the matrix as it always was (its cells' ids carry no feature).
NO_FEATURE = "none"
#: What a row changes in the loop; each kind is one branch of both scripts' ``run_workload`` and of the reference.
#: ``scheduler``: a learning-rate scheduler stepped once per iteration after the scaler's ``step``/``update`` (PyTorch's
#: docs: ``scheduler.step()`` after ``optimizer.step()``; also on the iterations the scaler skipped, as the AMP examples
#: page's loop does). ``accumulate``: ``every`` micro-batches per optimizer step, each loss divided by ``every``.
#: ``clip_value``: ``unscale_`` then every gradient element clamped to ``[-clip_value, clip_value]``.
#: ``frozen``: one layer's parameters get ``requires_grad`` false but are still handed to the optimizer (a fine-tuning loop
#: that freezes part of the model), so every step meets parameters without a gradient.
#: ``param_groups``: the weights in one param group, the biases in a second with their own lr (and weight decay, where the
#: optimizer has one).
#: ``resume``: after ``at_step`` iterations the model, the optimizer and the scaler are checkpointed in the contract's
#: layout (docs/contract.md#checkpoint), built afresh, loaded from the checkpoint and trained on to the end: the
#: uninterrupted run's arithmetic, so the float64 reference is the plain loop's.
KINDS: tuple[str, ...] = ("scheduler", "accumulate", "clip_value", "frozen", "param_groups", "resume")

#: Arguments of the loop itself, never handed to a row's scheduler: ``resume``'s step of the checkpoint.
LOOP_ARGS: frozenset[str] = frozenset({"at_step"})

_SCALER = "cuda_amp_grad_scaler"
_PLAIN = "with_autocast"
#: One optimizer of each R torch family and kind of update: plain SGD (R code, bitwise identical in the plain loop, so a
#: feature's own difference shows first), SGD with momentum (R code, a state that carries the accumulated gradient),
#: Adam (R code) and the ignite Adam (libtorch's C++): what a feature that acts on the gradients meets in each family.
_ONE_PER_FAMILY: tuple[str, ...] = ("sgd", "sgd_momentum", "adam", "ignite_adam")


@dataclass(frozen=True)
class Cover:
    """One line of a feature's covering design: these (script, mode) pairs with these optimizers, and why."""

    modes: tuple[tuple[str, str], ...]
    optimizers: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Feature:
    """One row: a loop feature, its hyperparameters (R torch's names) with a reason each, and where it runs.

    ``python`` and ``r``: for a ``scheduler``, the class in ``torch.optim.lr_scheduler`` and the R torch function; the
    arguments are ``args`` in both (``python_names`` renames those PyTorch spells otherwise).
    """

    name: str
    kind: str
    title: str
    args: Mapping[str, float | int]
    reasons: Mapping[str, str]
    covers: tuple[Cover, ...]
    python: str = ""
    r: str = ""
    python_names: Mapping[str, str] = field(default_factory=dict)
    #: The (language, scaler kind) cells whose binding cannot do what the row asks, with the fact why: the script
    #: refuses them in the binding's own words, and the cell is ``unsupported`` (never silently run another way).
    unsupported: Mapping[tuple[str, str], str] = field(default_factory=dict)
    #: For a ``resume`` row, the feature whose run a resumed run must equal bitwise (the plain loop, or the scheduler row
    #: with the same scheduler): :mod:`harness.judge.resumed` compares the two cells where both ran.
    uninterrupted: str = NO_FEATURE

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"feature {self.name}: kind must be one of {KINDS}")
        if set(self.args) != set(self.reasons):
            raise ValueError(f"feature {self.name}: every hyperparameter needs a reason, and every reason a hyperparameter")
        for cover in self.covers:
            for script, mode in cover.modes:
                SCRIPTS[script].mode(mode)  # raises on a mode the script does not declare
            unknown = [o for o in cover.optimizers if o not in OPTIMIZERS]
            if unknown:
                raise ValueError(f"feature {self.name}: unknown optimizer {unknown[0]!r}")

    def refuses(self, language: str, scaler: str) -> bool:
        """Whether ``language``'s binding is known not to do this row's loop with a scaler of kind ``scaler``."""
        return (language, scaler) in self.unsupported

    def applies(self, script: str, mode: str, optimizer: str) -> bool:
        """Whether the covering design runs this feature in ``script``'s ``mode`` with ``optimizer``."""
        return any((script, mode) in c.modes and optimizer in c.optimizers for c in self.covers)

    @property
    def scheduler(self) -> bool:
        """Whether the loop has a learning-rate scheduler: a ``scheduler`` row, or a ``resume`` row that checkpoints one."""
        return bool(self.python)

    def run_spec(self) -> dict[str, Any]:
        """What a script receives to build the loop (the run spec's ``feature``): the scheduler's class and function take
        the row's arguments but the loop's own (``LOOP_ARGS``)."""
        scheduler_args = {k: v for k, v in self.args.items() if k not in LOOP_ARGS}
        return {
            "name": self.name, "kind": self.kind, "args": dict(self.args),
            "python": {"class": self.python, "args": {self.python_names.get(k, k): v for k, v in scheduler_args.items()}},
            "r": {"function": self.r, "args": scheduler_args},
        }

    def to_json(self) -> dict[str, Any]:
        """The whole row, for docs and tests (``unsupported`` as ``language/scaler`` keys: JSON has no pair keys)."""
        row = dataclasses.asdict(self)
        row["unsupported"] = {f"{language}/{scaler}": why for (language, scaler), why in self.unsupported.items()}
        return row


def _every_mode() -> tuple[tuple[str, str], ...]:
    return tuple((pair.stem, m.name) for pair in SCRIPTS.values() for m in pair.modes)


def _scheduler_covers() -> tuple[Cover, ...]:
    return (
        Cover(((_SCALER, "autocast_scaler"),), tuple(OPTIMIZERS),
              "every optimizer reads lr from its param group at each step (R code, ignite's C++ options): each is "
              "covered, in the scaler mode, where the scheduler also steps on the iterations the scaler skips"),
        Cover(_every_mode(), ("sgd",),
              "every mode's loop (autocast, low-precision weights, static scale, clipping) meets the scheduler once"),
    )


def _param_group_covers() -> tuple[Cover, ...]:
    some = tuple(o for o in OPTIMIZERS if o != "ignite_adagrad")
    return (
        Cover(((_SCALER, "autocast_scaler"),), some,
              "every optimizer reads its hyperparameters per group: each is covered, in the scaler mode; not ignite_adagrad, "
              "which stops at its first step with a second group (R torch bug ignite-adagrad-param-group-state, "
              "docs/bugs/: no switch can make R's constructor build it, so the cell could only fail)"),
        Cover(_every_mode(), ("sgd",), "every mode's loop meets two param groups once"),
    )


def _gradient_covers() -> tuple[Cover, ...]:
    return (
        Cover(((_SCALER, "default"), (_SCALER, "autocast_scaler")), _ONE_PER_FAMILY,
              "the feature acts on the gradients the scaler unscales, skips on and the optimizer reads: one optimizer of "
              "each family with the scaler disabled (users' use_amp=False) and enabled"),
        Cover(((_SCALER, "autocast_scaler_clip"),), ("sgd", "sgd_momentum"),
              "the norm clip of the accumulated gradient; not Adam here: its first difference would be the clip "
              "coefficient's 1 ULP (clip-coef-reciprocal) on a step where it does not clip, an unused point the matcher "
              "cannot yet see past to Adam's own first-moment-lerp (docs/known-differences.md)"),
    )


def _clip_value_covers() -> tuple[Cover, ...]:
    return (
        Cover(((_SCALER, "default"), (_SCALER, "autocast_scaler")), _ONE_PER_FAMILY,
              "clipping by value after unscale_, in place of the clip mode's norm clip: one optimizer of each family, "
              "with the scaler disabled and enabled (a clip mode would clip twice)"),
    )


def _resume_covers() -> tuple[Cover, ...]:
    return (
        Cover(((_SCALER, "default"), (_SCALER, "autocast_scaler")), ("sgd_momentum", "adam", "ignite_adam", "adagrad"),
              "what a checkpoint carries: SGD's momentum buffer (R code), Adam's moments and step count in R code and in "
              "libtorch's C++ (R torch keeps their state_dict()s differently: an R list, a C++ state by position), and "
              "Adagrad's step count and sum (R code, a pair identical in the plain loop, so a resumed run's own difference "
              "shows first); with the scaler disabled (users' use_amp=False) and enabled, whose scale and growth tracker "
              "are checkpointed too where the binding can save them"),
    )


FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature(
            "lr_step", "scheduler", "StepLR / lr_step: lr times gamma every step_size iterations",
            {"step_size": 4, "gamma": 0.7},
            {"step_size": "4 so the decay fires 4 times in tiny's 20 iterations (and across the epoch boundary)",
             "gamma": "0.7, not a power of two: every product rounds, so a different order of operations would show"},
            _scheduler_covers(), python="StepLR", r="lr_step",
        ),
        Feature(
            "lr_cosine", "scheduler", "CosineAnnealingLR / lr_cosine_annealing: lr along a half cosine, recursively",
            {"T_max": 8, "eta_min": 0.0001},
            {"T_max": "8: tiny's 20 iterations pass the minimum and restart, reaching all three branches of get_lr",
             "eta_min": "non-zero so the eta_min terms act, and below every optimizer row's lr (the least is 1e-3), so "
                        "the cosine spans a range for each"},
            _scheduler_covers(), python="CosineAnnealingLR", r="lr_cosine_annealing",
        ),
        Feature(
            "accumulate", "accumulate", "gradient accumulation: the scaler steps and updates every `every` micro-batches",
            {"every": 2},
            {"every": "2 micro-batches per optimizer step: tiny's 10 batches divide evenly, each epoch ends on a step"},
            _gradient_covers(),
        ),
        Feature(
            "param_groups", "param_groups", "two param groups: weights, and biases with their own lr and weight decay",
            {"bias_lr_factor": 0.5, "bias_weight_decay": 0.0},
            {"bias_lr_factor": "the biases' lr is half the row's: every optimizer reads lr per group, so a binding that "
                               "read the defaults instead would part at step 0",
             "bias_weight_decay": "no decay on the biases (the usual recipe), where the row decays the weights"},
            _param_group_covers(),
        ),
        Feature(
            "frozen", "frozen", "a frozen layer (requires_grad false) still handed to the optimizer",
            {"layer": 0},
            {"layer": "0, the input layer, as a loop that freezes the layers nearest the data does; layer 1 and 2 still "
                      "train, so the backward pass runs through it"},
            (Cover(_every_mode(), _ONE_PER_FAMILY,
                   "every mode (a scaler's unscale_ and step, clipping and the optimizer each meet a parameter without a "
                   "gradient), with one optimizer of each family"),),
        ),
        Feature(
            "clip_value", "clip_value", "unscale_, then clip_grad_value_ / nn_utils_clip_grad_value_",
            {"clip_value": 0.002},
            {"clip_value": "tiny's first gradients reach 0.002 to 0.01 at their largest in every layer and stay below "
                           "0.001 in 90 % of elements: the clamp acts on a few elements of each tensor, not all"},
            _clip_value_covers(),
        ),
        Feature(
            "resume", "resume", "checkpoint after at_step iterations, build afresh, load the checkpoint, train on",
            {"at_step": 7},
            {"at_step": "7 of tiny's 20 iterations: mid-epoch (the batch is taken from the checkpoint's step); the scale's "
                        "second growth is the next step, decided by the growth tracker carried over, and the preset's "
                        "overflow (step 9) comes after; 13 steps left for a state read back wrong to show"},
            _resume_covers(),
            unsupported={("r", "dynamic"): "R torch's cuda_amp_grad_scaler() has no state_dict() (R/autocast.R): its scale "
                                           "and growth tracker cannot be saved, and a resumed run would restart them"},
        ),
        Feature(
            "resume_lr_step", "resume", "resume, with lr_step's scheduler checkpointed and loaded too",
            {"at_step": 7, "step_size": 4, "gamma": 0.7},
            {"at_step": "as resume's: the scheduler's first step after the load (its 8th) decays the lr, from the lr and "
                        "the last_epoch read back",
             "step_size": "lr_step's: 4, so the decay fires at the first scheduler step after the load",
             "gamma": "lr_step's: 0.7, not a power of two, so an lr read back rounded would show"},
            (Cover(((_SCALER, "default"), (_SCALER, "autocast_scaler")), ("adagrad", "ignite_adam"),
                   "the scheduler's state (last_epoch, its step count, the last lr) and the lr it set in each group, in an "
                   "R-code optimizer's param groups (Adagrad, identical in the plain loop) and in libtorch's C++ options "
                   "(ignite Adam); with the scaler disabled and enabled"),),
            python="StepLR", r="lr_step",
            unsupported={("r", "dynamic"): "R torch's cuda_amp_grad_scaler() has no state_dict() (R/autocast.R)"},
            uninterrupted="lr_step",
        ),
    )
}

#: The features each preset runs by default beside the plain loop: ``tiny`` (CI's and the main job's) runs them all;
#: the timing presets run the plain loop only (their float64 reference and rounds are sized for it).
PRESET_FEATURES: dict[str, tuple[str, ...]] = {"tiny": (NO_FEATURE, *FEATURES), "bench": (NO_FEATURE,), "recipe": (NO_FEATURE,)}


def micro_batches(feature: str) -> int:
    """Micro-batches per optimizer step in the loop of ``feature`` (1 but under gradient accumulation)."""
    row = FEATURES.get(feature)
    return int(row.args["every"]) if row is not None and row.kind == "accumulate" else 1


def parse_features(values: list[str] | tuple[str, ...] | None, preset: str, narrowed: bool = False) -> tuple[str, ...]:
    """Features from repeated or comma-separated ``--feature`` values (``all``: every row and the plain loop), in table
    order. None given: the preset's selection for the whole matrix, the plain loop alone for a run ``narrowed`` to some
    modes or optimizers (``--mode``, ``--optimizer``: a look at a few cells, as it always was).

    Raises:
        UsageError: an unknown feature, or only separators.
    """
    from harness.workload.choices import parse_choices

    if not values:
        return (NO_FEATURE,) if narrowed else PRESET_FEATURES.get(preset, (NO_FEATURE,))
    chosen = parse_choices("feature", values, (NO_FEATURE, *FEATURES, "all"))
    return (NO_FEATURE, *FEATURES) if "all" in chosen else chosen


def check_feature(name: str) -> Feature | None:
    """The row called ``name`` (``None`` for the plain loop).

    Raises:
        UsageError: no such feature (the line names them all).
    """
    if name == NO_FEATURE:
        return None
    if name not in FEATURES:
        raise UsageError("feature", name, f"one of {', '.join((NO_FEATURE, *FEATURES))}")
    return FEATURES[name]
