"""A float64 reference's gradients by torch's autograd, in a process of its own: the parent never imports torch
(tests/integration/test_layers.py), so a model whose backward is too long to write out by hand (attention, layer norm,
cross-entropy) has its forward written here, by formula, in float64, and its backward from autograd.

Why autograd and not a hand-written backward: the reference judges a cell on its own (is training near float64?); its
worth is in being float64 and written apart from the model's forwards, not in its backward being hand-made. The forward
here uses torch's tensor algebra only (matmul, softmax, gathers), never the ``torch.nn`` modules the frontends compare,
so a module's bug is not copied into its judge. The backward of that algebra in float64 is autograd's, well tested.

Run as ``python -m harness.worker_side.float64_autograd``: it reads pickled requests on stdin and writes pickled replies
on stdout until stdin closes. A request is ``(model, kind, params, x, target, extra)`` with NumPy float64 arrays;
``kind`` is ``gradients`` (extra: ``unused``, ``every``, ``second``) or ``penalized`` (extra: ``weight``).
"""

from __future__ import annotations

import functools
import math
import pickle
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np
import torch

from harness.contract.models import CONVNET, LABEL_SMOOTHING_PERCENT, TRANSFORMER

__all__ = ["main"]

Tensors = dict[str, torch.Tensor]


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Layer norm over the last dimension, by its formula (the biased variance, as ``LayerNorm`` uses)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _cross_entropy(logits: torch.Tensor, probs: torch.Tensor, smoothing: float = 0.0) -> torch.Tensor:
    """The mean over the batch of ``-sum(p * log_softmax(logits))`` (a class index is the one-hot ``p``); with label
    smoothing ``s``, of ``p (1 - s) + s / classes`` (``CrossEntropyLoss``'s documented definition, for both target forms)."""
    log_p = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    probs = probs * (1 - smoothing) + smoothing / logits.shape[-1]
    return -(probs * log_p).sum(dim=-1).mean()


