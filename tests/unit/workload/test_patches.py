"""The patches of the bindings' functions, as data: what a run of each optimizer gets, in each language."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.workload.patches import PATCHES_FILE, POINT_CALL, POINTS, SWITCHES, check_switch, load_patches, patches_for
from harness.workload.run_spec import run_spec_for
from harness.workload.spec import WorkloadSpec


def test_every_point_is_defined_in_both_languages() -> None:
    """A traced value exists on both sides or on neither: each point names a target, an anchor and a value per language."""
    for point in POINTS:
        assert set(point.sides) == {"python", "r"}
        for target, anchor, where, value, _index in point.sides.values():
            assert target and anchor and value and where in ("before", "after")


def test_a_point_and_a_switch_on_one_statement_make_one_replacement() -> None:
    """R's clip coefficient: the switch replaces the statement, and the norm and coefficient points follow the switched one."""
    (patch,) = patches_for("sgd", ("r-clip-coef-reciprocal",))["r"]
    assert patch["kind"] == "switch" and patch["old"] == "clip_coef <- max_norm/(total_norm + 1e-06)"
    assert patch["new"] == (f"{POINT_CALL}('clip.total_norm', total_norm); clip_coef <- (total_norm + 1e-06)$reciprocal() * "
                            f"max_norm; {POINT_CALL}('clip.coef', clip_coef)")


def test_without_switches_a_run_gets_only_points() -> None:
    """A plain run patches nothing but the trace's points (applied only when it is traced)."""
    patches = patches_for("sgd")
    assert {p["kind"] for language in patches.values() for p in language} == {"point"}


def test_a_switch_acts_only_on_the_optimizers_whose_functions_it_patches() -> None:
    """A switch scoped to some optimizers is not applied to a run of another (its function is never called there)."""
    scoped = [s for s in SWITCHES.values() if s.optimizers]
    for switch in scoped:
        other = next(o for o in ("sgd", "rprop", "adagrad") if o not in switch.optimizers)
        assert all(p["id"].split("+")[0] != switch.id for p in patches_for(other, (switch.id,))[switch.side])


def test_the_run_spec_carries_each_languages_patches_and_the_switches() -> None:
    """The run spec names the switches a run applies and both languages' replacements (each script picks its own)."""
    spec = run_spec_for(WorkloadSpec.from_preset("tiny"), "cuda_amp_grad_scaler", "sgd", "fixture.safetensors", None,
                        switches=("r-clip-coef-reciprocal",)).to_json()
    assert spec["switches"] == ["r-clip-coef-reciprocal"] and set(spec["patches"]) == {"python", "r"}


def _switch_file(tmp_path: Path, side: str, old: str, new: str) -> Path:
    path = tmp_path / "patches.toml"
    path.write_text(f'[[switch]]\nid = "s"\nside = "{side}"\ntitle = "t"\ntarget = "optim_adam$step"\n'
                    f"old = '{old}'\nnew = '{new}'\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("side", "old", "new", "why"), [
    ("r", "exp_avg$mul_(beta1)$add_(grad, alpha = 1 - beta1)", "exp_avg$lerp_(grad, 1 - beta1); group$lr <- 0.05", "second statement"),
    ("r", "exp_avg$mul_(beta1)$add_(grad, alpha = 1 - beta1)", "exp_avg$lerp_(grad, (group$lr <- 0.05) * 0 + 1 - beta1)",
     "inside an expression"),
    ("r", "exp_avg$mul_(beta1)$add_(grad, alpha = 1 - beta1)", "{ exp_avg$lerp_(grad, 1 - beta1) }", "block"),
    ("r", "clip_coef <- max_norm/(total_norm + 1e-06)", "lr <- max_norm/(total_norm + 1e-06)", "'lr'"),
    ("python", "exp_avg.lerp_(grad, 1 - beta1)", "exp_avg.lerp_(grad, 1 - beta1); lr = 0.05", "2 statements"),
    ("python", "exp_avg.lerp_(grad, 1 - beta1)", "if True: exp_avg.lerp_(grad, 1 - beta1)", "compound"),
    ("python", "exp_avg.lerp_(grad, 1 - beta1)", "exp_avg.lerp_(grad, (lr := 0.05) * 0 + 1 - beta1)", "inside an expression"),
])
def test_a_switch_that_does_more_than_one_statement_is_refused_at_load(tmp_path: Path, side: str, old: str, new: str, why: str) -> None:
    """Issue 37 (4): a switch is one statement for one statement, writing only what the statement it replaces writes; a
    second statement hidden in its replacement (R's `...; group$lr <- 0.05`) is refused when patches.toml is loaded."""
    with pytest.raises(ValueError, match=f"switch 's'.*{re.escape(why)}"):
        load_patches(_switch_file(tmp_path, side, old, new))


def test_every_committed_switch_is_one_statement_for_one_statement(tmp_path: Path) -> None:
    """The committed switches pass the check, R's step read as a double included (it assigns the name it changed in place)."""
    assert check_switch("r", "step$add_(1)", "step <- step$add_(1)$item()") is None
    assert load_patches(PATCHES_FILE)[0].keys() == SWITCHES.keys()


def test_a_switch_on_a_method_every_optimizer_inherits_targets_the_rows_own_optimizer() -> None:
    """A switch whose R target is ``$method`` (zero_grad, which the R-code optimizers inherit) patches that method of the
    optimizer each row builds, as a point's ``$method`` does."""
    targets = {o: [p["target"] for p in patches_for(o, ("r-zero-grad-default-set-to-none",))["r"] if p["kind"] == "switch"]
               for o in ("sgd_momentum", "adam")}
    assert targets == {"sgd_momentum": ["optim_sgd$zero_grad"], "adam": ["optim_adam$zero_grad"]}
