"""The matrix's cells, and the default frontends' order (a run's own order is its ``--frontend``'s)."""

from __future__ import annotations

import pytest

from harness.contract.models import DEFAULT_MODEL, MODELS
from harness.contract.modes import SCRIPTS, all_mode_names
from harness.errors import UsageError
from harness.run.frontends import FRONTENDS
from harness.workload.features import FEATURES, NO_FEATURE, PRESET_FEATURES
from harness.workload.installations import DEFAULT_INSTALLATIONS
from harness.workload.matrix import Cell, cells_for, pair_id
from harness.workload.model_designs import FAMILY_ROTATION, MODEL_FEATURES, design_cells, parse_models
from harness.workload.optimizers import FAMILIES, OPTIMIZERS

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


def test_the_mlps_cells_keep_their_ids_in_a_matrix_of_every_model() -> None:
    """The model axis adds cells after the MLP's: the MLP's ids and order are those of a run of the MLP alone, and each
    other model's cells name it (``adam@transformer``)."""
    mlp_alone = cells_for(FRONTEND_ORDER, all_mode_names(), tuple(OPTIMIZERS), "cpu", PRESET_FEATURES["tiny"])
    every = cells_for(FRONTEND_ORDER, all_mode_names(), tuple(OPTIMIZERS), "cpu", PRESET_FEATURES["tiny"], tuple(MODELS))
    assert [c.id for c in every[: len(mlp_alone)]] == [c.id for c in mlp_alone]
    assert len(mlp_alone) == 680 and mlp_alone[0].id == "with_autocast-default-sgd-python-cpu"
    beside = every[len(mlp_alone):]
    assert {c.model for c in beside} == set(MODELS) - {DEFAULT_MODEL}
    assert all(c.id.split("-")[2].endswith(f"@{c.model}") for c in beside)
    assert len(beside) == len({c.id for c in beside}) == 2 * sum(len(design_cells(m)) for m in MODELS if m != DEFAULT_MODEL)


def test_each_model_beside_the_mlp_covers_every_mode_with_each_optimizer_family() -> None:
    """The covering design: each model × optimizer family × (script, mode) has a pair, each kind of optimizer state of the
    design meets each model, and each loop feature placed for a model lies inside that feature's own covering design."""
    every = cells_for(("python",), all_mode_names(), tuple(OPTIMIZERS), "cpu", PRESET_FEATURES["tiny"], tuple(MODELS))
    modes = {(s.stem, m.name) for s in SCRIPTS.values() for m in s.modes}
    for model in (m for m in MODELS if m != DEFAULT_MODEL):
        plain = [c for c in every if c.model == model and c.feature == NO_FEATURE]
        for family in FAMILIES:
            assert {(c.script, c.mode) for c in plain if OPTIMIZERS[c.optimizer].family == family} == modes, (model, family)
        assert {c.optimizer for c in plain} == {o for rows in FAMILY_ROTATION.values() for o in rows}
        placed = [c for c in every if c.model == model and c.feature != NO_FEATURE]
        assert placed and all(FEATURES[c.feature].applies(c.script, c.mode, c.optimizer) for c in placed)
        assert {c.feature for c in placed} == {p.feature for p in MODEL_FEATURES[model]}


def test_a_model_alone_runs_its_whole_matrix() -> None:
    """``--model transformer`` alone: the transformer's every cell, as the MLP's (its ids carry the model)."""
    alone = cells_for(FRONTEND_ORDER, all_mode_names(), ("sgd", "rprop"), "cpu", model="transformer")
    assert len(alone) == 7 * 2 * 2 and all(c.id.split("-")[2].endswith("@transformer") for c in alone)
    several = cells_for(FRONTEND_ORDER, all_mode_names(), ("sgd", "rprop"), "cpu", model=("transformer", "gru"))
    assert {c.optimizer for c in several} == {"sgd"}  # beside another model, its design: rprop is not in it


def test_the_models_of_a_run_from_the_flags() -> None:
    """``--model`` takes several, comma-separated, or ``all``; without it, tiny's are every model but a variant of another
    (``transformer_smoothing``: ``--model`` names it), a narrowed run's (or a spec file's other model's) that model alone;
    an unknown name is one usage line."""
    assert parse_models(None, "tiny") == ("mlp", "transformer", "convnet", "gru") and parse_models(None, "bench") == (DEFAULT_MODEL,)
    assert parse_models(None, "tiny", narrowed=True) == (DEFAULT_MODEL,)
    assert parse_models(None, "tiny", spec_model="gru") == ("gru",)
    assert parse_models(["gru,mlp"], "tiny") == ("mlp", "gru") and parse_models(["all"], "bench") == tuple(MODELS)
    with pytest.raises(UsageError, match="model"):
        parse_models(["resnet"], "tiny")