def transformer(p: Tensors, x: torch.Tensor, target: torch.Tensor, unused: int,
                smoothing: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The transformer classifier (harness/contract/models.py, ``transformer``; ``transformer_smoothing`` with its label
    ``smoothing``): its logits and its loss. Post-norm encoder layer, ReLU feed-forward, the key-padding mask as ``-inf``
    before the softmax, masked mean pooling."""
    tokens = x.long()
    padding = tokens == 0
    embed = p["embed.weight"]
    h = torch.where(padding.unsqueeze(-1), embed.detach()[tokens], embed[tokens])  # padding_idx: no gradient to row 0
    h = h + p["position.weight"][: tokens.shape[1]]
    if unused != 1:
        e = "encoder."
        batch, seq, width = h.shape
        heads = TRANSFORMER["HEADS"]
        qkv = h @ p[e + "self_attn.in_proj_weight"].T + p[e + "self_attn.in_proj_bias"]
        q, k, v = (t.reshape(batch, seq, heads, width // heads).transpose(1, 2) for t in torch.split(qkv, width, dim=-1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(width // heads)
        scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
        attn = torch.softmax(scores, dim=-1) @ v
        attn = attn.transpose(1, 2).reshape(batch, seq, width)
        attn = attn @ p[e + "self_attn.out_proj.weight"].T + p[e + "self_attn.out_proj.bias"]
        h = _layer_norm(h + attn, p[e + "norm1.weight"], p[e + "norm1.bias"])
        ff = torch.relu(h @ p[e + "linear1.weight"].T + p[e + "linear1.bias"]) @ p[e + "linear2.weight"].T + p[e + "linear2.bias"]
        h = _layer_norm(h + ff, p[e + "norm2.weight"], p[e + "norm2.bias"])
    keep = (~padding).unsqueeze(-1).to(h.dtype)
    pooled = (h * keep).sum(dim=1) / keep.sum(dim=1)
    logits = pooled @ p["head.weight"].T + p["head.bias"]
    classes = torch.nn.functional.one_hot(target[:, 0].long(), logits.shape[-1]).to(logits.dtype)
    return logits, _cross_entropy(logits, classes, smoothing) + _cross_entropy(logits, target[:, 1:], smoothing)


def _norm(x: torch.Tensor, dims: tuple[int, ...], eps: float = 1e-5) -> torch.Tensor:
    """``x`` normalised over ``dims`` by its mean and biased variance (batch norm's training statistics, group norm's)."""
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def convnet(p: Tensors, x: torch.Tensor, target: torch.Tensor, unused: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The conv net (harness/contract/models.py, ``convnet``): its output and its MSE. The padding modes by ``F.pad``,
    the norms by formula (batch norm with the batch's statistics, as in training), the convolution, pools and bilinear
    resize by torch's functional kernels in float64 (a hand-written convolution would only be slower)."""
    functional = torch.nn.functional
    channel = (None, slice(None), None, None)
    h = functional.conv2d(functional.pad(x, (1, 1, 1, 1), mode="reflect"), p["conv1.weight"], p["conv1.bias"])
    h = _norm(h, (0, 2, 3)) * p["bn.weight"][channel] + p["bn.bias"][channel]
    h = functional.max_pool2d(torch.relu(h), 2)
    if unused != 1:
        h = functional.conv2d(functional.pad(h, (1, 1, 1, 1), mode="circular"), p["conv2.weight"], p["conv2.bias"])
        batch, width, rows, cols = h.shape
        groups = CONVNET["GROUPS"]
        h = _norm(h.reshape(batch, groups, width // groups, rows, cols), (2, 3, 4)).reshape(batch, width, rows, cols)
        h = torch.relu(h * p["norm.weight"][channel] + p["norm.bias"][channel])
    side = CONVNET["RESIZED"]
    h = functional.avg_pool2d(functional.interpolate(h, size=(side, side), mode="bilinear", align_corners=False), 2)
    out = h.flatten(1) @ p["head.weight"].T + p["head.bias"]
    return out, ((out - target) ** 2).mean()


def gru(p: Tensors, x: torch.Tensor, target: torch.Tensor, unused: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrent model (harness/contract/models.py, ``gru``): its output and its MSE. The GRU's gates by their
    formulas (reset, update, new; the reset gate scales the hidden state's term after its bias, as ``nn.GRU`` does),
    from a zero hidden state."""
    w_ih, w_hh, b_ih, b_hh = (p[f"gru.{k}_l0"] for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    h = torch.zeros(x.shape[0], w_hh.shape[1], dtype=x.dtype)
    for t in range(x.shape[1]):
        xr, xz, xn = torch.chunk(x[:, t] @ w_ih.T + b_ih, 3, dim=-1)
        hr, hz, hn = torch.chunk(h @ w_hh.T + b_hh, 3, dim=-1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        h = (1 - z) * torch.tanh(xn + r * hn) + z * h
    out = h @ p["head.weight"].T + p["head.bias"]
    return out, ((out - target) ** 2).mean()


#: Each model's float64 forward by name: ``(params, x, target, unused) -> (output, loss)``.
MODELS: dict[str, Callable[[Tensors, torch.Tensor, torch.Tensor, int], tuple[torch.Tensor, torch.Tensor]]] = {
    "transformer": transformer,
    "transformer_smoothing": functools.partial(transformer, smoothing=LABEL_SMOOTHING_PERCENT / 100),
    "convnet": convnet,
    "gru": gru,
}


def _answer(model: str, kind: str, arrays: dict[str, np.ndarray], x: np.ndarray, target: np.ndarray, extra: dict[str, Any]) -> Any:
    params = {name: torch.tensor(a, dtype=torch.float64, requires_grad=True) for name, a in arrays.items()}
    xt, tt = torch.tensor(x, dtype=torch.float64), torch.tensor(target, dtype=torch.float64)
    forward = MODELS[model]
    if kind == "gradients":
        out, loss = forward(params, xt, tt, extra["unused"])
        total = loss / extra["every"] + extra["second"] * (out * out).mean()
        reached = _reached(total, params)
        used = [n for n in params if n in reached]
        grads = torch.autograd.grad(total, [params[n] for n in used])
        named = dict(zip(used, grads, strict=True))
        return float(loss.detach()), {n: named[n].numpy() if n in named else None for n in params}
    out, loss = forward(params, xt, tt, -1)
    grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
    norm = torch.sqrt(torch.stack([(g * g).sum() for g in grads]).sum())
    penalized = torch.autograd.grad(loss + extra["weight"] * norm, list(params.values()))
    return {n: g.detach().numpy() for n, g in zip(params, penalized, strict=True)}


def _reached(total: torch.Tensor, params: Tensors) -> set[str]:
    """The parameters the loss depends on (a layer left out this step has none: its gradient is ``None``): one walk of
    the backward graph, each node once. A walk of every path grows with the paths, not the nodes: the GRU's hidden state
    feeds the next step by several paths, so at tiny its 111 nodes were 142,945 visits (the transformer's 115 were
    17,279), once per parameter, about a second per request."""
    found: set[int] = set()
    seen: set[Any] = set()
    stack = [total.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        variable = getattr(fn, "variable", None)
        if variable is not None:
            found.add(id(variable))
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return {n for n, t in params.items() if id(t) in found}


def main(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Answer requests until stdin closes; one thread, so the sums' order is the same every run."""
    torch.set_num_threads(1)
    while True:
        try:
            request = pickle.load(stdin)
        except EOFError:
            return
        pickle.dump(_answer(*request), stdout)
        stdout.flush()


if __name__ == "__main__":
    main(sys.stdin.buffer, sys.stdout.buffer)
