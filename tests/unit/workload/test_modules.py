"""The module sweep's mapping table (harness/workload/modules.toml), tested row by row as the optimizer table is: each row
binds to a PyTorch class and its arguments, and turns a sample into R's call by its declared conventions."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch

from harness.errors import SpecError
from harness.workload.modules import MODULE_MODES, MODULE_ROWS, ModuleRow, conventional_r_name, load_rows, r_sample


def _sample(constructor: dict[str, object], forward_args: list[object] | None = None, names: list[str] | None = None,
            state: list[str] | None = None) -> dict[str, object]:
    return {"constructor": constructor, "forward": {"args": forward_args or [], "kwargs": {}, "names": names or []},
            "state_dict": state or [], "parameters": [], "buffers": []}


@pytest.mark.parametrize("name", sorted(MODULE_ROWS))
def test_every_row_binds_to_its_pytorch_class_and_its_arguments(name: str) -> None:
    """A row names a torch.nn class, an R constructor, and only arguments the class (or its forward) has."""
    row = MODULE_ROWS[name]
    cls = getattr(torch.nn, name)
    assert row.r.startswith("nn_")
    init = set(inspect.signature(cls).parameters)
    forward = set(inspect.signature(cls.forward).parameters)
    if "kwargs" not in init:  # the RNNs take (*args, **kwargs): their names are RNNBase's
        assert set(row.args) | set(row.one_based) | set(row.dropped) <= init, name
    assert set(row.forward_args) | set(row.one_based_inputs) <= forward, name


def test_the_table_maps_every_class_r_torch_has_under_its_own_name() -> None:
    """Where R torch's name is not the conventional one (ReLU: nn_relu), the row says so; the others follow R's rule."""
    assert MODULE_ROWS["ReLU"].r == "nn_relu" and conventional_r_name("ReLU") == "nn_re_lu"
    assert MODULE_ROWS["ConvTranspose2d"].r == conventional_r_name("ConvTranspose2d") == "nn_conv_transpose2d"
    assert conventional_r_name("ReflectionPad1d") == "nn_reflection_pad1d"
    assert len(MODULE_ROWS) == 78


def test_a_dimension_r_counts_from_one_moves_up_and_one_from_the_end_stays() -> None:
    row = MODULE_ROWS["Softmax"]
    assert r_sample(row, _sample({"dim": 0}))["args"] == {"dim": 1}
    assert r_sample(row, _sample({"dim": -1}))["args"] == {"dim": -1}
    assert r_sample(row, _sample({"dim": None}))["args"] == {"dim": None}


def test_class_indices_r_counts_from_one_are_marked_to_shift() -> None:
    """NLLLoss's target (second input) and its ignore_index count from 1 in R (to_index_tensor, to_index_ignore_index)."""
    row = MODULE_ROWS["NLLLoss"]
    call = r_sample(row, _sample({"ignore_index": 2}, [{"tensor": "in.0"}, {"tensor": "in.1"}], ["input", "target"]))
    assert call["args"] == {"ignore_index": 3}
    assert call["forward"]["args"] == [{"tensor": "in.0"}, {"tensor": "in.1", "shift": 1}]


def test_renames_layer_names_and_dropped_defaults() -> None:
    lstm = MODULE_ROWS["LSTM"]
    call = r_sample(lstm, _sample({"kwargs": {"dict": {"input_size": 2, "proj_size": 0}}}, state=["weight_ih_l0", "bias_hh_l1"]))
    assert call["args"] == {"input_size": 2}  # proj_size = 0 is PyTorch's default, which R's LSTM does without
    assert call["names"] == {"weight_ih_l0": "weight_ih_l1", "bias_hh_l1": "bias_hh_l2"}
    assert r_sample(lstm, _sample({"kwargs": {"dict": {"proj_size": 2}}}))["args"] == {"proj_size": 2}  # R refuses it
    embedding = MODULE_ROWS["Embedding"]
    assert r_sample(embedding, _sample({"_weight": {"tensor": "ctor._weight"}}))["args"] == {".weight": {"tensor": "ctor._weight"}}
    named = ModuleRow("GroupNorm", "nn_group_norm", names={"weight": "gamma"})
    assert r_sample(named, _sample({}, state=["weight", "bias"]))["names"] == {"weight": "gamma", "bias": "bias"}


def test_a_row_with_an_unknown_field_is_refused_in_one_line(tmp_path: Path) -> None:
    table = tmp_path / "modules.toml"
    table.write_text('[Linear]\nr = "nn_linear"\nrenames = {}\n')
    with pytest.raises(SpecError, match=r"\[Linear\] must be a row with r = .* and only the fields"):
        load_rows(table)
    table.write_text('[Linear]\nargs = {}\n')
    with pytest.raises(SpecError, match="fix the row"):
        load_rows(table)


def test_the_modes_are_float32_both_autocast_dtypes_and_low_precision_weights() -> None:
    assert [(m.name, m.autocast, m.weights) for m in MODULE_MODES] == [
        ("float32", None, None), ("autocast_bfloat16", "bfloat16", None), ("autocast_float16", "float16", None),
        ("lowp_bfloat16", None, "bfloat16")]
