"""The loop-feature table: every row declares its reasons and a covering design the matrix follows, and reaches the run
spec under each language's names."""

from __future__ import annotations

import pytest

from harness.contract.modes import all_mode_names
from harness.errors import UsageError
from harness.workload.features import (
    FEATURES,
    KINDS,
    NO_FEATURE,
    Cover,
    Feature,
    epoch_factor,
    micro_batches,
    parse_features,
)
from harness.workload.matrix import Cell, cells_for
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.run_spec import run_spec_for
from harness.workload.spec import WorkloadSpec


def test_every_row_has_a_reason_per_hyperparameter_and_a_reason_per_cover() -> None:
    """A hyperparameter without a reason, or a cover without why, is refused."""
    for row in FEATURES.values():
        assert row.kind in KINDS and set(row.args) == set(row.reasons) and all(row.reasons.values())
        assert row.covers and all(c.why for c in row.covers)
    with pytest.raises(ValueError, match="reason"):
        Feature("bad", "scheduler", "t", {"gamma": 0.5}, {}, ())
    with pytest.raises(ValueError, match="optimizer"):
        Feature("bad", "accumulate", "t", {}, {}, (Cover((("with_autocast", "default"),), ("nadam",), "why"),))


def test_the_matrix_runs_each_feature_where_its_covers_say_and_ids_name_it() -> None:
    """Schedulers: every optimizer in the scaler mode and sgd in every mode; the plain loop's ids are unchanged."""
    cells = cells_for(("python", "r"), all_mode_names(), tuple(OPTIMIZERS), "cpu", (NO_FEATURE, "lr_step"))
    plain = [c for c in cells if c.feature == NO_FEATURE]
    step = [c for c in cells if c.feature == "lr_step"]
    assert len(plain) == 2 * 7 * len(OPTIMIZERS)
    assert {c.optimizer for c in step if c.mode == "autocast_scaler"} == set(OPTIMIZERS)
    assert {(c.script, c.mode) for c in step if c.optimizer == "sgd"} == {(c.script, c.mode) for c in plain}
    assert plain[0].id == "with_autocast-default-sgd-python-cpu"
    cell = Cell("r", "cuda_amp_grad_scaler", "autocast_scaler", "adam", "cpu", "lr_step")
    assert cell.id == "cuda_amp_grad_scaler-autocast_scaler-adam+lr_step-r-cpu"
    assert cell.pair == "cuda_amp_grad_scaler-autocast_scaler-adam+lr_step-cpu"


def test_the_run_spec_carries_the_row_and_the_plain_loop_carries_none() -> None:
    """Both languages read one row: the scheduler's class and function, the same arguments."""
    workload = WorkloadSpec.from_preset("tiny")
    spec = run_spec_for(workload, "cuda_amp_grad_scaler", "sgd", "f.safetensors", None, feature="lr_step").to_json()
    assert spec["feature"]["python"] == {"class": "StepLR", "args": {"step_size": 4, "gamma": 0.7}}
    assert spec["feature"]["r"] == {"function": "lr_step", "args": {"step_size": 4, "gamma": 0.7}}
    assert run_spec_for(workload, "cuda_amp_grad_scaler", "sgd", "f.safetensors", None).to_json()["feature"] is None
    assert micro_batches("accumulate") == 2 and micro_batches("lr_step") == micro_batches(NO_FEATURE) == 1


#: The schedulers added for issue 39 beyond lr_step and lr_cosine, and the most cells they may add to tiny (both
#: languages): the main job must stay near a minute.
_NEW_SCHEDULERS = ("lr_multiplicative", "lr_lambda", "lr_lambda_groups", "lr_one_cycle", "lr_one_cycle_groups",
                   "lr_reduce_on_plateau")
_NEW_SCHEDULER_CELLS = 120


