"""The matrix's cells and the frontend order that judging and every view use."""

from __future__ import annotations

from harness.run.frontends import FRONTENDS
from harness.workload.matrix import FRONTEND_ORDER, Cell, cells_for, pair_id


def test_the_frontend_order_is_the_registrys() -> None:
    """Judging orders pairs by FRONTEND_ORDER (data, no process code): it names exactly the registered frontends, python first."""
    assert FRONTEND_ORDER == tuple(FRONTENDS) == ("python", "r")


def test_cells_sit_beside_their_pair_and_ids_read_script_mode_frontend_device() -> None:
    """Matrix order is script, mode, then frontend, so a pair's two cells are neighbours; ids name all four parts."""
    cells = cells_for(FRONTEND_ORDER, ("default", "autocast_scaler"), "cpu")
    assert [c.id for c in cells] == [
        "with_autocast-default-python-cpu", "with_autocast-default-r-cpu",
        "cuda_amp_grad_scaler-autocast_scaler-python-cpu", "cuda_amp_grad_scaler-autocast_scaler-r-cpu",
    ]
    cuda = Cell("r", "with_autocast", "autocast", "cuda")
    assert cuda.pair == pair_id("with_autocast", "autocast", "cuda") == "with_autocast-autocast-cuda"
