"""The optimizer table: every row builds in PyTorch under its own names, `--optimizer` picks rows, and overrides are checked."""

from __future__ import annotations

import inspect
import json

import pytest

from harness.errors import SpecError, UsageError
from harness.workload.optimizers import FAMILIES, OPTIMIZERS, PRESET_OPTIMIZERS, SPEC_LR, check_optimizer_args, parse_optimizers
from harness.workload.spec import PRESETS, WorkloadSpec

_EVERY = ", ".join(repr(name) for name in OPTIMIZERS)


def test_the_table_holds_seventeen_rows_in_both_families() -> None:
    """17 rows, sgd first and ignite_adagrad last; the ignite family is exactly the rows built by ``optim_ignite_*``."""
    assert len(OPTIMIZERS) == 17 and next(iter(OPTIMIZERS)) == "sgd" and list(OPTIMIZERS)[-1] == "ignite_adagrad"
    assert all(name == row.name and row.family in FAMILIES for name, row in OPTIMIZERS.items())
    ignite = {n for n, r in OPTIMIZERS.items() if r.family == "ignite"}
    assert ignite == {n for n, r in OPTIMIZERS.items() if r.r.startswith("optim_ignite_")} and len(ignite) == 5
    assert all(row.r.startswith("optim_") for row in OPTIMIZERS.values())
    assert OPTIMIZERS["sgd"].args == {"lr": SPEC_LR}  # the recipe's plain SGD, what every earlier result ran


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_every_row_gives_each_value_a_reason_and_binds_to_its_pytorch_class(name: str) -> None:
    """Each hyperparameter has a reason beside it, and PyTorch's constructor accepts the row's arguments under its names (a
    misspelt or missing argument would fail every cell of the row)."""
    import torch

    row = OPTIMIZERS[name]
    assert set(row.reasons) == set(row.args) and all(r.strip() for r in row.reasons.values())
    python = row.run_spec(0.05)["python"]
    constructor = getattr(torch.optim, python["class"])
    inspect.signature(constructor).bind([torch.zeros(1, requires_grad=True)], **python["args"])
    assert all(entry.name and entry.python and entry.r for entry in row.state)


def test_the_run_spec_names_each_languages_arguments_and_takes_the_spec_lr() -> None:
    """A row's run spec: the spec's lr where the row says so, PyTorch's names (ASGD's ``lambd``), pairs as JSON lists, overrides last."""
    asgd = OPTIMIZERS["asgd"].run_spec(0.05)
    assert asgd["python"]["class"] == "ASGD" and asgd["r"]["function"] == "optim_asgd"
    assert asgd["python"]["args"]["lambd"] == asgd["r"]["args"]["lambda"] == 1e-4 and "lambda" not in asgd["python"]["args"]
    assert asgd["python"]["args"]["lr"] == asgd["r"]["args"]["lr"] == 0.05
    adam = OPTIMIZERS["adam"].run_spec(0.05, {"betas": (0.8, 0.9)})
    assert adam["python"]["args"]["lr"] == 1e-3  # an adaptive row keeps its own lr
    assert adam["python"]["args"]["betas"] == adam["r"]["args"]["betas"] == [0.8, 0.9]
    plain = {"dtype": None, "r_tensor": False}
    assert adam["state"] == [{"name": "step", "python": "step", "r": "step", "count": True, **plain},
                             {"name": "exp_avg", "python": "exp_avg", "r": "exp_avg", "count": False, **plain},
                             {"name": "exp_avg_sq", "python": "exp_avg_sq", "r": "exp_avg_sq", "count": False, **plain}]
    # ASGD's eta and mu are recorded as the float32 every kernel rounds them to (R keeps them as doubles)
    assert [e["dtype"] for e in asgd["state"] if e["name"] in ("eta", "mu")] == ["float32", "float32"]
    assert json.loads(json.dumps(adam)) == adam


