"""The matrix's cells: frontend × script × mode × optimizer on one device, with the ids tests and reports use."""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract.modes import SCRIPTS, Mode

__all__ = ["Cell", "cells_for", "pair_id"]


@dataclass(frozen=True)
class Cell:
    """One frontend running one mode of one script with one optimizer on one device."""

    frontend: str
    script: str
    mode: str
    optimizer: str
    device: str

    @property
    def id(self) -> str:
        """``with_autocast-autocast-adam-r-cpu``."""
        return f"{self.script}-{self.mode}-{self.optimizer}-{self.frontend}-{self.device}"

    @property
    def pair(self) -> str:
        """The id shared by the frontends of this cell: ``with_autocast-autocast-adam-cpu``."""
        return pair_id(self.script, self.mode, self.optimizer, self.device)

    @property
    def properties(self) -> Mode:
        """What the cell's mode does (:class:`harness.contract.modes.Mode`)."""
        return SCRIPTS[self.script].mode(self.mode)


def pair_id(script: str, mode: str, optimizer: str, device: str) -> str:
    """The id of the cells that differ only by frontend."""
    return f"{script}-{mode}-{optimizer}-{device}"


def cells_for(frontends: tuple[str, ...], modes: tuple[str, ...], optimizers: tuple[str, ...], device: str) -> list[Cell]:
    """Cells in matrix order: script, mode, optimizer, then frontend, so a pair's cells sit side by side. ``modes``
    names modes; a name selects that mode in every script that declares it."""
    return [
        Cell(frontend, script.stem, mode.name, optimizer, device)
        for script in SCRIPTS.values()
        for mode in script.modes
        if mode.name in modes
        for optimizer in optimizers
        for frontend in frontends
    ]
