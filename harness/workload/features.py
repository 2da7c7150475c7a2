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

from harness.contract.models import Model
from harness.contract.modes import SCRIPTS
from harness.errors import UsageError
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.space import Space, between, choice

__all__ = ["FEATURES", "KINDS", "LOOP_ARGS", "LR_LAMBDA_ARGS", "NO_FEATURE", "PRESET_FEATURES", "UNRUNNABLE_IN_R", "Cover", "Feature",
           "Unrunnable", "check_feature", "epoch_factor", "explicit_scales", "micro_batches", "parse_features",
           "second_group_weight_decay", "stopped_in_r"]

#: The plain loop: no row, the matrix as it always was (its cells' ids carry no feature).
NO_FEATURE = "none"
#: What a row changes in the loop; each kind is one branch of both scripts' ``run_workload`` and of the reference.
#: ``scheduler``: a learning-rate scheduler stepped once per iteration after the scaler's ``step``/``update`` (PyTorch's
#: docs: ``scheduler.step()`` after ``optimizer.step()``; also on the iterations the scaler skipped, as the AMP examples
#: page's loop does). ``accumulate``: ``every`` micro-batches per optimizer step, each loss divided by ``every``.
#: ``clip_value``: ``unscale_`` then every gradient element clamped to ``[-clip_value, clip_value]``.
#: ``clip_norm``: ``unscale_`` then the gradients' norm clipped to ``max_norm`` (``clip_grad_norm_``) with the row's norm
#: type: ``inf_norm`` 1 is ``norm_type`` infinity (the largest element's magnitude), 0 is the 2-norm (the run spec's JSON
#: has no infinity, so the row carries a flag).
#: ``frozen``: one layer's parameters get ``requires_grad`` false but are still handed to the optimizer (a fine-tuning loop
#: that freezes part of the model), so every step meets parameters without a gradient.
#: ``param_groups``: the weights in one param group, the biases in a second with their own lr (and weight decay, where the
#: optimizer has one).
#: ``sometimes_used``: one hidden layer left out of the forward pass on some steps (it gets no gradient there), and
#: ``zero_grad`` called with the row's ``set_to_none`` (1 true, 0 false, -1 no argument: each binding's own default).
#: ``multi_optimizer``: PyTorch's AMP examples' "multiple models, losses and optimizers": two losses (the MSE and a
#: weighted output penalty), each scaled (or both in one ``scale`` of a list), each backward, two optimizers (the first
#: layers, and the last ``head_layers``) each stepped by the one scaler, one ``update`` (at ``new_scale_step`` an
#: ``update`` with the explicit ``new_scale``).
#: ``penalty``: the AMP examples' gradient penalty: the gradients of the scaled loss with ``create_graph``, unscaled by
#: hand, their norm times ``weight`` added to the loss under autocast, then the scaled total's backward.
#: ``custom_function``: one layer computed by a custom autograd function (a Linear's ``addmm`` forward and its backward
#: by hand) made AMP aware as the AMP examples' last section says (PyTorch: ``custom_fwd``/``custom_bwd``).
#: ``resume``: after ``at_step`` iterations the model, the optimizer and the scaler are checkpointed in the contract's
#: layout (docs/contract.md#checkpoint), built afresh, loaded from the checkpoint and trained on to the end: the
#: uninterrupted run's arithmetic, so the float64 reference is the plain loop's.
KINDS: tuple[str, ...] = ("scheduler", "accumulate", "clip_value", "clip_norm", "frozen", "param_groups", "sometimes_used",
                          "multi_optimizer", "penalty", "custom_function", "resume")
#: The one function of the epoch a ``lr_lambda`` row declares (LambdaLR's and MultiplicativeLR's ``lr_lambda``), by its
#: arguments: ``factor(epoch) = min(1, (epoch + 1) / warmup) / (1 + decay * epoch)``, a linear warmup then an
#: inverse-time decay. Both scripts (``epoch_factor`` in each) and the reference evaluate it in this order of double
#: operations (no ``pow``, whose libm and R's ``^`` could round apart): the row carries numbers, never code.
LR_LAMBDA_ARGS: tuple[str, ...] = ("warmup", "decay")

