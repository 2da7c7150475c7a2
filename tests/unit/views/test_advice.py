"""The terminal's advice never names what the run already used (issue 48, defect 8's class): the line for cells whose
spread denied a ratio offers --interleave, more --rounds and --preset bench only where they would change something."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from harness.views.table import print_result
from tests.twins import golden

_NOTE = "spread too wide: CV 9.0%, 1.0% (> 5%); try more --rounds"


@pytest.mark.parametrize(("interleave", "preset"), [(False, "tiny"), (True, "tiny"), (False, "bench"), (True, "bench")])
def test_the_noisy_line_offers_only_what_the_run_did_not_use(interleave: bool, preset: str) -> None:
    base = golden()
    cells = tuple(dataclasses.replace(c, time_vs_default=None, time_vs_default_note=_NOTE) if c.ok else c for c in base.cells)
    result = dataclasses.replace(base, cells=cells, protocol=dataclasses.replace(base.protocol, interleave=interleave),
                                 spec=base.spec.replace(preset=preset))
    console = Console(file=io.StringIO(), record=True, width=400)
    print_result(result, console)
    line = next(line for line in console.export_text().splitlines() if line.startswith("×default noisy"))
    assert ("--interleave" in line) is not interleave and ("--preset bench" in line) is (preset != "bench"), line
    assert "more --rounds" in line