def test_a_scheduler_row_reaches_the_run_spec_as_numbers_and_resolved_factors() -> None:
    """A lambda row carries its declared factor's numbers (no code), OneCycleLR's max_lr is a factor of each optimizer
    row's lr, the plateau row steps on the loss and names its traced state, the groups row carries the two groups; a row
    that declares a lambda with other arguments, or an lr factor it does not have, is refused."""
    workload = WorkloadSpec.from_preset("tiny")

    def feature(optimizer: str, name: str) -> dict[str, object]:
        spec = run_spec_for(workload, "cuda_amp_grad_scaler", optimizer, "f.safetensors", None, feature=name).to_json()
        return dict(spec["feature"])

    lam = feature("sgd", "lr_lambda")
    assert lam["lr_lambda"] == {"warmup": 4, "decay": 0.1} and lam["python"] == {"class": "LambdaLR", "args": {}}
    assert lam["param_groups"] is None and feature("sgd", "lr_lambda_groups")["param_groups"] == dict(FEATURES["param_groups"].args)
    one_cycle = {"function": "lr_one_cycle", "args": {"max_lr": 0.001, "total_steps": 20, "pct_start": 0.3}}
    assert feature("adam", "lr_one_cycle")["r"] == one_cycle
    assert feature("sgd", "lr_one_cycle")["python"]["args"]["max_lr"] == workload.lr  # type: ignore[index]
    plateau = feature("sgd", "lr_reduce_on_plateau")
    assert plateau["on_loss"] and plateau["traced"] == ["best", "num_bad_epochs", "cooldown_counter"]
    assert epoch_factor({"warmup": 4, "decay": 0.1}, 0) == 0.25 and epoch_factor({"warmup": 1, "decay": 0.01}, 0) == 1.0
    with pytest.raises(ValueError, match="lr_lambda"):
        Feature("bad", "scheduler", "t", {"gamma": 0.5}, {"gamma": "why"}, (), lr_lambda=True)
    with pytest.raises(ValueError, match="lr_args"):
        Feature("bad", "scheduler", "t", {"gamma": 0.5}, {"gamma": "why"}, (), lr_args=("max_lr",))


def test_the_new_schedulers_cover_what_their_code_touches_within_the_bound() -> None:
    """Each new scheduler runs one optimizer of each family (OneCycleLR each kind of momentum it cycles) in the scaler
    mode and every mode once, and together they add at most ``_NEW_SCHEDULER_CELLS`` cells to tiny."""
    cells = cells_for(("python", "r"), all_mode_names(), tuple(OPTIMIZERS), "cpu", _NEW_SCHEDULERS)
    assert 0 < len(cells) <= _NEW_SCHEDULER_CELLS
    for name in _NEW_SCHEDULERS:
        mine = [c for c in cells if c.feature == name]
        assert {"sgd_momentum", "adam", "ignite_adam"} <= {c.optimizer for c in mine if c.mode == "autocast_scaler"}
        if not name.endswith("_groups"):  # a groups row is the scaler mode's: its one-group row covers the modes
            assert {(c.script, c.mode) for c in mine} == {(s, m) for s, m in FEATURES["lr_step"].covers[1].modes}
    assert {"rmsprop", "ignite_sgd"} <= {c.optimizer for c in cells if c.feature == "lr_one_cycle"}


def test_feature_flags_parse_and_refuse_in_one_line() -> None:
    """``--feature`` takes names, comma lists and ``all``; tiny runs every feature by default (a run narrowed by --mode or
    --optimizer the plain loop), bench only the plain loop."""
    assert parse_features(None, "tiny") == (NO_FEATURE, *FEATURES)
    assert parse_features(None, "bench") == (NO_FEATURE,)
    assert parse_features(None, "tiny", narrowed=True) == (NO_FEATURE,)  # --mode or --optimizer: the plain loop
    assert parse_features(["clip_value,lr_step"], "tiny") == ("lr_step", "clip_value")
    with pytest.raises(UsageError, match="feature"):
        parse_features(["lr_steps"], "tiny")


def test_a_resume_row_keeps_its_step_from_the_scheduler_and_declares_what_r_cannot_save() -> None:
    """``at_step`` is the loop's, never a scheduler argument; R's scaler (no state_dict()) is declared unsupported for
    every resume row, Python's is not; a row's JSON names each refusal by language and scaler."""
    workload = WorkloadSpec.from_preset("tiny")
    spec = run_spec_for(workload, "cuda_amp_grad_scaler", "adagrad", "f.safetensors", None, feature="resume_lr_step").to_json()
    assert spec["feature"]["args"]["at_step"] == 7
    assert spec["feature"]["python"] == {"class": "StepLR", "args": {"step_size": 4, "gamma": 0.7}}
    assert spec["feature"]["r"] == {"function": "lr_step", "args": {"step_size": 4, "gamma": 0.7}}
    for name in ("resume", "resume_lr_step"):
        row = FEATURES[name]
        assert row.refuses("r", "dynamic") and not row.refuses("python", "dynamic") and not row.refuses("r", "disabled")
        assert "state_dict" in row.to_json()["unsupported"]["r/dynamic"]
    assert FEATURES["resume_lr_step"].scheduler and not FEATURES["resume"].scheduler
    assert not any(FEATURES[name].unsupported for name in FEATURES if FEATURES[name].kind != "resume")
    for row in FEATURES.values():  # a resumed run is compared with the run of the same loop, uninterrupted
        if row.kind == "resume":
            plain = FEATURES.get(row.uninterrupted)
            scheduler = (plain.python, plain.run_spec()["python"]["args"]) if plain is not None else ("", {})
            assert scheduler == (row.python, row.run_spec()["python"]["args"] if row.python else {}), row.name
