"""The matrix's cells, and the default frontends' order (a run's own order is its ``--frontend``'s)."""

from __future__ import annotations

from harness.contract.modes import SCRIPTS, all_mode_names
from harness.run.frontends import FRONTENDS
from harness.workload.installations import DEFAULT_INSTALLATIONS
from harness.workload.matrix import Cell, cells_for, pair_id

FRONTEND_ORDER = tuple(DEFAULT_INSTALLATIONS)


def test_the_default_frontends_are_the_registrys_python_first() -> None:
    """Without --frontend a run is python then r (python the baseline): the defaults name exactly the registered frontends."""
    assert FRONTEND_ORDER == tuple(FRONTENDS) == ("python", "r")


def test_cells_sit_beside_their_pair_and_ids_read_script_mode_optimizer_frontend_device() -> None:
    """Matrix order is script, mode, optimizer, then frontend, so a pair's cells are neighbours; ids name all five parts."""
    cells = cells_for(FRONTEND_ORDER, ("autocast_scaler",), ("sgd", "adam"), "cpu")
    assert [c.id for c in cells] == [
        "cuda_amp_grad_scaler-autocast_scaler-sgd-python-cpu", "cuda_amp_grad_scaler-autocast_scaler-sgd-r-cpu",
        "cuda_amp_grad_scaler-autocast_scaler-adam-python-cpu", "cuda_amp_grad_scaler-autocast_scaler-adam-r-cpu",
    ]
    cuda = Cell("r", "with_autocast", "autocast", "adam", "cuda")
    assert cuda.id == "with_autocast-autocast-adam-r-cuda"
    assert cuda.pair == pair_id("with_autocast", "autocast", "adam", "cuda") == "with_autocast-autocast-adam-cuda"


def test_a_mode_name_selects_it_in_every_script_that_declares_it() -> None:
    """``default`` is declared by both scripts, so it selects both scripts' default cells; ``lowp_weights`` only with_autocast's."""
    cells = cells_for(("python",), ("default", "lowp_weights"), ("sgd",), "cpu")
    assert [(c.script, c.mode) for c in cells] == [
        ("with_autocast", "default"), ("with_autocast", "lowp_weights"), ("cuda_amp_grad_scaler", "default"),
    ]
    assert cells[0].properties != cells[2].properties  # two modes of one name: each script's own
    assert (cells[2].properties.scaler, cells[2].properties.autocast) == ("disabled", False)


def test_every_mode_with_every_optimizer_is_the_whole_matrix() -> None:
    """All modes × two optimizers × two frontends: each script's modes once per optimizer, no cell twice."""
    cells = cells_for(FRONTEND_ORDER, all_mode_names(), ("sgd", "rprop"), "cpu")
    modes = sum(len(pair.modes) for pair in SCRIPTS.values())
    assert modes == 7 and len(cells) == modes * 2 * 2 == len({c.id for c in cells})
    pairs = {pair_id(p.stem, m.name, o, "cpu") for p in SCRIPTS.values() for m in p.modes for o in ("sgd", "rprop")}
    assert {c.pair for c in cells} == pairs