#: Arguments of the loop itself, never handed to a row's scheduler: ``resume``'s step of the checkpoint.
LOOP_ARGS: frozenset[str] = frozenset({"at_step"})

_SCALER = "cuda_amp_grad_scaler"
_PLAIN = "with_autocast"
#: One optimizer of each R torch family and kind of update: plain SGD (R code, bitwise identical in the plain loop, so a
#: feature's own difference shows first), SGD with momentum (R code, a state that carries the accumulated gradient),
#: Adam (R code) and the ignite Adam (libtorch's C++): what a feature that acts on the gradients meets in each family.
_ONE_PER_FAMILY: tuple[str, ...] = ("sgd", "sgd_momentum", "adam", "ignite_adam")
#: The same without the ignite Adam: for a feature that calls a method R torch's ignite optimizers lack an argument of.
_R_CODE_FAMILIES: tuple[str, ...] = _ONE_PER_FAMILY[:-1]


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
    #: The (language, scaler kind) cells whose binding cannot do what the row asks, with the fact why: the script
    #: refuses them in the binding's own words, and the cell is ``unsupported`` (never silently run another way).
    unsupported: Mapping[tuple[str, str], str] = field(default_factory=dict)
    #: For a ``resume`` row, the feature whose run a resumed run must equal bitwise (the plain loop, or the scheduler row
    #: with the same scheduler): :mod:`harness.judge.resumed` compares the two cells where both ran.
    uninterrupted: str = NO_FEATURE
    #: Where ``harness search`` may move each of ``args`` (:mod:`harness.workload.space`; :data:`_SPACES` below the table).
    #: An argument without one stays at the row's value; a row without any is searched at its point.
    space: Mapping[str, Space] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"feature {self.name}: kind must be one of {KINDS}")
        if self.lr_lambda and tuple(self.args) != LR_LAMBDA_ARGS:
            raise ValueError(f"feature {self.name}: an lr_lambda row's arguments are {LR_LAMBDA_ARGS}")
        if not set(self.lr_args) <= set(self.args):
            raise ValueError(f"feature {self.name}: lr_args must name arguments of the row")
        if set(self.args) != set(self.reasons):
            raise ValueError(f"feature {self.name}: every hyperparameter needs a reason, and every reason a hyperparameter")
        if not set(self.space) <= set(self.args):
            raise ValueError(f"feature {self.name}: a space is declared for an argument of the row only")
        for cover in self.covers:
            for script, mode in cover.modes:
                SCRIPTS[script].mode(mode)  # raises on a mode the script does not declare
            unknown = [o for o in cover.optimizers if o not in OPTIMIZERS]
            if unknown:
                raise ValueError(f"feature {self.name}: unknown optimizer {unknown[0]!r}")

    def never_acts(self, steps: int, num_layers: int) -> str | None:
        """Why this row's mechanism cannot act in a run of ``steps`` iterations of a ``num_layers``-layer model (one phrase),
        or ``None``: a cell whose feature never acts would pass as the plain loop does, having tested nothing of it (a resume
        whose checkpoint step is past the run's end wrote no checkpoint, and passed). Only what the spec decides is known
        here; a clip that never engages is the data's (the trace's trigger says it)."""
        args = self.args
        needs: list[tuple[int, str]] = []  # (the steps it needs, what happens there)
        if self.kind == "resume":
            needs.append((int(args["at_step"]) + 1, f"its checkpoint after {int(args['at_step'])} iterations and the run from it"))
        if self.kind == "accumulate":
            needs.append((int(args["every"]), f"an optimizer step after {int(args['every'])} micro-batches"))
        if self.kind == "sometimes_used":
            needs.append((int(args["every"]), f"a step without layer {int(args['layer'])} (the steps that are not multiples of "
                                              f"{int(args['every'])})"))
        if self.kind == "multi_optimizer":
            needs.append((int(args["new_scale_step"]) + 1, f"its update with an explicit new scale at step {int(args['new_scale_step'])}"))
        if self.python == "StepLR":
            needs.append((int(args["step_size"]) + 1, f"its lr decay after {int(args['step_size'])} scheduler steps"))
        elif self.python == "ReduceLROnPlateau":
            needs.append((int(args["patience"]) + 3, f"a reduction after {int(args['patience'])} + 1 iterations without a better loss"))
        elif self.python:
            needs.append((2, "a step whose lr the scheduler changed"))
        short = [(n, what) for n, what in needs if steps < n]
        if short:
            n, what = max(short)
            return f"needs {n} steps for {what}, and the run has {steps}"
        layers = {"frozen": int(args.get("layer", 0)) + 1, "custom_function": int(args.get("layer", 0)) + 1,
                  "sometimes_used": int(args.get("layer", 0)) + 2,  # a hidden layer: the model maps in to in without it
                  "multi_optimizer": int(args.get("head_layers", 0)) + 1}.get(self.kind, 1)
        if num_layers < layers:
            return f"needs a model of {layers} layers or more (its layer arguments), and the model has {num_layers}"
        return None

    def cannot_run_on(self, model: Model) -> str | None:
        """Why this row cannot run on ``model`` (one phrase, the fact from the model's row), or ``None``: a kind the model's
        modules cannot run (:attr:`Model.cannot_run`), or a layer argument naming a layer the model's forward cannot leave
        out or compute by a custom function (:attr:`Model.left_out`, :attr:`Model.replaced`). Such a cell would only fail
        at run time, in the binding's error, having tested nothing of the feature."""
        if self.kind in model.cannot_run:
            return model.cannot_run[self.kind]
        where = {"sometimes_used": (model.left_out, "left out of a step"),
                 "custom_function": (model.replaced, "computed by a custom function")}.get(self.kind)
        if where is None or where[0] is None or int(self.args["layer"]) in where[0]:
            return None
        layers, what = where
        can = f"only layer {' or '.join(str(k) for k in layers)} can be" if layers else "no layer can be"
        return f"its layer argument is {int(self.args['layer'])}, and of the {model.name} model {can} {what}"

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

    def scheduler_args(self, lr: float) -> dict[str, float | int]:
        """The scheduler's arguments (R torch's names) for an optimizer row whose lr is ``lr``: ``lr_args`` resolved, the
        loop's own (``LOOP_ARGS``) left out, and none where the row's arguments declare the ``lr_lambda`` instead."""
        if self.lr_lambda:
            return {}
        return {k: v * lr if k in self.lr_args else v for k, v in self.args.items() if k not in LOOP_ARGS}

    @property
    def two_groups(self) -> bool:
        """Whether the loop builds its optimizer with the ``param_groups`` row's two groups (that row, or a scheduler that
        reads per-group values)."""
        return self.groups or self.kind == "param_groups"

    def run_spec(self, lr: float = 1.0) -> dict[str, Any]:
        """What a script receives to build the loop (the run spec's ``feature``), with the optimizer row's ``lr``."""
        args = self.scheduler_args(lr)
        groups = FEATURES["param_groups"].args if self.two_groups else None
        return {
            "name": self.name, "kind": self.kind, "args": dict(self.args),
            "python": {"class": self.python, "args": {self.python_names.get(k, k): v for k, v in args.items()}},
            "r": {"function": self.r, "args": args},
            "lr_lambda": dict(self.args) if self.lr_lambda else None, "on_loss": self.on_loss,
            "traced": list(self.traced), "cycles_momentum": self.cycles_momentum, "param_groups": None if groups is None else dict(groups),
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


def _clip_covers(how: str) -> tuple[Cover, ...]:
    """A clip after ``unscale_`` (``how``: by value, by a norm) in the scaler script, in place of the clip mode's."""
    return (
        Cover(((_SCALER, "default"), (_SCALER, "autocast_scaler")), _ONE_PER_FAMILY,
              f"clipping {how} after unscale_, in place of the clip mode's norm clip: one optimizer of each family, "
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


def _sometimes_used_covers(modes: tuple[str, ...], optimizers: tuple[str, ...] = _ONE_PER_FAMILY) -> tuple[Cover, ...]:
    return (
        Cover(tuple((_SCALER, m) for m in modes), optimizers,
              "a parameter without a gradient on some steps meets the scaler's unscale_ and step and the optimizer's step "
              "(which skips it, or steps it on a zero gradient), and zero_grad meets it: one optimizer of each family "
              "(momentum and Adam's moments go on moving on a zero gradient; ignite's zero_grad is libtorch's). The "
              "with_autocast pair's loop meets it only through the optimizer, as this script's default mode does"
              + ("" if "ignite_adam" in optimizers else "; not ignite_adam, whose zero_grad() takes no set_to_none and "
                 "stops (R torch bug ignite-zero-grad-set-to-none, docs/bugs/: no switch can give a method an argument, so "
                 "the cell could only fail; sometimes_used_default covers its default)")),
    )


_USED_ARGS: dict[str, float | int] = {"layer": 1, "every": 2}
_USED_REASONS = {
    "layer": "1, the hidden 128-by-128 layer: the model still maps 128 to 128 without it, and layers before and after it "
             "train on every step",
    "every": "2: the layer is used on the even steps and left out on the odd ones, so tiny's 20 steps alternate",
}


def _resume_covers() -> tuple[Cover, ...]:
    return (
        Cover(((_SCALER, "default"), (_SCALER, "autocast_scaler")), ("sgd_momentum", "adam", "ignite_adam", "adagrad"),
              "what a checkpoint carries: SGD's momentum buffer (R code), Adam's moments and step count in R code and in "
              "libtorch's C++ (R torch keeps their state_dict()s differently: an R list, a C++ state by position), and "
              "Adagrad's step count and sum (R code, a pair identical in the plain loop, so a resumed run's own difference "
              "shows first); with the scaler disabled (users' use_amp=False) and enabled, whose scale and growth tracker "
              "are checkpointed too where the binding can save them"),
    )


_MULTI_ARGS: dict[str, float | int] = {"head_layers": 1, "second_loss_weight": 0.3, "new_scale_step": 14, "new_scale": 1048576.0}
_MULTI_REASONS = {
    "head_layers": "1: the second optimizer takes the last layer (a head), the first the layers before it; the main job's "
                   "overflow lands in layer 0, so only the first optimizer finds it and skips",
    "second_loss_weight": "0.3 times the MSE of the output against zero (an output penalty), as the examples' 0.7/0.3 "
                          "loss mix: both losses reach every layer through retain_graph",
    "new_scale_step": "14: after the main job's overflow at 9 and its growth at 13, where the rule would not move the "
                      "scale, so an update that ignored new_scale shows",
    "new_scale": "2^20, above the scale at step 14 (2^18): the record marks a step skipped where the scale goes down, so "
                 "the explicit scale must not",
}


#: Why R's resume cells with the dynamic scaler are refused: one spelling for every feature that checkpoints.
_R_SCALER_NOT_SAVED = ("R torch's cuda_amp_grad_scaler() has no state_dict() (R/autocast.R): its scale and growth tracker "
                       "cannot be saved, and a resumed run would restart them")

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
            _clip_covers("by value"),
        ),
        Feature(
            "clip_norm_inf", "clip_norm", "unscale_, then clip_grad_norm_ / nn_utils_clip_grad_norm_ with norm_type inf",
            {"max_norm": 0.005, "inf_norm": 1},
            {"max_norm": "tiny's largest gradient element (the infinity norm) is 0.007 to 0.012 at every step: 0.005 "
                         "clips all 20 (coefficients 0.43 to 0.68 with SGD). Not fewer: on a step that does not clip, the "
                         "clip coefficient's 1 ULP (clip-coef-reciprocal) is an unused first difference the matcher cannot "
                         "yet see past (as in _gradient_covers)",
             "inf_norm": "1: norm_type inf, the norm R torch computes by its own branch (the largest |element| of each "
                         "gradient, taken to R with item()) where PyTorch uses torch.linalg.vector_norm"},
            _clip_covers("by the infinity norm"),
        ),
        Feature(
            "clip_lowp", "clip_norm", "clip_grad_norm_ / nn_utils_clip_grad_norm_ on gradients in the AMP dtype",
            {"max_norm": 0.1, "inf_norm": 0},
            {"max_norm": "0.1, the clip mode's clip_max_norm: tiny's 2-norm is above it at every step (the clip mode clips "
                         "all 20), so every step multiplies the bfloat16 gradients by the coefficient",
             "inf_norm": "0: the 2-norm, the clip mode's and the recipe's; the infinity norm has its own row"},
            (Cover(((_PLAIN, "lowp_weights"), (_PLAIN, "lowp_weights_scaled")), ("sgd", "adam"),
                   "the weights, hence the gradients, norm and coefficient, in bfloat16 (the clip mode clips only float32 "
                   "gradients), without and with the static scale (unscaled by hand before the clip): plain SGD, "
                   "bitwise identical in the plain loop, and Adam, whose state meets the clipped gradient"),),
        ),
        Feature(
            "sometimes_used", "sometimes_used", "a layer used only on some steps; zero_grad(set_to_none = TRUE)",
            {**_USED_ARGS, "set_to_none": 1},
            {**_USED_REASONS, "set_to_none": "1: PyTorch's default, written out; the unused layer's grad is None, so the "
                                             "optimizer and the scaler skip it"},
            _sometimes_used_covers(("default", "autocast_scaler"), _R_CODE_FAMILIES),
        ),
        Feature(
            "sometimes_used_zeros", "sometimes_used", "a layer used only on some steps; zero_grad(set_to_none = FALSE)",
            {**_USED_ARGS, "set_to_none": 0},
            {**_USED_REASONS, "set_to_none": "0: R torch's default for its R-code optimizers, written out; the unused layer "
                                             "steps on a zero gradient"},
            _sometimes_used_covers(("autocast_scaler",), _R_CODE_FAMILIES),
        ),
        Feature(
            "sometimes_used_default", "sometimes_used", "a layer used only on some steps; zero_grad() as each binding's users get it",
            {**_USED_ARGS, "set_to_none": -1},
            {**_USED_REASONS, "set_to_none": "-1: zero_grad() with no argument, each binding's own default (PyTorch: True; "
                                             "R torch's R-code optimizers: FALSE; its ignite optimizers: libtorch's, true)"},
            _sometimes_used_covers(("autocast_scaler",)),
        ),
        Feature(
            "multi_optimizer", "multi_optimizer", "two losses, two optimizers, one scaler; an update with an explicit new scale",
            {**_MULTI_ARGS, "scale_list": 0},
            {**_MULTI_REASONS, "scale_list": "0: scale() of each loss in turn, the examples' loop"},
            (Cover(((_SCALER, "default"), (_SCALER, "autocast_scaler")), _ONE_PER_FAMILY,
                   "two optimizers under one scaler (each found_inf, each step, one update), and under the disabled one "
                   "(users' use_amp=False, every call passed through): one optimizer of each family. Not the clip mode: "
                   "there the main job's overflow makes the norm of both optimizers' gradients infinite, so the second "
                   "optimizer, which finds no inf of its own, steps on gradients the clip zeroed, a step the reference "
                   "does not follow"),),
        ),
        Feature(
            "multi_optimizer_list", "multi_optimizer", "multi_optimizer with both losses scaled by one scale() of a list",
            {**_MULTI_ARGS, "scale_list": 1},
            {**_MULTI_REASONS, "scale_list": "1: scale([loss0, loss1]), which both bindings document (a tensor or a list of "
                                             "tensors)"},
            (Cover(((_SCALER, "autocast_scaler"),), ("sgd",),
                   "scale() of a list is the scaler's code alone, before any optimizer: plain SGD, whose step is bitwise "
                   "identical in the plain loop"),),
        ),
        Feature(
            "penalty", "penalty", "gradient penalty: the norm of the unscaled gradients (create_graph) added to the loss",
            {"weight": 0.1},
            {"weight": "0.1 times the gradient norm (about 0.12 at tiny's first steps): the penalty's gradient, 0.1 times "
                       "the Hessian times the unit gradient, is about a tenth of the MSE's there, so it acts on every "
                       "layer without outweighing it"},
            (Cover(((_SCALER, "default"), (_SCALER, "autocast_scaler")), _ONE_PER_FAMILY,
                   "the penalty is computed from the gradients of the scaled loss and unscaled by hand (the scale, 1.0 "
                   "where the scaler is disabled), then the whole loss goes through the scaler: one optimizer of each "
                   "family, with the scaler disabled and enabled. Not the clip mode: it clips the penalized gradient "
                   "after unscale_ as it clips the plain one"),),
        ),
        Feature(
            "custom_function", "custom_function", "a layer computed by a custom autograd function under autocast",
            {"layer": 1},
            {"layer": "1, the hidden layer: its input is the bfloat16 output of a ReLU under autocast and its gradient "
                      "flows on to layer 0, so the function's forward, its backward and the gradient it returns all act"},
            (Cover(((_PLAIN, "default"), (_PLAIN, "autocast"), (_SCALER, "autocast_scaler")), ("sgd",),
                   "the function's forward and backward under autocast (its backward in the forward's autocast state), "
                   "without it (default: the decorators do nothing), and with the scaler's scaled gradient; plain SGD, "
                   "whose step is bitwise identical in the plain loop, since the function changes what reaches the "
                   "optimizer and nothing in it. Not the low-precision-weights modes: autocast is off there, as in "
                   "default"),),
        ),
        Feature(
            "resume", "resume", "checkpoint after at_step iterations, build afresh, load the checkpoint, train on",
            {"at_step": 7},
            {"at_step": "7 of tiny's 20 iterations: mid-epoch (the batch is taken from the checkpoint's step); the scale's "
                        "second growth is the next step, decided by the growth tracker carried over, and the preset's "
                        "overflow (step 9) comes after; 13 steps left for a state read back wrong to show"},
            _resume_covers(),
            unsupported={("r", "dynamic"): _R_SCALER_NOT_SAVED},
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
            unsupported={("r", "dynamic"): _R_SCALER_NOT_SAVED},
            uninterrupted="lr_step",
        ),
    )
}