def test_each_preset_runs_its_own_optimizers_unless_told() -> None:
    """tiny runs every row, bench and recipe plain SGD; ``--optimizer`` replaces that, in table order, ``all`` is every row."""
    assert set(PRESET_OPTIMIZERS) == set(PRESETS)
    assert parse_optimizers(None, "tiny") == tuple(OPTIMIZERS)
    assert parse_optimizers(None, "bench") == parse_optimizers(None, "recipe") == ("sgd",)
    assert parse_optimizers(["adam,sgd"], "tiny") == parse_optimizers(["adam", "sgd"], "bench") == ("sgd", "adam")
    assert parse_optimizers(["all"], "bench") == parse_optimizers(["adam", "all"], "bench") == tuple(OPTIMIZERS)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["nadam"], f"optimizer must be one of {_EVERY}, 'all', got 'nadam'."),
        (["all,nadam"], f"optimizer must be one of {_EVERY}, 'all', got 'nadam'."),
        (["sgd,,adam"], f"optimizer must be one of {_EVERY}, 'all', got ''."),
        ([","], f"optimizer must be one or more of {_EVERY}, 'all', got ','."),
    ],
)
def test_unknown_optimizers_are_refused_naming_every_row(values: list[str], message: str) -> None:
    """An unknown name, even beside ``all``, or a list of separators is a UsageError naming every row (and ``all``)."""
    with pytest.raises(UsageError) as info:
        parse_optimizers(values, "tiny")
    assert str(info.value) == message


def test_overrides_are_checked_and_pairs_become_tuples() -> None:
    """Known optimizer, argument and kind: returned with numbers as floats (whole numbers as ints) and pairs as tuples."""
    checked = check_optimizer_args({"adam": {"betas": [0.8, 0.99], "eps": 1}, "asgd": {"t0": 3.0}, "sgd_nesterov": {"nesterov": False}})
    assert checked == {"adam": {"betas": (0.8, 0.99), "eps": 1.0}, "asgd": {"t0": 3}, "sgd_nesterov": {"nesterov": False}}
    assert isinstance(checked["asgd"]["t0"], int) and isinstance(checked["adam"]["eps"], float)
    assert check_optimizer_args({"sgd": {"lr": 0.5}}) == {"sgd": {"lr": 0.5}}  # a row's spec lr can be replaced too


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([1, 2], "optimizer_args must be a table of optimizer name → {argument: value}, e.g. {\"adam\": {\"eps\": 1e-6}}, got [1, 2]."),
        ({"nadam": {"eps": 1.0}}, f"optimizer_args must be an optimizer: one of {', '.join(OPTIMIZERS)}, got 'nadam'."),
        ({"adam": 0.1}, "optimizer_args.adam must be a table of argument → value, got 0.1."),
        ({"adam": {"rho": 0.9}}, "optimizer_args.adam must be one of adam's arguments: lr, betas, eps, weight_decay, amsgrad, got 'rho'."),
        ({"adam": {"eps": -1.0}}, "optimizer_args.adam.eps must be a finite number >= 0, got -1.0."),
        ({"adam": {"eps": float("nan")}}, "optimizer_args.adam.eps must be a finite number >= 0, got nan."),
        ({"adam": {"eps": True}}, "optimizer_args.adam.eps must be a finite number >= 0, got True."),
        ({"adam": {"eps": "1e-6"}}, "optimizer_args.adam.eps must be a finite number >= 0, got '1e-6'."),
        ({"adam": {"betas": 0.9}}, "optimizer_args.adam.betas must be two finite numbers >= 0, e.g. [0.9, 0.99], got 0.9."),
        ({"adam": {"betas": [0.9, 0.99, 0.999]}},
         "optimizer_args.adam.betas must be two finite numbers >= 0, e.g. [0.9, 0.99], got [0.9, 0.99, 0.999]."),
        ({"adam": {"betas": [0.9, "x"]}}, "optimizer_args.adam.betas must be two finite numbers >= 0, e.g. [0.9, 0.99], got 'x'."),
        ({"sgd_nesterov": {"nesterov": 1}}, "optimizer_args.sgd_nesterov.nesterov must be true or false, got 1."),
        ({"asgd": {"t0": 2.5}}, "optimizer_args.asgd.t0 must be a whole number from 0 to 2147483647 (R's largest integer), got 2.5."),
    ],
)
def test_bad_overrides_are_one_spec_error_naming_where_what_and_why(overrides: object, message: str) -> None:
    """Each bad ``optimizer_args`` is a SpecError naming the place (optimizer, argument), the value and what is allowed;
    the spec refuses it the same way."""
    with pytest.raises(SpecError) as info:
        check_optimizer_args(overrides)
    assert str(info.value) == message
    with pytest.raises(SpecError) as again:
        WorkloadSpec.from_preset("tiny", optimizer_args=overrides)
    assert str(again.value) == message
