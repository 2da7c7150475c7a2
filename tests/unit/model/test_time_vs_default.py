"""×default: a cell's loop time over its own script's default cell's, with the same optimizer, frontend and device."""

from __future__ import annotations

import dataclasses

import pytest

from harness.model.result import CellResult, Status, with_time_vs_default
from harness.workload.matrix import Cell
from tests.twins import steady_timing


def _cell(script: str, mode: str, optimizer: str, frontend: str, loop_seconds: float, status: Status = Status.OK) -> CellResult:
    return CellResult(Cell(frontend, script, mode, optimizer, "cpu"), status, timing=steady_timing(loop_seconds))


def test_each_cell_is_divided_by_its_own_scripts_default_with_its_optimizer_and_frontend() -> None:
    """Both scripts declare a ``default``: the scaler script's cells divide by the scaler script's default (not
    with_autocast's), an Adam cell by the Adam default, an R cell by R's; each default is 1 against itself."""
    cells = [
        _cell("with_autocast", "default", "sgd", "python", 1.0),
        _cell("with_autocast", "autocast", "sgd", "python", 2.0),
        _cell("with_autocast", "default", "sgd", "r", 1.5),
        _cell("with_autocast", "autocast", "sgd", "r", 3.0),
        _cell("with_autocast", "default", "adam", "python", 10.0),
        _cell("with_autocast", "lowp_weights", "adam", "python", 5.0),
        _cell("cuda_amp_grad_scaler", "default", "sgd", "python", 4.0),
        _cell("cuda_amp_grad_scaler", "autocast_scaler", "sgd", "python", 6.0),
    ]
    ratios = {c.id: c.time_vs_default for c in with_time_vs_default(cells)}
    assert ratios == {
        "with_autocast-default-sgd-python-cpu": pytest.approx(1.0), "with_autocast-autocast-sgd-python-cpu": pytest.approx(2.0),
        "with_autocast-default-sgd-r-cpu": pytest.approx(1.0), "with_autocast-autocast-sgd-r-cpu": pytest.approx(2.0),
        "with_autocast-default-adam-python-cpu": pytest.approx(1.0), "with_autocast-lowp_weights-adam-python-cpu": pytest.approx(0.5),
        "cuda_amp_grad_scaler-default-sgd-python-cpu": pytest.approx(1.0),
        "cuda_amp_grad_scaler-autocast_scaler-sgd-python-cpu": pytest.approx(1.5),  # 6 / 4, not 6 / 1: its own script's default
    }


def test_a_cell_without_its_own_default_has_no_ratio_and_says_which_is_missing() -> None:
    """A scaler cell whose script's default did not run (or failed) gets no ratio, though with_autocast's default ran: the note
    names the script and optimizer whose default is missing; a cell that did not run says its status."""
    cells = [
        _cell("with_autocast", "default", "sgd", "python", 1.0),
        _cell("cuda_amp_grad_scaler", "default", "rprop", "python", 1.0, Status.ERROR),
        _cell("cuda_amp_grad_scaler", "autocast_scaler_clip", "rprop", "python", 2.0),
        _cell("with_autocast", "autocast", "rprop", "python", 2.0),
        _cell("cuda_amp_grad_scaler", "autocast_scaler", "sgd", "r", 2.0, Status.UNSUPPORTED),
    ]
    out = {c.id: (c.time_vs_default, c.time_vs_default_note) for c in with_time_vs_default(cells)}
    assert out["cuda_amp_grad_scaler-autocast_scaler_clip-rprop-python-cpu"] == (
        None, "no default cell of cuda_amp_grad_scaler with rprop to compare with")
    assert out["with_autocast-autocast-rprop-python-cpu"] == (None, "no default cell of with_autocast with rprop to compare with")
    assert out["cuda_amp_grad_scaler-default-rprop-python-cpu"] == (None, "cell error")
    assert out["cuda_amp_grad_scaler-autocast_scaler-sgd-r-cpu"] == (None, "cell unsupported")
    assert out["with_autocast-default-sgd-python-cpu"][0] == pytest.approx(1.0)



def test_a_run_timed_side_by_side_says_so_rather_than_noisy() -> None:
    """``tiny``'s one round per cell carries no ratio by design: the note says so, and no view reads it as noise; a run
    whose rounds were cut by ``--max-seconds`` still says its rounds were too few."""
    from harness.model.result import SIDE_BY_SIDE_NOTE
    from harness.model.timing import RoundLog, for_want_of_spread

    def one_round(mode: str, seconds: float) -> CellResult:
        log = RoundLog()
        log.add(seconds + 0.001, {"seconds_total": seconds, "seconds_workload": seconds, "gc_seconds": 0.0}, None, True)
        return CellResult(Cell("python", "with_autocast", mode, "sgd", "cpu"), Status.OK, timing=log.summary())

    cells = [one_round("default", 0.1), one_round("autocast", 0.2)]
    labelled = [c.time_vs_default_note for c in with_time_vs_default(cells, side_by_side=True)]
    assert labelled == [SIDE_BY_SIDE_NOTE] * 2 and not for_want_of_spread(SIDE_BY_SIDE_NOTE)
    cut = [c.time_vs_default_note for c in with_time_vs_default(cells)]
    assert cut == ["too few timed rounds (1 < 3) to know the spread"] * 2
    # issue 47: side by side, a cell (or its default) whose own time came from its untraced reconciled run has no round
    untimed = [dataclasses.replace(cells[0], timing=None, untraced_seconds=0.1), cells[1]]
    labelled = [c.time_vs_default_note for c in with_time_vs_default(untimed, side_by_side=True)]
    assert labelled == [SIDE_BY_SIDE_NOTE] * 2
