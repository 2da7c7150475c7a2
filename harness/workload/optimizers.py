"""The optimizer table: every optimizer R torch ships that PyTorch also has, in both R torch families, as data.

One row per optimizer the matrix runs: the PyTorch class it is judged against, the R torch function that builds it,
and hyperparameters chosen so that every term of its update acts within ``tiny``'s 20 steps (a term that never acts
cannot part). Both languages' scripts build the optimizer from the row the run spec carries (``make_optimizer`` in
``py_scripts/optimizer.py`` and ``r_scripts/optimizer.R``), so there is one code path per language, not a script per
optimizer; the float64 reference (:mod:`harness.judge.optimizer_updates`) implements each row's update from PyTorch's
documented algorithm; the trace records each row's state (:attr:`Optimizer.state`).

R torch's two families: ``r`` is the optimizers written in R (``R/optim-*.R``, each step a loop over the parameters in
R code), ``ignite`` the libtorch C++ optimizers R torch exposes as ``optim_ignite_*`` (``torch::optim::*``, one C++
call per step). PyTorch's Python optimizers are the reference side of every pair.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.contract.optimizers import DEFAULT_OPTIMIZER, EPS_UNDER_SQRT_CLASSES, UPDATE_KIND_OF_CLASS
from harness.errors import SpecError
from harness.workload.choices import parse_choices
from harness.workload.space import Space, between, flag, pair

__all__ = [
    "FAMILIES",
    "OPTIMIZERS",
    "PRESET_OPTIMIZERS",
    "R_MAX_INT",
    "Optimizer",
    "StateEntry",
    "check_optimizer_args",
    "parse_optimizers",
]

#: R torch's optimizer families: ``r``, the R-code optimizers; ``ignite``, libtorch's C++ optimizers.
FAMILIES: tuple[str, ...] = ("r", "ignite")

#: A whole-number hyperparameter reaches R as an R integer, which is 32-bit: a larger value is a double there, and R torch's
#: API refuses it (as it refuses the spec's sizes, threads and growth interval beyond it: :mod:`harness.workload.spec`).
R_MAX_INT = 2**31 - 1

#: A hyperparameter's value: a number, a flag, or a pair of numbers (Adam's betas, Rprop's etas and step sizes).
Value = float | int | bool | tuple[float, float]
#: ``lr = SPEC_LR``: the row's learning rate is the spec's ``lr`` (each preset's, chosen for SGD on its sizes).
SPEC_LR = "spec"
#: A row's hyperparameter as the table writes it: a value, or ``SPEC_LR``.
Setting = Value | str


@dataclass(frozen=True)
class StateEntry:
    """One entry of an optimizer's per-parameter state, as the trace records it (``optim.<name>.<parameter>``).

    ``python`` and ``r``: the entry's key in each binding's state (``opt.state[p][key]``; R torch's R-code optimizers:
    ``opt$state$get(param)[[key]]``; its ignite optimizers: ``opt$state_dict()$state[[i]][[key]]``). ``count``: the
    entry is a step counter: each binding keeps it in its own type (PyTorch a float32 tensor, R torch's R code an R
    double, libtorch a 64-bit integer), so it is recorded as the whole number it holds, which is the value the step used.
    ``dtype``: the entry is recorded in this dtype, the one every kernel that uses it rounds it to (ASGD's ``eta`` and
    ``mu``: float32 tensors in PyTorch, R doubles in R torch, used only as float32 kernel arguments on both sides).
    ``r_tensor``: a count R torch's R code keeps in a 0-d float32 tensor, not an R double: ``optim_adamw``'s step
    (R/optim-adamw.R starts it as ``torch_scalar_tensor(0)`` and steps it with ``step$add_(1)``), so a checkpoint gives it
    back as one (r_scripts/checkpoint.R); ``harness search`` found AdamW resumed in R failing on an R double.
    """

    name: str
    python: str
    r: str
    count: bool = False
    dtype: str | None = None
    r_tensor: bool = False

    def to_json(self) -> dict[str, Any]:
        """Plain data for the run spec."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Optimizer:
    """One row of the table: a PyTorch optimizer and the R torch function that mirrors it, with hyperparameters.

    ``args`` uses R torch's argument names (the reference reads them too); ``python_names`` renames those PyTorch
    spells otherwise. ``reasons`` says why each value was chosen. ``state`` lists the per-parameter state the trace
    records after every step, in the order the step computes it.
    """

    name: str
    family: str
    python: str
    r: str
    args: Mapping[str, Setting]
    reasons: Mapping[str, str]
    state: tuple[StateEntry, ...] = ()
    python_names: Mapping[str, str] = field(default_factory=dict)
    title: str = ""
    #: Where ``harness search`` may move each hyperparameter (:mod:`harness.workload.space`): the row's own and any other
    #: argument both bindings' constructors take (absent from ``args``: each binding's default). Empty: searched at ``args``.
    space: Mapping[str, Space] = field(default_factory=dict)

    @property
    def kind(self) -> str | None:
        """The kind of update its PyTorch class makes (:data:`harness.contract.optimizers.UPDATE_KIND_OF_CLASS`), or
        ``None`` where none is measured yet."""
        return UPDATE_KIND_OF_CLASS.get(self.python)

    @property
    def eps_under_sqrt(self) -> bool:
        """Whether its step divides by ``sqrt(v) + eps`` with ``v`` starting at 0 (:data:`EPS_UNDER_SQRT_CLASSES`)."""
        return self.python in EPS_UNDER_SQRT_CLASSES

    def resolved_args(self, spec_lr: float, overrides: Mapping[str, Any] | None = None) -> dict[str, Value]:
        """The hyperparameters a run uses: the row's, ``lr`` from the spec where the row says so, then ``overrides``."""
        values: dict[str, Value] = {name: spec_lr if isinstance(value, str) else value for name, value in self.args.items()}
        values.update(overrides or {})
        return values

    def run_spec(self, spec_lr: float, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What a script receives to build this optimizer (docs/contract.md): the constructor in each language and its
        arguments under each language's names, and the state entries to trace."""
        args = self.resolved_args(spec_lr, overrides)
        plain = {k: list(v) if isinstance(v, tuple) else v for k, v in args.items()}
        return {
            "name": self.name, "family": self.family,
            "python": {"class": self.python, "args": {self.python_names.get(k, k): v for k, v in plain.items()}},
            "r": {"function": self.r, "args": plain},
            "state": [entry.to_json() for entry in self.state],
        }


def _entry(name: str, python: str | None = None, r: str | None = None, count: bool = False, dtype: str | None = None,
           r_tensor: bool = False) -> StateEntry:
    return StateEntry(name, python or name, r or name, count, dtype, r_tensor)


_STEP = _entry("step", count=True)
#: optim_adamw's step: a 0-d float32 tensor in R torch's R code too (:class:`StateEntry`'s ``r_tensor``).
_TENSOR_STEP = _entry("step", count=True, r_tensor=True)
#: Learning rates of the adaptive optimizers: their update is about lr per element whatever the gradient's size, so lr
#: is set against the weights' scale (initial weights are U(±1/sqrt(in_size)), 0.088 at tiny): 1e-3 moves a weight by
#: about 1 % of its size per step, enough to train visibly in 20 steps and far from overshooting.
_ADAPTIVE_LR = 1e-3
#: Every optimizer decays its weights (where it can) by this much: small enough not to dominate the gradient, large
#: enough that a weight-decay term computed wrongly moves the trajectory (R torch's SGD and RMSprop did).
_WEIGHT_DECAY = 0.01
_WD_REASON = "non-zero so the weight-decay term acts; small against the gradient"

#: The search's spaces (harness/workload/space.py), shared by the rows of one PyTorch class in both families: each range is
#: inside what both constructors accept (PyTorch's checks and R torch's ``optim_*`` / ``optim_ignite_*``, whose formals
#: take the same names), and 0 is drawn where 0 switches a term off, a region no row sets.
_LR_SPACE = between(1e-4, 0.1, "any positive lr is accepted by both; above 0.1 the search's widest runs (width 32, 3 "
                    "layers, momentum 0.9) overshoot into inf (an lr of 0.42 did), which the harness's own check stops", log=True)
_WD_SPACE = between(1e-4, 0.1, "both accept any weight_decay >= 0; 0 switches the term off", log=True, zero=True)
_EPS_SPACE = between(1e-10, 1e-2, "both accept any eps >= 0; from 1e-10 eps meets the denominator", log=True)
_MOMENTUM_SPACE = between(0.1, 0.99, "both accept 0 <= momentum; below 1 the buffer stays bounded", zero=True)
_SPACES: dict[str, dict[str, Space]] = {
    "SGD": {"lr": _LR_SPACE, "momentum": _MOMENTUM_SPACE,
            "dampening": between(0.05, 0.9, "both accept any dampening; nesterov needs it 0 in both", zero=True),
            "weight_decay": _WD_SPACE, "nesterov": flag("both need momentum > 0 and dampening 0 for it, and refuse otherwise")},
    "RMSprop": {"lr": _LR_SPACE, "alpha": between(0.5, 0.999, "both accept alpha >= 0; below 1 the average decays"),
                "eps": _EPS_SPACE, "weight_decay": _WD_SPACE, "momentum": _MOMENTUM_SPACE, "centered": flag("both take it")},
    "Adam": {"lr": _LR_SPACE, "betas": pair((0.0, 0.99), (0.5, 0.9999), "both require 0 <= beta < 1"), "eps": _EPS_SPACE,
             "weight_decay": _WD_SPACE, "amsgrad": flag("both take it")},
    "Adagrad": {"lr": _LR_SPACE, "lr_decay": between(1e-4, 0.5, "both accept lr_decay >= 0", log=True, zero=True),
                "weight_decay": _WD_SPACE, "eps": _EPS_SPACE,
                "initial_accumulator_value": between(0.01, 1.0, "both accept >= 0; 0 with a zero gradient is 0/eps", zero=True)},
    "Adadelta": {"lr": between(0.1, 2.0, "both accept lr >= 0; 1 is the default"), "rho": between(0.5, 0.99, "both need 0 <= rho <= 1"),
                 "eps": _EPS_SPACE, "weight_decay": _WD_SPACE},
    "ASGD": {"lr": _LR_SPACE, "lambda": between(1e-6, 1e-2, "both accept any lambda >= 0", log=True),
             "alpha": between(0.5, 1.0, "both accept alpha >= 0; the rate decays as step^-alpha"),
             "t0": between(0, 12, "both accept t0 >= 0; the search's runs have at most 12 steps", dtype="int"),
             "weight_decay": _WD_SPACE},
    "Rprop": {"lr": _LR_SPACE, "etas": pair((0.1, 0.9), (1.05, 2.0), "both require 0 < eta- < 1 < eta+"),
              "step_sizes": pair((1e-8, 1e-4), (0.01, 50.0), "both take any 0 <= min <= max")},
}
_SPACES["AdamW"] = _SPACES["Adam"]

OPTIMIZERS: dict[str, Optimizer] = {
    o.name: o
    for o in (
        Optimizer(
            "sgd", "r", "SGD", "optim_sgd", {"lr": SPEC_LR},
            {"lr": "the preset's lr: the recipe's plain SGD, the workload every earlier result ran"},
            title="plain SGD (the AMP recipe's optimizer)",
        ),
        Optimizer(
            "sgd_momentum", "r", "SGD", "optim_sgd",
            {"lr": SPEC_LR, "momentum": 0.9, "dampening": 0.1, "weight_decay": _WEIGHT_DECAY},
            {"lr": "the preset's lr", "momentum": "the usual 0.9: the buffer carries most of the direction",
             "dampening": "non-zero so the dampening term acts (nesterov excludes it: see sgd_nesterov)", "weight_decay": _WD_REASON},
            (_entry("momentum_buffer"),), title="SGD with momentum, dampening and weight decay",
        ),
        Optimizer(
            "sgd_nesterov", "r", "SGD", "optim_sgd",
            {"lr": SPEC_LR, "momentum": 0.9, "nesterov": True, "weight_decay": _WEIGHT_DECAY},
            {"lr": "the preset's lr", "momentum": "0.9", "nesterov": "the Nesterov look-ahead (it requires dampening 0)",
             "weight_decay": _WD_REASON},
            (_entry("momentum_buffer"),), title="SGD with Nesterov momentum and weight decay",
        ),
        Optimizer(
            "rmsprop", "r", "RMSprop", "optim_rmsprop",
            {"lr": _ADAPTIVE_LR, "alpha": 0.9, "eps": 1e-8, "weight_decay": _WEIGHT_DECAY, "momentum": 0.5},
            {"lr": "adaptive: about lr per element per step", "alpha": "0.9 rather than 0.99 so the square average moves "
             "within 20 steps", "eps": "the default", "weight_decay": _WD_REASON, "momentum": "non-zero so the momentum buffer acts"},
            (_STEP, _entry("square_avg"), _entry("momentum_buffer")),
            title="RMSprop with momentum and weight decay (the APEX example's optimizer)",
        ),
        Optimizer(
            "rmsprop_centered", "r", "RMSprop", "optim_rmsprop",
            {"lr": _ADAPTIVE_LR, "alpha": 0.9, "eps": 1e-8, "weight_decay": _WEIGHT_DECAY, "momentum": 0.5, "centered": True},
            {"lr": "adaptive", "alpha": "0.9", "eps": "the default", "weight_decay": _WD_REASON, "momentum": "non-zero",
             "centered": "the centered variance (grad_avg) acts"},
            (_STEP, _entry("square_avg"), _entry("grad_avg"), _entry("momentum_buffer")),
            title="centered RMSprop with momentum and weight decay",
        ),
        Optimizer(
            "adam", "r", "Adam", "optim_adam",
            {"lr": _ADAPTIVE_LR, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": _WEIGHT_DECAY},
            {"lr": "adaptive", "betas": "beta2 0.99 rather than 0.999 so the second moment's bias correction still matters "
             "after 20 steps but is not all of it", "eps": "the default", "weight_decay": _WD_REASON + " (L2, added to the gradient)"},
            (_STEP, _entry("exp_avg"), _entry("exp_avg_sq")), title="Adam with L2 weight decay",
        ),
        Optimizer(
            "adam_amsgrad", "r", "Adam", "optim_adam",
            {"lr": _ADAPTIVE_LR, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": _WEIGHT_DECAY, "amsgrad": True},
            {"lr": "adaptive", "betas": "as adam", "eps": "the default", "weight_decay": _WD_REASON,
             "amsgrad": "the running maximum of the second moment replaces it in the denominator"},
            (_STEP, _entry("exp_avg"), _entry("exp_avg_sq"), _entry("max_exp_avg_sq")), title="Adam with AMSGrad",
        ),
        Optimizer(
            "adamw", "r", "AdamW", "optim_adamw",
            {"lr": _ADAPTIVE_LR, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": _WEIGHT_DECAY},
            {"lr": "adaptive", "betas": "as adam", "eps": "the default", "weight_decay": _WD_REASON + " (decoupled: the weights shrink)"},
            (_TENSOR_STEP, _entry("exp_avg"), _entry("exp_avg_sq")), title="AdamW (decoupled weight decay)",
        ),
        Optimizer(
            "adagrad", "r", "Adagrad", "optim_adagrad",
            {"lr": 0.01, "lr_decay": 0.01, "weight_decay": _WEIGHT_DECAY, "initial_accumulator_value": 0.1, "eps": 1e-10},
            {"lr": "the default; Adagrad's steps shrink as the sum grows", "lr_decay": "non-zero so the decayed rate acts",
             "weight_decay": _WD_REASON, "initial_accumulator_value": "non-zero so the initial sum acts",
             "eps": "the default"},
            (_STEP, _entry("sum")), title="Adagrad with lr decay, weight decay and an initial accumulator",
        ),
        Optimizer(
            "adadelta", "r", "Adadelta", "optim_adadelta",
            {"lr": 1.0, "rho": 0.9, "eps": 1e-6, "weight_decay": _WEIGHT_DECAY},
            {"lr": "the default: Adadelta's own step is the ratio of two running averages", "rho": "the default",
             "eps": "the default (it sets the first steps' size)", "weight_decay": _WD_REASON},
            (_STEP, _entry("square_avg"), _entry("acc_delta")), title="Adadelta with weight decay",
        ),
        Optimizer(
            "asgd", "r", "ASGD", "optim_asgd",
            {"lr": SPEC_LR, "lambda": 1e-4, "alpha": 0.75, "t0": 5, "weight_decay": _WEIGHT_DECAY},
            {"lr": "the preset's lr (ASGD is SGD with a decaying rate)", "lambda": "the default decay term",
             "alpha": "the default", "t0": "averaging starts after step 5 so it acts within 20 steps (the default 1e6 never does)",
             "weight_decay": _WD_REASON},
            (_STEP, _entry("eta", dtype="float32"), _entry("mu", dtype="float32"), _entry("ax")), python_names={"lambda": "lambd"},
            title="averaged SGD, averaging from step 6",
        ),
        Optimizer(
            "rprop", "r", "Rprop", "optim_rprop",
            {"lr": _ADAPTIVE_LR, "etas": (0.5, 1.2), "step_sizes": (1e-6, 50.0)},
            {"lr": "the initial step size", "etas": "the defaults: every sign change shrinks, every agreement grows",
             "step_sizes": "the defaults"},
            (_STEP, _entry("prev"), _entry("step_size")), title="Rprop",
        ),
        Optimizer(
            "ignite_sgd", "ignite", "SGD", "optim_ignite_sgd",
            {"lr": SPEC_LR, "momentum": 0.9, "dampening": 0.1, "weight_decay": _WEIGHT_DECAY},
            {"lr": "the preset's lr", "momentum": "0.9", "dampening": "non-zero", "weight_decay": _WD_REASON},
            (_entry("momentum_buffer"),), title="libtorch's C++ SGD with momentum, dampening and weight decay",
        ),
        Optimizer(
            "ignite_adam", "ignite", "Adam", "optim_ignite_adam",
            {"lr": _ADAPTIVE_LR, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": _WEIGHT_DECAY},
            {"lr": "adaptive", "betas": "as adam", "eps": "the default", "weight_decay": _WD_REASON},
            (_STEP, _entry("exp_avg"), _entry("exp_avg_sq")), title="libtorch's C++ Adam with L2 weight decay",
        ),
        Optimizer(
            "ignite_adamw", "ignite", "AdamW", "optim_ignite_adamw",
            {"lr": _ADAPTIVE_LR, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": _WEIGHT_DECAY},
            {"lr": "adaptive", "betas": "as adam", "eps": "the default", "weight_decay": _WD_REASON},
            (_STEP, _entry("exp_avg"), _entry("exp_avg_sq")), title="libtorch's C++ AdamW",
        ),
        Optimizer(
            "ignite_rmsprop", "ignite", "RMSprop", "optim_ignite_rmsprop",
            {"lr": _ADAPTIVE_LR, "alpha": 0.9, "eps": 1e-8, "weight_decay": _WEIGHT_DECAY, "momentum": 0.5, "centered": True},
            {"lr": "adaptive", "alpha": "0.9", "eps": "the default", "weight_decay": _WD_REASON, "momentum": "non-zero",
             "centered": "every term of libtorch's RMSprop acts"},
            (_STEP, _entry("square_avg"), _entry("grad_avg"), _entry("momentum_buffer")),
            title="libtorch's C++ centered RMSprop with momentum and weight decay",
        ),
        Optimizer(
            "ignite_adagrad", "ignite", "Adagrad", "optim_ignite_adagrad",
            {"lr": 0.01, "lr_decay": 0.01, "weight_decay": _WEIGHT_DECAY, "initial_accumulator_value": 0.1, "eps": 1e-10},
            {"lr": "as adagrad", "lr_decay": "non-zero", "weight_decay": _WD_REASON, "initial_accumulator_value": "non-zero",
             "eps": "the default"},
            (_STEP, _entry("sum")), title="libtorch's C++ Adagrad",
        ),
    )
}

# Each row's space is its PyTorch class's (R torch's R-code and ignite constructors of a class take the same arguments:
# formals() of each, R torch 0.17): the row's own values are where a drawn argument shrinks back to.
OPTIMIZERS = {name: dataclasses.replace(row, space=row.space or _SPACES.get(row.python, {})) for name, row in OPTIMIZERS.items()}

#: Which optimizers a preset runs unless ``--optimizer`` says otherwise. ``tiny`` is the parity job: every row, in every
#: mode, both frontends (a cell costs milliseconds). ``bench`` and ``recipe`` time the recipe's workload: plain SGD only,
#: as their earlier results did (every row at ``bench`` would take the timing job from minutes to most of an hour).
PRESET_OPTIMIZERS: dict[str, tuple[str, ...]] = {"tiny": tuple(OPTIMIZERS), "bench": (DEFAULT_OPTIMIZER,),
                                                   "recipe": (DEFAULT_OPTIMIZER,)}


def parse_optimizers(values: list[str] | tuple[str, ...] | None, preset: str) -> tuple[str, ...]:
    """Optimizers from repeated or comma-separated ``--optimizer`` values (``all``: every row), in table order; the
    preset's own selection when none is given.

    Raises:
        UsageError: an unknown optimizer (``all`` included: ``all,nadam`` is a typo too), or only separators.
    """
    if not values:
        return PRESET_OPTIMIZERS.get(preset, (DEFAULT_OPTIMIZER,))
    chosen = parse_choices("optimizer", values, (*OPTIMIZERS, "all"))  # every name is checked, beside `all` too
    return tuple(OPTIMIZERS) if "all" in chosen else chosen


def check_optimizer_args(overrides: object) -> dict[str, dict[str, Value]]:
    """``overrides`` (the spec's ``optimizer_args``: optimizer name → {argument: value}) if every name, argument and
    value is one the table knows, with pairs as tuples.

    Raises:
        SpecError: an unknown optimizer or argument, or a value of another kind than the row's (a flag for a flag, a
            finite number for a number, two numbers for a pair).
    """
    if not isinstance(overrides, Mapping):
        raise SpecError("optimizer_args", overrides, "a table of optimizer name → {argument: value}, e.g. {\"adam\": {\"eps\": 1e-6}}")
    out: dict[str, dict[str, Value]] = {}
    for name, args in overrides.items():
        if name not in OPTIMIZERS:
            raise SpecError("optimizer_args", name, f"an optimizer: one of {', '.join(OPTIMIZERS)}")
        row = OPTIMIZERS[name]
        if not isinstance(args, Mapping):
            raise SpecError(f"optimizer_args.{name}", args, "a table of argument → value")
        checked: dict[str, Value] = {}
        for arg, value in args.items():
            if arg not in row.args and arg not in row.space:
                known = ", ".join(dict.fromkeys([*row.args, *row.space]))
                raise SpecError(f"optimizer_args.{name}", arg, f"one of {name}'s arguments: {known}")
            default = row.args[arg] if arg in row.args else row.space[arg].blank
            checked[arg] = _check_value(f"optimizer_args.{name}.{arg}", default, value)
        out[str(name)] = checked
    return out


def _check_value(where: str, default: Setting, value: object) -> Value:
    """``value`` if it is of the kind ``default`` is (a flag, a whole number, a number, a pair of numbers)."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise SpecError(where, value, "true or false")
        return value
    if isinstance(default, tuple):
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise SpecError(where, value, "two finite numbers >= 0, e.g. [0.9, 0.99]")
        return (_number(where, value[0], "two finite numbers >= 0, e.g. [0.9, 0.99]"),
                _number(where, value[1], "two finite numbers >= 0, e.g. [0.9, 0.99]"))
    if isinstance(default, int):
        # A whole number's range is R's integers, whatever the value looks like (1e300 is refused as a whole number, not
        # as a float32, and shown as given, not as its 301 digits).
        whole = f"a whole number from 0 to {R_MAX_INT} (R's largest integer)"
        number = _number(where, value, whole)
        if not number.is_integer() or number > R_MAX_INT:
            raise SpecError(where, value, whole)
        return int(number)
    return _number(where, value, "a finite number >= 0")


def _number(where: str, value: object, expected: str) -> float:
    """``value`` as a float if it is a finite number >= 0 (not a flag)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise SpecError(where, value, expected)
    return float(value)
