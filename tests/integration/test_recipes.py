"""docs/development.md's recipes, followed: a new optimizer is a row, a new mode is a Mode, a new script pair is two files
and one ScriptPair, a new model is a row, a forward per language and its reference; each then runs in both languages,
is judged on its own and in its pair, and shows in the views.

Each test changes the harness's tables in this process only (``monkeypatch``): the workers build everything from the run
spec (the optimizer's row, the script's modes), so nothing else needs to know. They need R torch: they skip with the
reason when it is absent and fail under ``AMP_PARITY_REQUIRE_R=1``.
"""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from harness.contract.models import MODELS, Model, Parameter
from harness.contract.modes import SCRIPTS, Mode, ScriptPair
from harness.files.paths import SCRIPTS_ENV
from harness.model.result import MatrixResult
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.views.table import print_result
from harness.workload.features import FEATURES, Cover, Feature
from harness.workload.optimizers import OPTIMIZERS, SPEC_LR, Optimizer, StateEntry
from harness.workload.spec import WorkloadSpec
from tests.planting import copy_scripts, plant
from tests.support import kept_workers, require_r_torch

#: The recipe's example row: SGD with heavy-ball momentum and no weight decay (a row the table does not have).
HEAVY_BALL = Optimizer(
    "sgd_heavy_ball", "r", "SGD", "optim_sgd", {"lr": SPEC_LR, "momentum": 0.5, "dampening": 0.5},
    {"lr": "the preset's lr", "momentum": "0.5: the buffer and the gradient both matter", "dampening": "non-zero so it acts"},
    (StateEntry("momentum_buffer", "momentum_buffer", "momentum_buffer"),), title="SGD with heavy-ball momentum",
)


def _run(availability: Availability, tmp_path: Path, modes: tuple[str, ...], optimizers: tuple[str, ...],
         features: tuple[str, ...] | None = None) -> MatrixResult:
    require_r_torch(availability)
    with MatrixRunner(WorkloadSpec.from_preset("tiny"), ("python", "r"), timeout=300, availability=availability,
                      staging=tmp_path, kept=kept_workers()) as runner:
        return runner.run(modes, optimizers, measure=False, features=features)


def _assert_ran_and_passed(result: MatrixResult, pairs: int) -> None:
    """Every cell ok and passing its own check against its float64 reference; ``pairs`` pairs, each bitwise identical."""
    assert all(c.ok and c.verdict is not None and c.verdict.outcome == "pass" for c in result.cells), [
        (c.id, c.status, c.reason, c.verdict and c.verdict.reason) for c in result.cells]
    assert len(result.pairs) == pairs and all(p.verdict == "identical" for p in result.pairs), [p.explain() for p in result.pairs]


def _table(result: MatrixResult) -> str:
    console = Console(record=True, width=240)
    print_result(result, console)
    return console.export_text()


