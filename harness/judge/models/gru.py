"""The recurrent model's float64 reference (harness/contract/models.py, ``gru``), beside its forwards
``py_scripts/models/gru.py`` and ``r_scripts/models/gru.R``.

Its forward is written by formula in float64 and its backward taken from torch's autograd, in a worker process of its own
(:mod:`harness.worker_side.float64_autograd` says why): a hand-written backward of a GRU through time
would be long and a maintenance risk of its own, and the parent process never imports torch.
"""

from __future__ import annotations

from harness.judge.models.autograd_client import model_reference, start

__all__ = ["gradients", "penalized", "start"]

gradients, penalized = model_reference("gru")