#: The search's spaces of the rows' arguments (harness/workload/space.py). The search runs at most 12 steps (its spec
#: space, harness/workload/spec.py), hence the step counts' ranges. ``accumulate`` and ``custom_function`` declare none:
#: an ``every`` that does not divide an epoch leaves micro-batches unstepped, which the reference does not follow.
_STEPS = "; the search's runs have at most 12 steps"
_GAMMA = between(0.1, 0.99, "both accept any multiplicative factor; below 1 the lr decays")
_LAMBDA = {"warmup": between(1, 6, "a whole number >= 1 (the declared factor divides by it)" + _STEPS, dtype="int"),
           "decay": between(0.0, 0.5, "any decay >= 0 keeps the factor positive and finite")}
_CYCLE = {"max_lr": between(0.1, 2.0, "a factor of the row's lr; any positive max_lr is accepted by both"),
          "total_steps": between(12, 40, "both raise when stepped past total_steps: at least the search's 12 steps", dtype="int"),
          "pct_start": between(0.1, 0.9, "both require 0 <= pct_start <= 1, and a rise of at least one step")}
_USED = {"every": between(2, 4, "the layer is used every `every` steps; any whole number >= 1 in both", dtype="int")}
_MULTI = {"second_loss_weight": between(0.0, 1.0, "any weight of the second loss"),
          "new_scale_step": between(0, 11, "a step of the run" + _STEPS, dtype="int"),
          "new_scale": choice(1048576.0, 1024.0, 8.0, why="a power of two: the scale stays exact in both")}
