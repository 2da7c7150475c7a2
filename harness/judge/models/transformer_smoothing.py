"""The float64 reference of the transformer classifier with label smoothing (harness/contract/models.py,
``transformer_smoothing``): the transformer's (:mod:`harness.judge.models.transformer`), its two cross-entropies given the
row's label smoothing, beside the forwards it shares, ``py_scripts/models/transformer.py`` and
``r_scripts/models/transformer.R``.
"""

from __future__ import annotations

from harness.judge.models.autograd_client import model_reference, start

__all__ = ["gradients", "penalized", "start"]

gradients, penalized = model_reference("transformer_smoothing")
