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

__all__ = ["FEATURES", "KINDS", "LR_LAMBDA_ARGS", "NO_FEATURE", "PRESET_FEATURES", "Cover", "Feature", "check_feature",
           "epoch_factor", "micro_batches", "parse_features"]

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
KINDS: tuple[str, ...] = ("scheduler", "accumulate", "clip_value", "frozen", "param_groups")
#: The one function of the epoch a ``lr_lambda`` row declares (LambdaLR's and MultiplicativeLR's ``lr_lambda``), by its
#: arguments: ``factor(epoch) = min(1, (epoch + 1) / warmup) / (1 + decay * epoch)``, a linear warmup then an
#: inverse-time decay. Both scripts (``epoch_factor`` in each) and the reference evaluate it in this order of double
#: operations (no ``pow``, whose libm and R's ``^`` could round apart): the row carries numbers, never code.
LR_LAMBDA_ARGS: tuple[str, ...] = ("warmup", "decay")

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
    arguments are ``args`` in both (``python_names`` renames those PyTorch spells otherwise). Where a scheduler needs
    more than numbers: ``lr_lambda`` (its ``args`` are :data:`LR_LAMBDA_ARGS`, the declared factor each script builds
    its ``lr_lambda`` from), ``lr_args`` (arguments given as a factor of the optimizer row's lr, as OneCycleLR's
    ``max_lr``: the rows' lr span 1e-3 to 1), ``on_loss`` (``step(loss)``: ReduceLROnPlateau fed the iteration's loss),
    ``traced`` (the scheduler's own state, traced after each step under the same names in both bindings),
    ``cycles_momentum`` (the scheduler sets each group's momentum or beta1 too: traced per group) and ``groups``
    (the optimizer built with the ``param_groups`` row's two groups, for a scheduler that reads per-group values).
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
    lr_lambda: bool = False
    lr_args: tuple[str, ...] = ()
    on_loss: bool = False
    traced: tuple[str, ...] = ()
    cycles_momentum: bool = False
    groups: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"feature {self.name}: kind must be one of {KINDS}")
        if self.lr_lambda and tuple(self.args) != LR_LAMBDA_ARGS:
            raise ValueError(f"feature {self.name}: an lr_lambda row's arguments are {LR_LAMBDA_ARGS}")
        if not set(self.lr_args) <= set(self.args):
            raise ValueError(f"feature {self.name}: lr_args must name arguments of the row")
        if set(self.args) != set(self.reasons):
            raise ValueError(f"feature {self.name}: every hyperparameter needs a reason, and every reason a hyperparameter")
        for cover in self.covers:
            for script, mode in cover.modes:
                SCRIPTS[script].mode(mode)  # raises on a mode the script does not declare
            unknown = [o for o in cover.optimizers if o not in OPTIMIZERS]
            if unknown:
                raise ValueError(f"feature {self.name}: unknown optimizer {unknown[0]!r}")

    def applies(self, script: str, mode: str, optimizer: str) -> bool:
        """Whether the covering design runs this feature in ``script``'s ``mode`` with ``optimizer``."""
        return any((script, mode) in c.modes and optimizer in c.optimizers for c in self.covers)

    def scheduler_args(self, lr: float) -> dict[str, float | int]:
        """The scheduler's arguments (R torch's names) for an optimizer row whose lr is ``lr``: ``lr_args`` resolved,
        and none where the row's arguments declare the ``lr_lambda`` instead."""
        if self.lr_lambda:
            return {}
        return {k: v * lr if k in self.lr_args else v for k, v in self.args.items()}

    def run_spec(self, lr: float = 1.0) -> dict[str, Any]:
        """What a script receives to build the loop (the run spec's ``feature``), with the optimizer row's ``lr``."""
        args = self.scheduler_args(lr)
        groups = FEATURES["param_groups"].args if self.groups or self.kind == "param_groups" else None
        return {
            "name": self.name, "kind": self.kind, "args": dict(self.args),
            "python": {"class": self.python, "args": {self.python_names.get(k, k): v for k, v in args.items()}},
            "r": {"function": self.r, "args": args},
            "lr_lambda": dict(self.args) if self.lr_lambda else None, "on_loss": self.on_loss,
            "traced": list(self.traced), "cycles_momentum": self.cycles_momentum, "param_groups": None if groups is None else dict(groups),
        }

    def to_json(self) -> dict[str, Any]:
        """The whole row, for docs and tests."""
        return dataclasses.asdict(self)


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


def _new_scheduler_covers(optimizers: tuple[str, ...], why: str, every_mode: str = "sgd", why_mode: str = "") -> tuple[Cover, ...]:
    """A scheduler whose own code is new to the table: the optimizers that code touches, in the scaler mode (where it
    also steps on the iterations the scaler skips), and every mode's loop once with ``every_mode`` (plain SGD, but where
    ``why_mode`` says otherwise). The lr_step and lr_cosine rows already cover every optimizer's reading of lr, so these
    need not repeat it."""
    return (
        Cover(((_SCALER, "autocast_scaler"),), optimizers, why),
        Cover(_every_mode(), (every_mode,), "every mode's loop (autocast, low-precision weights, static scale, clipping) "
                                            f"meets this scheduler's own code once{why_mode}"),
    )


#: The optimizers whose momentum or beta1 OneCycleLR cycles, one of each kind of code: SGD's momentum (R code), RMSprop's
#: momentum (R code), Adam's betas (R code), and ignite's SGD and Adam (libtorch's C++ options, which R sets through its
#: param_groups binding). The others have neither, and both bindings refuse them with cycle_momentum on.
_CYCLED: tuple[str, ...] = ("sgd_momentum", "rmsprop", "adam", "ignite_sgd", "ignite_adam")


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
            "lr_multiplicative", "scheduler", "MultiplicativeLR / lr_multiplicative: lr times factor(epoch) at each step",
            {"warmup": 1, "decay": 0.01},
            {"warmup": "1: no warmup, factor(epoch) = 1 / (1 + 0.01 epoch), below 1 and changing with the epoch, so an "
                       "off-by-one epoch in either binding changes the product",
             "decay": "0.01: the lr falls to about a sixth over tiny's 20 steps; 0.01 and its products round"},
            _new_scheduler_covers(_ONE_PER_FAMILY, "the scheduler multiplies the group's current lr, which each family "
                                                   "reads at its step (R code, ignite's C++ options)"),
            python="MultiplicativeLR", r="lr_multiplicative", lr_lambda=True,
        ),
        Feature(
            "lr_lambda", "scheduler", "LambdaLR / lr_lambda: the initial lr times factor(epoch), a warmup then a decay",
            {"warmup": 4, "decay": 0.1},
            {"warmup": "4: the lr climbs through 1/4, 2/4, 3/4 of the initial lr in tiny's first steps (a warmup, as "
                       "people write LambdaLR); those factors are exact, the decay's divisions after them round",
             "decay": "0.1: then 1 / (1 + 0.1 epoch) of it, to a third by step 20"},
            _new_scheduler_covers(_ONE_PER_FAMILY, "the scheduler sets lr from the initial lr it stored, which each family "
                                                   "reads at its step (R code, ignite's C++ options)"),
            python="LambdaLR", r="lr_lambda", lr_lambda=True,
        ),
        Feature(
            "lr_lambda_groups", "scheduler", "LambdaLR / lr_lambda over two param groups with different initial lr",
            {"warmup": 4, "decay": 0.1},
            {"warmup": "as lr_lambda: each group's lr climbs from a quarter of its own initial lr",
             "decay": "as lr_lambda"},
            (Cover(((_SCALER, "autocast_scaler"),), _ONE_PER_FAMILY,
                   "the scheduler keeps one initial lr per group (the biases' is half the weights'): a binding that read "
                   "one group's for both would part at the first step; one optimizer of each family reads them"),),
            python="LambdaLR", r="lr_lambda", lr_lambda=True, groups=True,
        ),
        Feature(
            "lr_one_cycle", "scheduler", "OneCycleLR / lr_one_cycle: lr up then down a cosine, momentum/beta1 the other way",
            {"max_lr": 1.0, "total_steps": 20, "pct_start": 0.3},
            {"max_lr": "1.0 times the optimizer row's lr (lr_args): the cycle peaks at the lr each row is tuned for, "
                       "starting from a 25th of it (div_factor's default)",
             "total_steps": "20, tiny's optimizer steps: the scheduler's 20 steps after its first reach the last, "
                            "which both bindings allow (more would raise)",
             "pct_start": "0.3 (the default): the rise ends at step 5 (0.3 * 20 - 1, exact in doubles) and the fall "
                          "spans 14, so both phases act within tiny's steps"},
            _new_scheduler_covers(_CYCLED, "the scheduler sets each group's lr and its momentum or beta1 at every step: "
                                           "one optimizer of each kind of momentum it cycles, in each family",
                                  "sgd_momentum", ", with SGD's momentum row: the scheduler gives plain SGD a momentum "
                                  "(0.95) whose buffer the sgd row does not trace, so its bfloat16 weights' known "
                                  "mul-scalar-overload would show only in the parameters"),
            python="OneCycleLR", r="lr_one_cycle", lr_args=("max_lr",), cycles_momentum=True,
        ),
        Feature(
            "lr_one_cycle_groups", "scheduler", "OneCycleLR / lr_one_cycle over two param groups",
            {"max_lr": 1.0, "total_steps": 20, "pct_start": 0.3},
            {"max_lr": "as lr_one_cycle: one value, which the scheduler gives every group (PyTorch's _format_param), "
                       "so the biases' own lr is replaced by the cycle's",
             "total_steps": "as lr_one_cycle", "pct_start": "as lr_one_cycle"},
            (Cover(((_SCALER, "autocast_scaler"),), _CYCLED,
                   "the scheduler keeps max_lr, initial_lr, min_lr and the momentum bounds in each group and cycles each "
                   "group's momentum or beta1: each kind of momentum it cycles, in each family, over two groups"),),
            python="OneCycleLR", r="lr_one_cycle", lr_args=("max_lr",), cycles_momentum=True, groups=True,
        ),
        Feature(
            "lr_reduce_on_plateau", "scheduler", "ReduceLROnPlateau / lr_reduce_on_plateau, fed each iteration's loss",
            {"factor": 0.5, "patience": 2, "threshold": 0.03},
            {"factor": "0.5: each reduction halves the lr, exactly in doubles, so only the decisions can differ",
             "patience": "2: three iterations without a 3 % better loss reduce the lr; in tiny's 20 iterations it "
                         "fires 5 times with every optimizer's float64 losses",
             "threshold": "0.03 (relative, the default mode): tiny's losses vary ~5 % from batch to batch, and no "
                          "float64 loss of any row comes within 0.8 % of the bar, so AMP's rounding of the loss "
                          "cannot flip a decision the reference makes"},
            _new_scheduler_covers(_ONE_PER_FAMILY, "the scheduler changes the group's lr on its own decisions, which "
                                                   "each family reads at its step (R code, ignite's C++ options)"),
            python="ReduceLROnPlateau", r="lr_reduce_on_plateau", on_loss=True,
            traced=("best", "num_bad_epochs", "cooldown_counter"),
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
    )
}

#: The features each preset runs by default beside the plain loop: ``tiny`` (CI's and the main job's) runs them all;
#: the timing presets run the plain loop only (their float64 reference and rounds are sized for it).
PRESET_FEATURES: dict[str, tuple[str, ...]] = {"tiny": (NO_FEATURE, *FEATURES), "bench": (NO_FEATURE,), "recipe": (NO_FEATURE,)}


def epoch_factor(declared: Mapping[str, float | int], epoch: int) -> float:
    """The declared ``lr_lambda`` of a row (:data:`LR_LAMBDA_ARGS`) at ``epoch``, in the scripts' order of operations."""
    return min(1.0, (epoch + 1) / declared["warmup"]) / (1 + declared["decay"] * epoch)


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
