"""The module sweep end to end: PyTorch's module_db samples through the real workers of both languages, and planted
changes in R that must come out ``diverged`` where they begin (each in its own test).

On one libtorch on CPU, R torch's modules that call the same kernels in the same order are bitwise identical to
PyTorch's: an index off by one in a mapping row, a parameter name map swapped and a changed default init each break
that, and each must be named where it begins. They need R torch (skip with the reason, or fail under
AMP_PARITY_REQUIRE_R=1).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.files.paths import SCRIPTS_ENV
from harness.judge.modules import judge_sweep
from harness.model.modules import ModuleSweepResult
from harness.run.availability import Availability
from harness.run.modules import run_sweep
from harness.workload.modules import MODULE_MODES, MODULE_ROWS, ModuleRow
from tests.planting import copy_scripts, plant
from tests.support import kept_workers, require_r_torch

FLOAT32 = MODULE_MODES[:1]


def _sweep(tmp_path: Path, entries: list[str], rows: dict[str, ModuleRow] | None = None, limit: int | None = 2,
           modes: tuple[object, ...] = FLOAT32) -> ModuleSweepResult:
    facts = run_sweep(tmp_path / "sweep", entries=entries, modes=modes, limit=limit, rows=rows,  # type: ignore[arg-type]
                      kept=kept_workers())
    return judge_sweep(facts, [])


def _verdicts(result: ModuleSweepResult, entry: str) -> list[tuple[int, str, str]]:
    return [(s.index, s.verdict, s.why) for s in result.samples if s.entry == entry]


def test_modules_r_has_are_bitwise_identical_and_those_it_lacks_unsupported_in_its_words(
        availability: Availability, tmp_path: Path) -> None:
    require_r_torch(availability)
    result = _sweep(tmp_path, ["nn.Linear", "nn.Softmax", "nn.Embedding", "nn.Conv2d", "nn.Mish"], limit=2,
                    modes=tuple(MODULE_MODES))
    for entry in ("nn.Linear", "nn.Softmax", "nn.Embedding", "nn.Conv2d"):
        assert {v for _, v, _ in _verdicts(result, entry)} == {"identical"}, _verdicts(result, entry)
    assert {(v, why) for _, v, why in _verdicts(result, "nn.Mish")} == {("unsupported", "R: object 'nn_mish' not found")}
    assert {i.verdict for i in result.inits} == {"identical"}  # the same seed builds the same module, in the same order
    assert next(c for c in result.coverage if c.entry == "nn.Mish").row()["unsupported"] == 2 * len(MODULE_MODES)  # limit 2


def test_a_dimension_off_by_one_in_a_mapping_row_diverges_at_the_output(availability: Availability, tmp_path: Path) -> None:
    require_r_torch(availability)
    rows = {**MODULE_ROWS, "Softmax": dataclasses.replace(MODULE_ROWS["Softmax"], one_based=())}
    result = _sweep(tmp_path, ["nn.Softmax"], rows, limit=1)
    assert _verdicts(result, "nn.Softmax")[0][:2] == (0, "diverged")
    assert _verdicts(result, "nn.Softmax")[0][2].startswith("out: ")


def test_a_parameter_name_map_swapped_diverges_at_the_output_and_at_construction(
        availability: Availability, tmp_path: Path) -> None:
    require_r_torch(availability)
    rows = {**MODULE_ROWS, "GroupNorm": dataclasses.replace(MODULE_ROWS["GroupNorm"], names={"weight": "bias", "bias": "weight"})}
    result = _sweep(tmp_path, ["nn.GroupNorm"], rows, limit=1)
    assert _verdicts(result, "nn.GroupNorm")[0][1:] == ("diverged", _verdicts(result, "nn.GroupNorm")[0][2])
    assert _verdicts(result, "nn.GroupNorm")[0][2].startswith("out: ")
    assert result.inits[0].verdict == "diverged" and result.inits[0].why.startswith("initial bias")


def test_a_changed_default_init_diverges_at_construction_only(availability: Availability, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    require_r_torch(availability)
    root = copy_scripts(tmp_path / "scripts")
    plant(root, "r_scripts/modules.R", "  do.call(constructor, lapply(args, decode, tensors = tensors))\n}",
          "  module <- do.call(constructor, lapply(args, decode, tensors = tensors))\n"
          "  if (inherits(module, \"nn_linear\")) torch::with_no_grad(module$weight$mul_(2))\n  module\n}")
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    result = _sweep(tmp_path, ["nn.Linear", "nn.Conv1d"], limit=1)
    linear = [i for i in result.inits if i.entry == "nn.Linear"]
    assert [i.verdict for i in linear] == ["diverged"] and linear[0].why.startswith("initial weight: differs by up to")
    assert [i.verdict for i in result.inits if i.entry == "nn.Conv1d"] == ["identical"]
    # The forward and backward start from PyTorch's weights, loaded by name: they stay identical.
    assert {v for _, v, _ in _verdicts(result, "nn.Linear")} == {"identical"}


def test_a_0d_class_index_stays_0d_when_moved_to_r_s_count(availability: Availability, tmp_path: Path) -> None:
    """CrossEntropyLoss's no_batch_dim sample: a 0-d target moved by one (R's `t + 1L` would make it shape (1), and R
    refuses the pair with "size mismatch"): identical."""
    require_r_torch(availability)
    result = _sweep(tmp_path, ["nn.CrossEntropyLoss"], limit=9)
    assert [(i, v) for i, v, _ in _verdicts(result, "nn.CrossEntropyLoss") if i in (2, 8)] == [(2, "identical"), (8, "identical")]
