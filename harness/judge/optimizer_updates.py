"""Every optimizer's update in exact float64, written from PyTorch's documented algorithm (no torch here).

The float64 reference (:mod:`harness.judge.reference`) trains with one of these, so each cell's own check judges the
same thing whatever its optimizer: how far the run is from the exact trajectory of the algorithm PyTorch documents.
Each class is the pseudocode of its PyTorch class's docstring (torch 2.13.0, ``torch/optim/<name>.py``, cited on each
class), one step per call, over NumPy float64 arrays changed in place; ASGD has no pseudocode, so its class follows
``_single_tensor_asgd``. A class's arguments are a row's :meth:`~harness.workload.optimizers.Optimizer.resolved_args`
(R torch's names); an argument the row leaves out takes PyTorch's default (``DEFAULTS``, tested against the
constructors' signatures), since PyTorch's optimizer is the reference side of every pair.

Only the documented arithmetic, exactly: where PyTorch's implementation rounds for its own reasons (ASGD keeps ``eta``
and ``mu`` as float32 scalars unless the default dtype is float64; the step count is a float32 tensor) the reference
does not, and that rounding is part of what a cell's distance measures. A step the scaler skipped is not a call
here at all (no state change, no step count), as ``GradScaler.step`` and R torch's scaler skip ``optimizer.step()``.

The state is kept per parameter under PyTorch's keys (``exp_avg``, ``momentum_buffer``, ...: the ``python`` names of
:attr:`~harness.workload.optimizers.Optimizer.state`), created at a parameter's first step as PyTorch creates it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from harness.workload.optimizers import OPTIMIZERS, Optimizer

__all__ = ["UPDATES", "Update", "make_update"]

#: One parameter's state: arrays shaped like it, and scalars (the step count, ASGD's eta and mu).
State = dict[str, Any]


class Update(ABC):
    """One optimizer's float64 update: per-parameter state, and :meth:`step` over all parameters in place.

    ``args``: the hyperparameters under R torch's names (a row's resolved arguments); missing ones take ``DEFAULTS``.
    An argument the class does not know is refused, so a new hyperparameter in the table cannot be silently ignored.
    """

    #: The PyTorch class (``torch.optim.<name>``) whose documented algorithm this is.
    python: ClassVar[str]
    #: PyTorch's constructor defaults, under R torch's names (``lambda`` for ASGD's ``lambd``).
    DEFAULTS: ClassVar[Mapping[str, Any]]

    def __init__(self, args: Mapping[str, Any]) -> None:
        unknown = sorted(set(args) - set(self.DEFAULTS))
        if unknown:
            raise ValueError(f"{self.python}'s float64 update has no argument {unknown[0]!r}: it knows {', '.join(self.DEFAULTS)}")
        self.args: dict[str, Any] = {**self.DEFAULTS, **args}
        self.state: list[State] = []

    def step(self, params: Sequence[np.ndarray], grads: Sequence[np.ndarray | None]) -> None:
        """One optimizer step: every parameter (float64, changed in place) from its gradient, in order; a parameter whose
        gradient is ``None`` (unused this step, its grad set to None) is left as it is, its state too, as PyTorch's
        optimizers skip a parameter whose ``grad`` is None."""
        if len(params) != len(grads):
            raise ValueError(f"{len(params)} parameters but {len(grads)} gradients")
        for i, (param, grad) in enumerate(zip(params, grads, strict=True)):
            if i == len(self.state):
                self.state.append(self.init_state(param))
            if grad is not None:
                self.update(param, grad, self.state[i])

    @abstractmethod
    def init_state(self, param: np.ndarray) -> State:
        """The state of ``param`` before its first step."""

    @abstractmethod
    def update(self, param: np.ndarray, grad: np.ndarray, state: State) -> None:
        """One step of one parameter: ``param`` and ``state`` change in place; ``grad`` is left as it is."""

    def _decayed(self, param: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """``g + λθ`` where ``λ ≠ 0`` (L2 weight decay, added after any clipping, inside the optimizer's step)."""
        wd = self.args["weight_decay"]
        return grad + wd * param if wd != 0 else grad


class Sgd(Update):
    """``torch/optim/sgd.py:159-186``: momentum (the buffer is ``g`` at the first step), dampening, Nesterov, weight decay.

    With every option off, ``θ -= γ g``: the same operation, bit for bit, as the reference's plain SGD always was.
    """

    python = "SGD"
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False}

    def init_state(self, param: np.ndarray) -> State:
        return {"momentum_buffer": None}

    def update(self, param: np.ndarray, grad: np.ndarray, state: State) -> None:
        mu, tau = self.args["momentum"], self.args["dampening"]
        g = self._decayed(param, grad)
        if mu != 0:
            buf = state["momentum_buffer"]
            buf = g.copy() if buf is None else mu * buf + (1 - tau) * g
            state["momentum_buffer"] = buf
            g = g + mu * buf if self.args["nesterov"] else buf
        param -= self.args["lr"] * g


