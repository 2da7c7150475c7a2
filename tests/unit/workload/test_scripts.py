"""The script pairs and their modes as data: each script declares its modes, and a mode is a set of properties."""

from __future__ import annotations

import pytest

from harness.contract.modes import SCRIPTS, Mode, all_mode_names, mode_of
from harness.errors import SpecError


def test_each_script_declares_its_own_modes_with_a_default_baseline() -> None:
    """Each script pair names its modes once each, its ``default`` first (each divides ×default by its own), and the
    matrix's mode names are every pair's in table order, each once; only the scaler pair's modes use a GradScaler."""
    for pair in SCRIPTS.values():
        assert len(set(pair.mode_names)) == len(pair.mode_names) and pair.mode_names[0] == pair.baseline == "default"
    assert all_mode_names() == tuple(dict.fromkeys(m for pair in SCRIPTS.values() for m in pair.mode_names))
    scaling = {stem for stem, pair in SCRIPTS.items() if any(m.scaler in ("disabled", "dynamic") for m in pair.modes)}
    assert scaling == {"cuda_amp_grad_scaler"}


@pytest.mark.parametrize(
    ("script", "mode", "properties"),
    [
        ("with_autocast", "default", {"autocast": False, "weights": "float32", "scaler": "none", "clip": False}),
        ("with_autocast", "autocast", {"autocast": True, "weights": "float32", "scaler": "none", "clip": False}),
        ("with_autocast", "lowp_weights", {"autocast": False, "weights": "amp", "scaler": "none", "clip": False}),
        ("with_autocast", "lowp_weights_scaled", {"autocast": False, "weights": "amp", "scaler": "static", "clip": False}),
        ("cuda_amp_grad_scaler", "default", {"autocast": False, "weights": "float32", "scaler": "disabled", "clip": False}),
        ("cuda_amp_grad_scaler", "autocast_scaler", {"autocast": True, "weights": "float32", "scaler": "dynamic", "clip": False}),
        ("cuda_amp_grad_scaler", "autocast_scaler_clip", {"autocast": True, "weights": "float32", "scaler": "dynamic", "clip": True}),
    ],
)
def test_a_mode_is_the_properties_the_run_spec_hands_the_script(script: str, mode: str, properties: dict[str, object]) -> None:
    """Each mode's properties are what its script reads from the run spec's ``modes``; only a dynamic scaler skips steps."""
    assert mode_of(script, mode).to_json() == properties == SCRIPTS[script].modes_json()[mode]
    assert mode_of(script, mode).skips_steps is (properties["scaler"] == "dynamic")


def test_precision_follows_autocast_and_the_weights_dtype() -> None:
    """float32 without autocast, the AMP dtype under it, ``<dtype> weights`` when the weights are in it."""
    assert mode_of("cuda_amp_grad_scaler", "default").precision("float16") == "float32"
    assert mode_of("cuda_amp_grad_scaler", "autocast_scaler").precision("float16") == "float16"
    assert mode_of("with_autocast", "lowp_weights_scaled").precision("bfloat16") == "bfloat16 weights"


def test_an_unknown_script_or_a_mode_the_script_lacks_is_refused_naming_what_it_has() -> None:
    """``mode_of`` refuses a mode another script declares (naming this script's), and an unknown script (naming both)."""
    with pytest.raises(SpecError) as info:
        mode_of("cuda_amp_grad_scaler", "lowp_weights")
    assert str(info.value) == ("mode must be one of 'default', 'autocast_scaler', 'autocast_scaler_clip' for cuda_amp_grad_scaler, "
                               "got 'lowp_weights'.")
    with pytest.raises(SpecError, match="script must be one of 'with_autocast', 'cuda_amp_grad_scaler', got 'train'"):
        mode_of("train", "default")


def test_a_mode_with_unknown_properties_cannot_be_declared() -> None:
    """A weights dtype or scaler kind outside the known ones is a programming error at import, naming both lists."""
    with pytest.raises(ValueError, match="weights must be one of"):
        Mode("half", autocast=False, weights="float16")
    with pytest.raises(ValueError, match="scaler one of"):
        Mode("scaled", autocast=True, scaler="fixed")
