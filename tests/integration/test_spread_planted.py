"""The spread target is judged by what it catches: noise planted in a copy of a real script's timed loop, in each language.

The noise floor is a bare training step the worker runs beside each round (harness/worker_side/calibration.py and its
R twin): the cell's kind of work, so that it feels the machine as the cell does, but none of a script's code, so that
what a script (or the harness, or the binding's R code) adds to a cell is never in its floor. A floor that ran the
script's own loop would excuse the noise planted here; these tests fail then. Each plant makes every other call of the
script's loop 0.3 s slower, inside the loop's clock (about three times the loop): a spread near 100 %, far beyond any floor
this VM has shown (about 10 % idle, docs/timing.md; 22 % beside the suite's other tests).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.files.paths import SCRIPTS_ENV
from harness.run.availability import Availability
from tests.planting import copy_scripts, plant
from tests.support import require_r_torch, run_cli

#: Where each language's loop starts its clock (run_epochs(), shared by every script), and the same place planted:
#: every other call sleeps 0.3 s inside the timed loop.
PLANTS: dict[str, tuple[str, str, str]] = {
    "python": (
        "py_scripts/loop.py",
        '        epoch_start = clock()\n        for _epoch in range(spec["epochs"]):\n',
        '        epoch_start = clock()\n        run_epochs.calls = getattr(run_epochs, "calls", 0) + 1  # planted\n'
        '        __import__("time").sleep(0.3 * (run_epochs.calls % 2))\n        for _epoch in range(spec["epochs"]):\n',
    ),
    "r": (
        "r_scripts/loop.R",
        "  epoch_start <- clock()\n  for (epoch in seq_len(spec$epochs)) {\n",
        "  epoch_start <- clock()\n"
        '  assign("planted_calls", get0("planted_calls", envir = globalenv(), ifnotfound = 0) + 1, envir = globalenv())\n'
        "  Sys.sleep(0.3 * (planted_calls %% 2))\n  for (epoch in seq_len(spec$epochs)) {\n",
    ),
}
#: The smallest run the target checks: ``bench`` (the preset it judges), its quickest mode, one epoch, six timed rounds
#: (a spread needs three; six hold three planted calls whichever call the first timed round is).
_RUN = ("run", "--preset", "bench", "--mode", "lowp_weights", "--optimizer", "sgd", "--epochs", "1", "--rounds", "6")


@pytest.mark.parametrize("frontend", list(PLANTS))
def test_noise_planted_in_a_scripts_loop_misses_the_spread_target(
    frontend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, availability: Availability
) -> None:
    """The planted cell misses its spread target, not as the machine's noise, while its floor, timed beside it in the
    same worker, stays quiet: the floor measures the machine, never the script."""
    if frontend == "r":
        require_r_torch(availability)
    relative, old, new = PLANTS[frontend]
    root = copy_scripts(tmp_path / "scripts")
    plant(root, relative, old, new)
    monkeypatch.setenv(SCRIPTS_ENV, str(root))  # the workers the run starts inherit it
    out = tmp_path / "result.json"
    done = run_cli(*_RUN, "--frontend", frontend, "--json", str(out))
    assert out.is_file(), done.stdout + done.stderr
    result = json.loads(out.read_text())
    (cell,) = result["cells"]
    (spread,) = [t for t in result["targets"] if t["name"] == "round-to-round spread"]
    assert spread["subject"] == cell["id"] and not spread["met"] and not spread.get("machine_noise"), spread
    # The floor, timed after each of those rounds, does not carry the plant: a floor that did would read about the cell's
    # spread, while the machine alone (even beside the suite's other tests) keeps it a fraction of it.
    loop, floor = cell["timing"]["loop"], cell["timing"]["floor"]
    assert loop["cv"] > 0.5 and floor["cv"] < loop["cv"] / 2, (loop, floor)