def test_a_new_optimizer_is_one_row(availability: Availability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row of an existing PyTorch class: both languages build it from the run spec, its float64 reference is its class's,
    its state is traced, and its cells show under its name."""
    monkeypatch.setitem(OPTIMIZERS, HEAVY_BALL.name, HEAVY_BALL)
    result = _run(availability, tmp_path, ("default", "autocast"), (HEAVY_BALL.name,))
    _assert_ran_and_passed(result, pairs=3)  # with_autocast's default and autocast, the scaler script's default
    assert {c.record.optimizer for c in result.cells if c.record} == {HEAVY_BALL.name}
    trace = result.cells[0].trace
    assert trace is not None and trace.points > 0
    assert all(p.details["trace"]["points"][0] > 0 for p in result.pairs)  # traced, momentum buffer included
    assert "sgd_heavy_ball" in _table(result)


def test_a_new_mode_is_one_mode_of_its_pair(availability: Availability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A combination its pair's loop handles (autocast with a static loss scale) runs in both languages with no script
    changed; one it does not handle (a dynamic scaler in the loop that has none) is refused when the table is built."""
    pair = SCRIPTS["with_autocast"]
    static = Mode("autocast_static", autocast=True, scaler="static", title="autocast with a static loss scale")
    monkeypatch.setitem(SCRIPTS, "with_autocast", ScriptPair(pair.stem, (*pair.modes, static), pair.baseline, pair.scalers,
                                                             pair.weights, pair.clips))
    result = _run(availability, tmp_path, ("autocast_static",), ("sgd",))
    _assert_ran_and_passed(result, pairs=1)
    assert result.cells[0].cell.properties == static
    with pytest.raises(ValueError, match="mode scaled has scaler 'dynamic', which its run_workload does not handle"):
        ScriptPair(pair.stem, (*pair.modes, Mode("scaled", autocast=True, scaler="dynamic")), pair.baseline, pair.scalers,
                   pair.weights, pair.clips)


def test_a_new_script_pair_is_two_files_and_one_entry(availability: Availability, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Two scripts (here with_autocast's, renamed) and their ScriptPair: cells, pairs, float64 checks and the table follow."""
    root = copy_scripts(tmp_path / "scripts")
    for folder, suffix, constant in (("py_scripts", ".py", 'SCRIPT = "with_autocast"'), ("r_scripts", ".R", 'script <- "with_autocast"')):
        shutil.copy(root / folder / f"with_autocast{suffix}", root / folder / f"my_workload{suffix}")
        plant(root, f"{folder}/my_workload{suffix}", constant, constant.replace("with_autocast", "my_workload"))
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    pair = SCRIPTS["with_autocast"]
    monkeypatch.setitem(SCRIPTS, "my_workload", ScriptPair("my_workload", pair.modes[:2], scalers=pair.scalers, clips=pair.clips))
    result = _run(availability, tmp_path / "out", ("default", "autocast"), ("sgd",))
    mine = [c for c in result.cells if c.script == "my_workload"]
    assert len(mine) == 4 and all(c.record is not None and c.record.script == "my_workload" for c in mine)
    _assert_ran_and_passed(result, pairs=5)  # my_workload's two modes, with_autocast's two, the scaler script's default
    assert "my_workload · autocast" in _table(result)


#: The loop-feature recipe's example row: a faster StepLR (a scheduler class the reference already has a closed form for),
#: covered in one mode of each script with plain SGD.
FAST_STEP = Feature(
    "lr_step_fast", "scheduler", "StepLR every 2 iterations, halving", {"step_size": 2, "gamma": 0.5},
    {"step_size": "2: the decay fires at every other iteration", "gamma": "0.5: a power of two, the lr stays exact"},
    (Cover((("with_autocast", "autocast"), ("cuda_amp_grad_scaler", "autocast_scaler")), ("sgd",), "one mode of each script"),),
    python="StepLR", r="lr_step",
)


def test_a_new_loop_feature_is_one_row(availability: Availability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row of an existing kind: both languages build the loop from the run spec, the float64 reference follows its
    schedule, the matrix runs it where its covers say, and its cells show as ``optimizer+feature``."""
    monkeypatch.setitem(FEATURES, FAST_STEP.name, FAST_STEP)
    result = _run(availability, tmp_path, ("autocast", "autocast_scaler"), ("sgd",), (FAST_STEP.name,))
    _assert_ran_and_passed(result, pairs=2)
    assert {c.id for c in result.cells} == {f"{script}-{mode}-sgd+lr_step_fast-{frontend}-cpu" for script, mode in
                                            FAST_STEP.covers[0].modes for frontend in ("python", "r")}
    assert "sgd+lr_step_fast" in _table(result)


#: The model recipe's example: a toy second model, Linear, tanh, Linear (one row, one forward per language, its reference).
TOY = Model(
    "toy", "Linear, tanh, Linear: the model recipe's example", layers=lambda s: 2,
    parameters=lambda s: (
        Parameter("layer0.weight", (s.in_size, s.in_size), 0, s.in_size), Parameter("layer0.bias", (s.in_size,), 0, s.in_size),
        Parameter("layer1.weight", (s.out_size, s.in_size), 1, s.in_size), Parameter("layer1.bias", (s.out_size,), 1, s.in_size),
    ),
    inputs=lambda s: (s.batch_size, s.in_size), targets=lambda s: (s.batch_size, s.out_size),
    step_flops=lambda s: 2.0 * s.batch_size * s.in_size * (2 * s.in_size + 3 * s.out_size),
)

TOY_PY = '''"""The toy model's forward in PyTorch."""
from typing import Any

import torch

from py_scripts.tracing import trace_point


def build(spec: dict[str, Any]) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(spec["in_size"], spec["in_size"], device=spec["device"]), torch.nn.Tanh(),
                               torch.nn.Linear(spec["in_size"], spec["out_size"], device=spec["device"]))


def forward(net: torch.nn.Sequential, x: torch.Tensor, step: int, unused: int, custom: Any) -> torch.Tensor:
    for k, module in enumerate(net):
        x = module(x)
        trace_point(step, f"forward.module{k}", x)
    return x
'''

TOY_R = '''#' The toy model's forward in R torch.
build <- function(spec) {
  net <- torch::nn_sequential(torch::nn_linear(spec$in_size, spec$in_size), torch::nn_tanh(), torch::nn_linear(spec$in_size, spec$out_size))
  net$to(device = spec$device)
  net
}

forward <- function(net, x, step, unused, custom) {
  for (k in seq_along(net$children)) {
    x <- net$children[[k]](x)
    trace_point(step, sprintf("forward.module%d", k - 1L), x)
  }
  x
}
'''


def _toy_reference() -> types.ModuleType:
    """The toy's float64 reference, by hand: its loss and gradients (harness/judge/models/<name>.py's interface)."""
    module = types.ModuleType("harness.judge.models.toy")

    def gradients(params: dict[str, np.ndarray], x: np.ndarray, target: np.ndarray, unused: int, every: int,
                  second: float) -> tuple[float, dict[str, np.ndarray | None]]:
        h = np.tanh(x @ params["layer0.weight"].T + params["layer0.bias"])
        out = h @ params["layer1.weight"].T + params["layer1.bias"]
        diff = out - target
        grad = 2.0 * (diff / every + second * out) / diff.size
        dz = (grad @ params["layer1.weight"]) * (1.0 - h * h)
        return float(np.mean(diff * diff)), {"layer0.weight": dz.T @ x, "layer0.bias": dz.sum(axis=0),
                                             "layer1.weight": grad.T @ h, "layer1.bias": grad.sum(axis=0)}

    module.gradients = gradients  # type: ignore[attr-defined]
    return module


def test_a_new_model_is_one_row_and_a_forward_per_language(availability: Availability, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A row, its forward in each language (in a copy of the scripts) and its float64 reference: both languages build it
    from the run spec, train it from its own fixtures, pass their own check against its reference, pair bitwise
    identical, and its cells carry its name; the MLP's ids are as they were."""
    monkeypatch.setitem(MODELS, TOY.name, TOY)
    monkeypatch.setitem(sys.modules, "harness.judge.models.toy", _toy_reference())
    root = copy_scripts(tmp_path / "scripts")
    (root / "py_scripts" / "models" / "toy.py").write_text(TOY_PY)
    (root / "r_scripts" / "models" / "toy.R").write_text(TOY_R)
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    require_r_torch(availability)
    spec = WorkloadSpec.from_preset("tiny", model="toy")
    with MatrixRunner(spec, ("python", "r"), timeout=300, availability=availability, staging=tmp_path / "out",
                      kept=kept_workers()) as runner:
        result = runner.run(("default", "autocast"), ("sgd",), measure=False)
    _assert_ran_and_passed(result, pairs=3)
    assert {c.id for c in result.cells} == {f"{s}-{m}-sgd@toy-{f}-cpu" for s, m in (("with_autocast", "default"), (
        "with_autocast", "autocast"), ("cuda_amp_grad_scaler", "default")) for f in ("python", "r")}
    assert all(c.weights is not None and set(c.weights.tensors) == {p.name for p in spec.parameters} for c in result.cells)
    assert result.pairs[0].details["trace"]["points"][0] > 0  # traced at the toy's own points
    assert spec.digest() != WorkloadSpec.from_preset("tiny").digest() and "sgd@toy" in _table(result)
