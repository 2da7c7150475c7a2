"""The parent's side of :mod:`harness.worker_side.float64_autograd`: one worker process, started on the first request
(or ahead, by :func:`start`) and ended with the parent, answering a model reference's ``gradients`` and ``penalized``.

Answers are remembered by their request's bytes (:data:`MEMO_ENTRIES`): the references of one run start from the same
fixture weights and part only where their optimizer, clip or skipped steps first change a weight (every reference's
first step is the same request; a replay of skipped steps is its plain run's up to the first skip), so a request seen
before is answered from memory. The worker is deterministic (one thread, the same float64 operations), so a remembered
answer is bitwise the one it would send again.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MEMO_ENTRIES", "model_reference", "start", "stop"]

Gradients = dict[str, np.ndarray | None]
_worker: dict[str, subprocess.Popen[bytes]] = {}
#: How many answers are remembered, the oldest forgotten first: a tiny reference's 20 steps times the few dozen
#: trajectories (optimizer, clip, skipped steps, feature) a model's cells ask for, each answer a few kB at tiny's sizes.
MEMO_ENTRIES = 4096
_memo: collections.OrderedDict[bytes, Any] = collections.OrderedDict()


def start() -> subprocess.Popen[bytes]:
    """The worker, started if it is not running (its import of torch takes seconds: a caller that knows a model reference
    is coming may start it ahead, so the import overlaps other work)."""
    proc = _worker.get("proc")
    if proc is None or proc.poll() is not None:
        root = str(Path(__file__).resolve().parents[3])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        proc = subprocess.Popen([sys.executable, "-m", "harness.worker_side.float64_autograd"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)
        _worker["proc"] = proc
        atexit.register(_stop, proc)
    return proc


def stop() -> None:
    """End the worker if it runs (the next request starts another)."""
    proc = _worker.pop("proc", None)
    if proc is not None:
        _stop(proc)


def _ask(request: tuple[Any, ...]) -> Any:
    """Send one request to the worker and read its answer, or answer it from memory (a copy: the caller may change it)."""
    payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    key = hashlib.blake2b(payload, digest_size=20).digest()
    if key not in _memo:
        proc = start()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(payload)
        proc.stdin.flush()
        _memo[key] = pickle.load(proc.stdout)
        if len(_memo) > MEMO_ENTRIES:
            _memo.popitem(last=False)
    _memo.move_to_end(key)
    return _copied(_memo[key])


def _copied(answer: Any) -> Any:
    """``answer`` with every array copied (a loss, a dict of arrays and ``None``, or a pair of them)."""
    if isinstance(answer, tuple):
        return tuple(_copied(a) for a in answer)
    if isinstance(answer, dict):
        return {k: None if v is None else np.array(v, copy=True) for k, v in answer.items()}
    return answer


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Close both of the worker's pipes (the end of its stdin is its signal to exit; no request is pending) and wait for it:
    a pipe left open is found by the interpreter at exit, and printed as a ``ResourceWarning``."""
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def model_reference(model: str) -> tuple[Callable[..., tuple[float, Gradients]], Callable[..., Gradients]]:
    """The ``gradients`` and ``penalized`` of ``model``'s float64 reference (harness/judge/models/__init__.py's
    interface), each answered by the worker."""

    def gradients(params: dict[str, np.ndarray], x: np.ndarray, target: np.ndarray, unused: int, every: int,
                  second: float) -> tuple[float, Gradients]:
        """The loss of one batch and each parameter's gradient by name (``None`` for a layer left out this step), of the
        loss divided by ``every`` plus ``second`` times the mean square of the output."""
        loss, grads = _ask((model, "gradients", params, x, target, {"unused": unused, "every": every, "second": second}))
        return float(loss), grads

    def penalized(params: dict[str, np.ndarray], x: np.ndarray, target: np.ndarray, grads: Gradients,
                  weight: float) -> Gradients:
        """The gradients of the loss plus ``weight`` times the norm of its gradient."""
        answer: Gradients = _ask((model, "penalized", params, x, target, {"weight": weight}))
        return answer

    return gradients, penalized
