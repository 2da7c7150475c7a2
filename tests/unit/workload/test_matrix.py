"""The matrix's cells, and the default frontends' order (a run's own order is its ``--frontend``'s)."""

from __future__ import annotations

from harness.run.frontends import FRONTENDS
from harness.workload.installations import DEFAULT_INSTALLATIONS
from harness.workload.matrix import Cell, cells_for, pair_id

FRONTEND_ORDER = tuple(DEFAULT_INSTALLATIONS)


def test_the_default_frontends_are_the_registrys_python_first() -> None:
    """Without --frontend a run is python then r (python the baseline): the defaults name exactly the registered frontends."""
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
