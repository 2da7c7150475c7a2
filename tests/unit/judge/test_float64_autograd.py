"""The float64 autograd worker (harness/worker_side/float64_autograd.py): one graph walk per request."""

from __future__ import annotations

from typing import Any

from harness.worker_side.float64_autograd import _reached


class _Node:
    """A backward-graph node as ``_reached`` reads one (``next_functions``, ``variable``), which fails when it is walked
    a second time."""

    def __init__(self, nexts: tuple[Any, ...], variable: object | None = None) -> None:
        self._nexts, self.variable, self.reads = nexts, variable, 0

    @property
    def next_functions(self) -> tuple[tuple[Any, int], ...]:
        self.reads += 1
        assert self.reads == 1, "a node walked twice: the walk follows paths, not nodes"
        return tuple((n, 0) for n in self._nexts)


class _Loss:
    def __init__(self, grad_fn: _Node) -> None:
        self.grad_fn = grad_fn


def test_the_worker_finds_the_parameters_a_loss_reaches_by_one_walk() -> None:
    """``_reached`` walks each node of the backward graph once. It followed every path: a GRU's hidden state feeds the
    next step by several paths, so its 5 steps cost 1.2 s per request (8 minutes for 21 cells' references; on the CUDA
    machine the run looked hung). Here a graph whose paths double at each of 64 levels: each node is read once, and a
    parameter the loss does not reach is not found."""
    used, unused = object(), object()
    node = _Node((None,), variable=used)
    for _ in range(64):
        node = _Node((node, node))  # the next level reaches this one by two paths
    assert _reached(_Loss(node), {"used": used, "unused": unused}) == {"used"}  # type: ignore[arg-type,dict-item]
