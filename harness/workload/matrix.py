"""The matrix's cells: frontend × script × mode on one device, with the ids tests and reports use."""

from __future__ import annotations

from dataclasses import dataclass

from harness.workload.spec import SCRIPTS

__all__ = ["Cell", "cells_for", "pair_id"]


@dataclass(frozen=True)
class Cell:
    """One frontend running one mode of one script on one device."""

    frontend: str
    script: str
    mode: str
    device: str

    @property
    def id(self) -> str:
        """``with_autocast-autocast-r-cpu``."""
        return f"{self.script}-{self.mode}-{self.frontend}-{self.device}"

    @property
    def pair(self) -> str:
        """The id shared by the frontends of this cell: ``with_autocast-autocast-cpu``."""
        return pair_id(self.script, self.mode, self.device)


def pair_id(script: str, mode: str, device: str) -> str:
    """The id of the cells that differ only by frontend."""
    return f"{script}-{mode}-{device}"


def cells_for(frontends: tuple[str, ...], modes: tuple[str, ...], device: str) -> list[Cell]:
    """Cells in matrix order: script, mode, then frontend, so a pair's cells sit side by side."""
    return [
        Cell(frontend, script, mode, device)
        for script, script_modes in SCRIPTS.items()
        for mode in script_modes
        if mode in modes
        for frontend in frontends
    ]