_CLIP = between(1e-4, 1.0, "any positive bound is accepted by both; below 1e-4 every gradient is clipped", log=True)
_AT_STEP = between(1, 11, "a step inside the run" + _STEPS, dtype="int")
_SPACES: dict[str, dict[str, Space]] = {
    "lr_step": {"step_size": between(1, 6, "a whole number >= 1 in both" + _STEPS, dtype="int"), "gamma": _GAMMA},
    "lr_cosine": {"T_max": between(1, 12, "a whole number >= 1 in both" + _STEPS, dtype="int"),
                  "eta_min": between(0.0, 1e-3, "below every row's lr (the least is 1e-4 in the search)")},
    "lr_multiplicative": _LAMBDA, "lr_lambda": _LAMBDA, "lr_lambda_groups": _LAMBDA,
    "lr_one_cycle": _CYCLE, "lr_one_cycle_groups": _CYCLE,
    "lr_reduce_on_plateau": {"factor": between(0.1, 0.9, "both require factor < 1"),
                             "patience": between(0, 4, "a whole number >= 0 in both", dtype="int"),
                             "threshold": between(0.0, 0.1, "any relative threshold >= 0")},
    "param_groups": {"bias_lr_factor": between(0.1, 2.0, "any positive lr for the second group"),
                     "bias_weight_decay": between(0.0, 0.1, "any weight_decay >= 0 for the second group")},
    "frozen": {"layer": choice(0, 1, why="a layer of every searched model (2 or 3 layers)")},
    "clip_value": {"clip_value": _CLIP}, "clip_norm_inf": {"max_norm": _CLIP}, "clip_lowp": {"max_norm": _CLIP},
    "sometimes_used": _USED, "sometimes_used_zeros": _USED, "sometimes_used_default": _USED,
    "multi_optimizer": _MULTI, "multi_optimizer_list": _MULTI,
    "penalty": {"weight": between(0.0, 1.0, "any weight of the penalty")},
    "resume": {"at_step": _AT_STEP}, "resume_lr_step": {"at_step": _AT_STEP, "step_size": between(1, 6, "as lr_step's", dtype="int"),
                                                         "gamma": _GAMMA},
}
FEATURES = {name: dataclasses.replace(row, space=_SPACES.get(name, {})) for name, row in FEATURES.items()}

