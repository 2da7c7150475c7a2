"""The verdict is judged by what it catches: real scripts, one small planted change each, run by the real workers.

Each test copies ``py_scripts/`` and ``r_scripts/`` (:mod:`tests.planting`), changes one line in one
copy, and runs the real matrix (both frontends, only the modes the change concerns, one timed round)
with ``$AMP_PARITY_SCRIPTS`` pointing at the copy. On one libtorch on CPU the correct scripts are
bitwise identical, so every one of these changes, each far inside the float tolerances, must come out
``diverged``; and an unchanged copy must stay ``identical``. They need R torch: they skip with the
reason when it is absent and fail under ``AMP_PARITY_REQUIRE_R=1``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.contract.modes import SCRIPTS
from harness.errors import ExitCode
from harness.files.paths import SCRIPTS_ENV
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.spec import WorkloadSpec
from tests.planting import copy_scripts, plant
from tests.support import kept_workers, require_r_torch, run_cli

#: Where each language builds the run spec's optimizer (make_optimizer(), shared by every script): the plants change it.
_R_OPTIMIZER = "do.call(constructor, c(list(params), r$args))"
_PY_OPTIMIZER = 'python["class"])(params, **args)'

#: (file, the line as it is, the line planted, the modes whose pairs it must break: a mode name runs in every script that
#: declares it, so "default" is two pairs, with_autocast's and the scaler script's own).
PLANTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "r-lr-1e-6": ("r_scripts/optimizer.R", _R_OPTIMIZER,
                  "do.call(constructor, c(list(params), modifyList(r$args, list(lr = r$args$lr * (1 + 1e-6)))))", ("default",)),
    "python-lr-1e-6": ("py_scripts/optimizer.py", _PY_OPTIMIZER, 'python["class"])(params, **(args | {"lr": args["lr"] * (1 + 1e-6)}))',
                       ("default",)),
    # optim_sgd(params, lr, momentum = 0, dampening = 0, weight_decay = 0, nesterov = FALSE) in R/optim-sgd.R
    "r-weight-decay-1e-4": (
        "r_scripts/optimizer.R", _R_OPTIMIZER, "do.call(constructor, c(list(params), modifyList(r$args, list(weight_decay = 1e-4))))",
        ("autocast",),
    ),
    # nn_leaky_relu(negative_slope = 0.01, inplace = FALSE) in R/nn-activation.R
    "r-leaky-relu": ("r_scripts/models/mlp.R", "torch::nn_relu()", "torch::nn_leaky_relu()", ("default", "autocast")),
}


def _run_copy(root: Path, spec: WorkloadSpec, modes: tuple[str, ...], availability: Availability,
              monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The matrix of ``modes`` with plain SGD, both frontends, run from the scripts under ``root``."""
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    with MatrixRunner(spec, ("python", "r"), timeout=300, availability=availability, staging=root, kept=kept_workers()) as runner:
        return runner.run(modes, ("sgd",), measure=False).to_json()  # the record calls only: the verdict reads nothing else


@pytest.mark.parametrize("name", list(PLANTS))
def test_a_planted_difference_is_diverged(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """A small change in one frontend's real script makes its pair ``diverged``, naming where the runs first differ."""
    require_r_torch(availability)
    relative, old, new, modes = PLANTS[name]
    root = copy_scripts(tmp_path)
    plant(root, relative, old, new)
    result = _run_copy(root, tiny_spec, modes, availability, monkeypatch)
    pairs = sum(mode in pair.mode_names for pair in SCRIPTS.values() for mode in modes)
    assert [c["status"] for c in result["cells"]] == ["ok", "ok"] * pairs, [c["reason"] for c in result["cells"]]
    assert len(result["pairs"]) == pairs
    assert result["judging"] == "strict"
    for pair in result["pairs"]:
        explanation = "\n".join(pair["explanation"])
        assert pair["verdict"] == "diverged", explanation
        assert pair["details"]["identity_required"] is True and pair["details"]["identical"] is False
        assert "losses first differ at step" in explanation or "losses split at step" in explanation
        assert pair["details"]["weights"]["worst_tensor"] is not None
        assert "further from float64" in explanation or "equally far" in explanation


def test_an_unchanged_copy_stays_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """The copy without a planted change is ``identical`` in the modes R runs on CPU without lifting a check (the scaler
    script's default among them: its scaler is disabled), and the low-precision-weights modes: no false alarm."""
    require_r_torch(availability)
    modes = SCRIPTS["with_autocast"].mode_names
    result = _run_copy(copy_scripts(tmp_path), tiny_spec, modes, availability, monkeypatch)
    verdicts = {p["pair"]: p["verdict"] for p in result["pairs"]}
    assert verdicts == {f"with_autocast-{m}-sgd-cpu": "identical" for m in modes} | {
        "cuda_amp_grad_scaler-default-sgd-cpu": "identical"}, [p["explanation"][0] for p in result["pairs"]]
    scaler_default = next(c for c in result["cells"] if c["id"] == "cuda_amp_grad_scaler-default-sgd-r-cpu")
    assert scaler_default["record"]["lifted_check"] is None and scaler_default["record"]["loss_scale"] is None


def test_the_cli_fails_a_run_whose_r_learning_rate_is_off_by_one_in_a_million(
    tmp_path: Path, availability: Availability, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m harness run --preset tiny`` with the lr-planted R copy prints ``diverged`` for every pair and exits 1.

    Run through ``harness.cli.main.main`` in this process (the workers it starts inherit ``$AMP_PARITY_SCRIPTS``), on two
    modes R runs on CPU (three pairs: ``default`` is both scripts'), plain SGD, with one timed round: the verdict needs the
    records only.
    """
    require_r_torch(availability)
    root = copy_scripts(tmp_path / "scripts")
    relative, old, new, _ = PLANTS["r-lr-1e-6"]
    plant(root, relative, old, new)
    out = tmp_path / "run.json"
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    done = run_cli("run", "--preset", "tiny", "--mode", "default,autocast", "--optimizer", "sgd", "--rounds", "1", "--warmup-rounds",
                   "1", "--json", str(out))
    assert done.returncode == ExitCode.FAILED, done.stdout[-3000:] + done.stderr[-2000:]
    row = next(line for line in done.stdout.splitlines() if "with_autocast-default-sgd-cpu" in line and "│" in line)
    assert "diverged" in row
    result = json.loads(out.read_text())
    verdicts = {p["pair"]: p["verdict"] for p in result["pairs"]}
    assert verdicts == dict.fromkeys(("with_autocast-default-sgd-cpu", "with_autocast-autocast-sgd-cpu",
                                      "cuda_amp_grad_scaler-default-sgd-cpu"), "diverged")
    assert all(c["status"] == "ok" for c in result["cells"])
