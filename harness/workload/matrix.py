"""The matrix's cells: frontend × script × mode × optimizer × loop feature on one device, with the ids tests and reports use.

The loop feature (harness/workload/features.py) is an axis of its own, but not a product: each feature runs where its
covering design says. A cell of the plain loop (feature ``none``) keeps the id it always had, and so does a cell of the
default model (harness/contract/models.py); another model's cells carry its name (``adam@toy``). The model is an axis too:
in a matrix of several, each model beside the MLP runs its own covering design (harness/workload/model_designs.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract.models import DEFAULT_MODEL
from harness.contract.modes import SCRIPTS, Mode
from harness.workload.features import FEATURES, NO_FEATURE
from harness.workload.model_designs import design_applies

__all__ = ["Cell", "cells_for", "pair_id"]


@dataclass(frozen=True)
class Cell:
    """One frontend running one mode of one script with one optimizer and one loop feature on one device."""

    frontend: str
    script: str
    mode: str
    optimizer: str
    device: str
    feature: str = NO_FEATURE
    model: str = DEFAULT_MODEL

    @property
    def id(self) -> str:
        """``with_autocast-autocast-adam-r-cpu``; with a feature, ``with_autocast-autocast-adam+lr_step-r-cpu``; with a
        model other than the default, ``with_autocast-autocast-adam+lr_step@toy-r-cpu``."""
        return f"{self.script}-{self.mode}-{_with_feature(self.optimizer, self.feature, self.model)}-{self.frontend}-{self.device}"

    @property
    def pair(self) -> str:
        """The id shared by the frontends of this cell: ``with_autocast-autocast-adam-cpu``."""
        return pair_id(self.script, self.mode, self.optimizer, self.device, self.feature, self.model)

    @property
    def properties(self) -> Mode:
        """What the cell's mode does (:class:`harness.contract.modes.Mode`)."""
        return SCRIPTS[self.script].mode(self.mode)


def _with_feature(optimizer: str, feature: str, model: str) -> str:
    named = optimizer if feature == NO_FEATURE else f"{optimizer}+{feature}"
    return named if model == DEFAULT_MODEL else f"{named}@{model}"


def pair_id(script: str, mode: str, optimizer: str, device: str, feature: str = NO_FEATURE, model: str = DEFAULT_MODEL) -> str:
    """The id of the cells that differ only by frontend."""
    return f"{script}-{mode}-{_with_feature(optimizer, feature, model)}-{device}"


def cells_for(frontends: tuple[str, ...], modes: tuple[str, ...], optimizers: tuple[str, ...], device: str,
              features: tuple[str, ...] = (NO_FEATURE,), model: str | tuple[str, ...] = DEFAULT_MODEL) -> list[Cell]:
    """Cells in matrix order: model, feature, script, mode, optimizer, then frontend, so a pair's cells sit side by side.
    ``modes`` names modes; a name selects that mode in every script that declares it. A feature's cells are those of
    its covering design within ``modes`` and ``optimizers`` (the plain loop: all of them). ``model``: one model, whose
    whole matrix runs, or several: the MLP's whole matrix and each other model's covering design within the same axes
    (:func:`harness.workload.model_designs.design_applies`)."""
    models = (model,) if isinstance(model, str) else model
    designed = len(models) > 1
    return [
        Cell(frontend, script.stem, mode.name, optimizer, device, feature, name)
        for name in models
        for feature in features
        for script in SCRIPTS.values()
        for mode in script.modes
        if mode.name in modes
        for optimizer in optimizers
        if feature == NO_FEATURE or FEATURES[feature].applies(script.stem, mode.name, optimizer)
        if not designed or design_applies(name, script.stem, mode.name, optimizer, feature)
        for frontend in frontends
    ]