@dataclass(frozen=True)
class Unrunnable:
    """Optimizer rows with loop features that R torch cannot run, for a reported bug (``docs/bugs/<bug>/``) that no switch
    can reconcile (R's constructor or method itself stops): the covering designs leave these out (their reasons say so),
    and the search does not draw them (``harness search``; a cell could only fail, a finding already reported)."""

    bug: str
    optimizers: tuple[str, ...]
    features: tuple[str, ...]


_IGNITE = tuple(name for name, row in OPTIMIZERS.items() if row.family == "ignite")
UNRUNNABLE_IN_R: tuple[Unrunnable, ...] = (
    # libtorch's C++ Adagrad keeps no state for a second param group that R adds (docs/bugs/ignite-adagrad-param-group-state/)
    Unrunnable("ignite-adagrad-param-group-state", ("ignite_adagrad",),
               tuple(name for name, row in FEATURES.items() if row.two_groups)),
    # an ignite optimizer's zero_grad() takes no argument (docs/bugs/ignite-zero-grad-set-to-none/): the rows that pass one
    Unrunnable("ignite-zero-grad-set-to-none", _IGNITE,
               tuple(name for name, row in FEATURES.items() if row.kind == "sometimes_used" and row.args["set_to_none"] >= 0)),
)


def second_group_weight_decay(optimizer_args: Mapping[str, Any]) -> float | None:
    """The weight decay of the second param group (the biases) where a loop runs the ``param_groups`` row's two groups
    (:attr:`Feature.two_groups`), for an optimizer with the arguments ``optimizer_args`` (its row's and the spec's): the
    row's ``bias_weight_decay`` where the optimizer takes a weight decay at all (it is given, even as 0), else ``None``.
    What both scripts do (``make_optimizer`` in py_scripts/optimizer.py and r_scripts/optimizer.R), and so what the
    float64 reference and a known difference's ``inert`` check read: the search draws plain SGD a weight decay of 0 and
    the biases one of 0.0625, and R torch's weight-decay bug then acts on the biases alone."""
    return float(FEATURES["param_groups"].args["bias_weight_decay"]) if "weight_decay" in optimizer_args else None


def stopped_in_r(optimizer: str, feature: str) -> str | None:
    """The R torch bug that stops ``optimizer`` with ``feature`` (:data:`UNRUNNABLE_IN_R`), or ``None``."""
    return next((u.bug for u in UNRUNNABLE_IN_R if optimizer in u.optimizers and feature in u.features), None)


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


def explicit_scales(feature: str) -> dict[int, float]:
    """The optimizer steps (0-based) whose ``update`` sets an explicit new scale in the loop of ``feature``, and that
    scale (empty but for ``multi_optimizer``): the scale oracle follows them instead of the growth rule."""
    row = FEATURES.get(feature)
    if row is None or row.kind != "multi_optimizer":
        return {}
    return {int(row.args["new_scale_step"]): float(row.args["new_scale"])}


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
