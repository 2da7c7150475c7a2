"""The MLP's float64 reference (harness/contract/models.py, ``mlp``): its forward, its backward and, for the gradient
penalty, its Hessian-vector product, written out by hand in NumPy float64. Beside its forwards
``py_scripts/models/mlp.py`` and ``r_scripts/models/mlp.R``."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["gradients", "penalized", "weights_order"]

def gradients(params: dict[str, np.ndarray], x: np.ndarray, target: np.ndarray, unused: int, every: int,
              second: float) -> tuple[float, dict[str, np.ndarray | None]]:
    """The MSE loss of one batch and each parameter's gradient by name (``None`` for a layer ``unused`` this step, left
    out of the forward pass: loop feature ``sometimes_used``), of the loss divided by ``every`` (accumulation) plus
    ``second`` times the MSE of the output against zero (``multi_optimizer``'s second loss)."""
    weights, biases = _layers(params)
    loss, grad_w, grad_b = _gradients(weights, biases, x, target, unused, every, second)
    return loss, _named(grad_w, grad_b)


def penalized(params: dict[str, np.ndarray], x: np.ndarray, target: np.ndarray, grads: dict[str, np.ndarray | None],
              weight: float) -> dict[str, np.ndarray | None]:
    """The gradients of the MSE plus ``weight`` times the norm of its gradient (the AMP examples' gradient penalty)."""
    weights, biases = _layers(params)
    n = len(weights)
    grad_w, grad_b = _penalized(weights, biases, x, target, [grads[f"layer{k}.weight"] for k in range(n)],
                                [grads[f"layer{k}.bias"] for k in range(n)], weight)
    return _named(grad_w, grad_b)


def weights_order(names: list[str]) -> list[str]:
    """The order the reference has always reported the final weights in (every weight, then every bias): the distance
    from float64 sums over them in it, so its last bits stay what they were."""
    return [n for n in names if n.endswith(".weight")] + [n for n in names if not n.endswith(".weight")]


def _layers(params: dict[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each Linear layer's weight and bias, in order (the arrays themselves: an update changes them in place)."""
    n = len(params) // 2
    return [params[f"layer{k}.weight"] for k in range(n)], [params[f"layer{k}.bias"] for k in range(n)]


def _named(grad_w: list[np.ndarray | None], grad_b: list[np.ndarray | None]) -> dict[str, np.ndarray | None]:
    """The gradients by parameter name, in the optimizer's order (``layer0.weight``, ``layer0.bias``, ...)."""
    return {name: grad for k in range(len(grad_w)) for name, grad in ((f"layer{k}.weight", grad_w[k]), (f"layer{k}.bias", grad_b[k]))}


def _gradients(weights: list[np.ndarray], biases: list[np.ndarray], x: np.ndarray, target: np.ndarray, unused: int,
               every: int, second: float) -> tuple[float, list[np.ndarray | None], list[np.ndarray | None]]:
    """The MSE loss of one batch and each layer's weight and bias gradients (``None`` for a layer ``unused`` this step,
    left out of the forward pass: loop feature ``sometimes_used``), of the loss divided by ``every`` (accumulation) plus
    ``second`` times the MSE of the output against zero (``multi_optimizer``'s second loss)."""
    n = len(weights)
    active = [k for k in range(n) if k != unused]
    inputs: dict[int, np.ndarray] = {}  # the input of each active Linear layer
    pre: dict[int, np.ndarray] = {}  # its output before ReLU
    h = x
    for k in active:
        inputs[k] = h
        pre[k] = h @ weights[k].T + biases[k]
        h = np.maximum(pre[k], 0.0) if k < n - 1 else pre[k]
    out = pre[active[-1]]
    diff = out - target
    loss = float(np.mean(diff * diff))
    grad = 2.0 * (diff / every + second * out) / diff.size  # d(MSE / every + second * mean(out^2))/d(output)
    grad_w: list[np.ndarray | None] = [None] * n
    grad_b: list[np.ndarray | None] = [None] * n
    for j in reversed(range(len(active))):
        k = active[j]
        grad_w[k] = grad.T @ inputs[k]
        grad_b[k] = grad.sum(axis=0)
        if j > 0:
            grad = (grad @ weights[k]) * (pre[active[j - 1]] > 0)
    return loss, grad_w, grad_b


def _penalized(weights: list[np.ndarray], biases: list[np.ndarray], x: np.ndarray, target: np.ndarray,
               grad_w: list[np.ndarray | None], grad_b: list[np.ndarray | None],
               weight: float) -> tuple[list[np.ndarray | None], list[np.ndarray | None]]:
    """The gradients of the MSE plus ``weight`` times the norm of its gradient (the AMP examples' gradient penalty):
    ``g + weight * H g / |g|``, the Hessian-vector product exact (:func:`_hessian_vector`)."""
    assert all(g is not None for g in (*grad_w, *grad_b))  # the penalty runs with every layer used
    gw = [g for g in grad_w if g is not None]
    gb = [g for g in grad_b if g is not None]
    norm = math.sqrt(sum(float(np.sum(g * g)) for g in (*gw, *gb)))
    hw, hb = _hessian_vector(weights, biases, x, target, gw, gb)
    return ([g + weight * h / norm for g, h in zip(gw, hw, strict=True)],
            [g + weight * h / norm for g, h in zip(gb, hb, strict=True)])


def _hessian_vector(weights: list[np.ndarray], biases: list[np.ndarray], x: np.ndarray, target: np.ndarray,
                    vw: list[np.ndarray], vb: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The MSE's Hessian times the direction (``vw``, ``vb``), exactly: the forward and backward passes of
    :func:`_gradients` differentiated along the direction (each ReLU's mask held, as autograd's double backward does)."""
    n = len(weights)
    h, dh = x, np.zeros_like(x)
    inputs, tangents, masks = [], [], []
    for k in range(n):
        inputs.append(h)
        tangents.append(dh)
        z = h @ weights[k].T + biases[k]
        dz = dh @ weights[k].T + h @ vw[k].T + vb[k]
        if k < n - 1:
            masks.append(z > 0)
            h, dh = np.maximum(z, 0.0), dz * masks[k]
    diff = z - target
    grad, dgrad = 2.0 * diff / diff.size, 2.0 * dz / diff.size
    hw: list[np.ndarray] = [np.empty(0)] * n
    hb: list[np.ndarray] = [np.empty(0)] * n
    for k in reversed(range(n)):
        hw[k] = dgrad.T @ inputs[k] + grad.T @ tangents[k]
        hb[k] = dgrad.sum(axis=0)
        if k > 0:
            grad, dgrad = (grad @ weights[k]) * masks[k - 1], (dgrad @ weights[k] + grad @ vw[k]) * masks[k - 1]
    return hw, hb