class RmsProp(Update):
    """``torch/optim/rmsprop.py:204-233``: square average, optional centering, momentum buffer, weight decay."""

    python = "RMSprop"
    DEFAULTS: ClassVar[Mapping[str, Any]] = {
        "lr": 1e-2, "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0, "momentum": 0.0, "centered": False,
    }

    def init_state(self, param: np.ndarray) -> State:
        state: State = {"step": 0.0, "square_avg": np.zeros_like(param)}
        if self.args["momentum"] > 0:
            state["momentum_buffer"] = np.zeros_like(param)
        if self.args["centered"]:
            state["grad_avg"] = np.zeros_like(param)
        return state

    def update(self, param: np.ndarray, grad: np.ndarray, state: State) -> None:
        alpha, eps, lr = self.args["alpha"], self.args["eps"], self.args["lr"]
        state["step"] += 1
        g = self._decayed(param, grad)
        state["square_avg"] = v = alpha * state["square_avg"] + (1 - alpha) * g * g
        if self.args["centered"]:
            state["grad_avg"] = g_ave = state["grad_avg"] * alpha + (1 - alpha) * g
            v = v - g_ave * g_ave
        direction = g / (np.sqrt(v) + eps)
        if self.args["momentum"] > 0:
            state["momentum_buffer"] = self.args["momentum"] * state["momentum_buffer"] + direction
            param -= lr * state["momentum_buffer"]
        else:
            param -= lr * direction


class Adam(Update):
    """``torch/optim/adam.py:279-309``: both moments, both bias corrections, AMSGrad's running maximum, L2 weight decay."""

    python = "Adam"
    #: AdamW: the weight decay shrinks θ itself instead of joining the gradient.
    decoupled: ClassVar[bool] = False
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "amsgrad": False}

    def init_state(self, param: np.ndarray) -> State:
        state: State = {"step": 0.0, "exp_avg": np.zeros_like(param), "exp_avg_sq": np.zeros_like(param)}
        if self.args["amsgrad"]:
            state["max_exp_avg_sq"] = np.zeros_like(param)
        return state

    def update(self, param: np.ndarray, grad: np.ndarray, state: State) -> None:
        (beta1, beta2), eps, lr = self.args["betas"], self.args["eps"], self.args["lr"]
        state["step"] += 1
        t = state["step"]
        if self.decoupled:
            param -= lr * self.args["weight_decay"] * param
            g = grad
        else:
            g = self._decayed(param, grad)
        state["exp_avg"] = m = beta1 * state["exp_avg"] + (1 - beta1) * g
        state["exp_avg_sq"] = v = beta2 * state["exp_avg_sq"] + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**t)
        if self.args["amsgrad"]:
            state["max_exp_avg_sq"] = v = np.maximum(state["max_exp_avg_sq"], v)
        v_hat = v / (1 - beta2**t)
        param -= lr * m_hat / (np.sqrt(v_hat) + eps)


class AdamW(Adam):
    """``torch/optim/adamw.py:64-94``: Adam whose weight decay shrinks θ by ``γλθ`` before the step (decoupled)."""

    python = "AdamW"
    decoupled = True
    DEFAULTS: ClassVar[Mapping[str, Any]] = {**Adam.DEFAULTS, "weight_decay": 1e-2}


class Adagrad(Update):
    """``torch/optim/adagrad.py:238-256``: the decayed rate ``γ / (1 + (t-1)η)``, the sum from its initial value, weight decay."""

    python = "Adagrad"
    DEFAULTS: ClassVar[Mapping[str, Any]] = {
        "lr": 1e-2, "lr_decay": 0.0, "weight_decay": 0.0, "initial_accumulator_value": 0.0, "eps": 1e-10,
    }

    def init_state(self, param: np.ndarray) -> State:
        return {"step": 0.0, "sum": np.full_like(param, self.args["initial_accumulator_value"])}

    def update(self, param: np.ndarray, grad: np.ndarray, state: State) -> None:
        state["step"] += 1
        clr = self.args["lr"] / (1 + (state["step"] - 1) * self.args["lr_decay"])
        g = self._decayed(param, grad)
        state["sum"] = total = state["sum"] + g * g
        param -= clr * g / (np.sqrt(total) + self.args["eps"])


