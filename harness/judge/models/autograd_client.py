"""The parent's side of :mod:`harness.worker_side.float64_autograd`: one worker process, started on the first request
and ended with the parent, answering a model reference's ``gradients`` and ``penalized``."""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["model_reference"]

Gradients = dict[str, np.ndarray | None]
_worker: dict[str, subprocess.Popen[bytes]] = {}


def _ask(request: tuple[Any, ...]) -> Any:
    """Send one request to the worker (started if it is not running) and read its answer."""
    proc = _worker.get("proc")
    if proc is None or proc.poll() is not None:
        root = str(Path(__file__).resolve().parents[3])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        proc = subprocess.Popen([sys.executable, "-m", "harness.worker_side.float64_autograd"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)
        _worker["proc"] = proc
        atexit.register(_stop, proc)
    assert proc.stdin is not None and proc.stdout is not None
    pickle.dump(request, proc.stdin)
    proc.stdin.flush()
    return pickle.load(proc.stdout)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    proc.wait(timeout=30)


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