class Adadelta(Update):
    """``torch/optim/adadelta.py:196-217``: the ratio of two running RMS (of updates and of gradients), weight decay."""

    python = "Adadelta"
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"lr": 1.0, "rho": 0.9, "eps": 1e-6, "weight_decay": 0.0}

    def init_state(self, param: np.ndarray) -> State:
        return {"step": 0.0, "square_avg": np.zeros_like(param), "acc_delta": np.zeros_like(param)}

    def update(self, param: np.ndarray, grad: np.ndarray, state: State) -> None:
        rho, eps = self.args["rho"], self.args["eps"]
        state["step"] += 1
        g = self._decayed(param, grad)
        state["square_avg"] = v = state["square_avg"] * rho + g * g * (1 - rho)
        delta = np.sqrt(state["acc_delta"] + eps) / np.sqrt(v + eps) * g
        state["acc_delta"] = state["acc_delta"] * rho + delta * delta * (1 - rho)
        param -= self.args["lr"] * delta


class Asgd(Update):
    """``torch/optim/asgd.py:197-273`` (``_single_tensor_asgd``; the class documents no pseudocode).

    Each step: weight decay, ``θ ← θ(1 - λη) - ηg`` with the ``eta`` of the step before (``lr`` at first), the average
    ``ax`` (``ax ← θ`` while ``mu`` is 1, else ``ax += μ(θ - ax)``), then ``η ← lr / (1 + λ lr t)^α`` and
    ``μ ← 1 / max(1, t - t0)``. ``ax`` is output only: the trajectory does not read it. PyTorch keeps ``eta`` and
    ``mu`` as float32 scalars (``_get_scalar_dtype``) unless the default dtype is float64; here they are exact.
    """

    python = "ASGD"
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"lr": 1e-2, "lambda": 1e-4, "alpha": 0.75, "t0": 1e6, "weight_decay": 0.0}

    def init_state(self, param: np.ndarray) -> State:
        return {"step": 0.0, "eta": float(self.args["lr"]), "mu": 1.0, "ax": np.zeros_like(param)}

    def update(self, param: np.ndarray, grad: np.ndarray, state: State) -> None:
        lr, lambd = self.args["lr"], self.args["lambda"]
        state["step"] += 1
        g = self._decayed(param, grad)
        eta = state["eta"]
        param *= 1 - lambd * eta
        param -= eta * g
        if state["mu"] != 1:
            state["ax"] += (param - state["ax"]) * state["mu"]
        else:
            state["ax"] = param.copy()
        t = state["step"]
        state["eta"] = lr / (1 + lambd * lr * t) ** self.args["alpha"]
        state["mu"] = 1 / max(1.0, t - self.args["t0"])


class Rprop(Update):
    """``torch/optim/rprop.py:173-199``: per-element step sizes that grow while the gradient keeps its sign and shrink
    (with that step's gradient zeroed) when it flips; ``θ -= η sign(g)``.

    The step size is clamped to ``step_sizes`` after every change, also when the sign product is 0, as PyTorch's
    implementation does (``rprop.py:279``): the same as the pseudocode while ``lr`` lies within ``step_sizes``.
    """

    python = "Rprop"
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"lr": 1e-2, "etas": (0.5, 1.2), "step_sizes": (1e-6, 50.0)}

    def init_state(self, param: np.ndarray) -> State:
        return {"step": 0.0, "prev": np.zeros_like(param), "step_size": np.full_like(param, self.args["lr"])}

    def update(self, param: np.ndarray, grad: np.ndarray, state: State) -> None:
        (eta_minus, eta_plus), (size_min, size_max) = self.args["etas"], self.args["step_sizes"]
        state["step"] += 1
        product = grad * state["prev"]
        factor = np.where(product > 0, eta_plus, np.where(product < 0, eta_minus, 1.0))
        state["step_size"] = np.clip(state["step_size"] * factor, size_min, size_max)
        g = np.where(product < 0, 0.0, grad)
        param -= state["step_size"] * np.sign(g)
        state["prev"] = g


#: The float64 update of each PyTorch class the table names.
UPDATES: dict[str, type[Update]] = {cls.python: cls for cls in (Sgd, RmsProp, Adam, AdamW, Adagrad, Adadelta, Asgd, Rprop)}


def make_update(optimizer: str | Optimizer, spec_lr: float, overrides: Mapping[str, Any] | None = None) -> Update:
    """A fresh float64 update for the table row ``optimizer`` (a name in ``OPTIMIZERS`` or a row) with the spec's
    learning rate and ``overrides`` (the spec's ``optimizer_args`` for that row).

    Raises:
        ValueError: an unknown optimizer name, or a row whose PyTorch class has no float64 update here.
    """
    row = optimizer if isinstance(optimizer, Optimizer) else OPTIMIZERS.get(optimizer)
    if row is None:
        raise ValueError(f"unknown optimizer {optimizer!r}: one of {', '.join(OPTIMIZERS)}")
    if row.python not in UPDATES:
        raise ValueError(f"optimizer {row.name}: no float64 update for torch.optim.{row.python} (one of {', '.join(UPDATES)})")
    return UPDATES[row.python](row.resolved_args(spec_lr, overrides))
