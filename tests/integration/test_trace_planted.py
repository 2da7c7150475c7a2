"""The trace names where two runs part, and known differences match only their own signature: shown with planted changes.

Each test copies ``py_scripts/`` and ``r_scripts/`` (:mod:`tests.planting`), plants at most one narrow
change in one copy, and runs the real matrix's record calls with every pair traced
(``runner.run(modes, measure=False, trace_all=True)``). On one libtorch on CPU the unchanged scripts are
bitwise identical in every traced point, except the clip pair, whose one known difference
(``clip-coef-reciprocal``: 1 ULP at ``clip.coef``) must be matched. What this proves:

* a change in the forward, the loss, the learning rate or the scaler's growth factor is ``diverged`` and
  the trace names the first (step, point) it touches, with the last point still identical before it;
* a look-alike of the known difference (the same point and step, 14306 ULPs instead of 1) is ``diverged``,
  never ``known_difference``, and says why the entry does not match;
* a pair that no longer shows the known difference where its trigger holds is ``stale_known_difference``
  and fails the run;
* an inf injected after ``unscale_()`` is seen by R torch's scaler (which checks the gradients again in
  ``step()``) and not by PyTorch's, and the trace names ``scaler.found_inf`` at that step;
* the R scaler's CPU lift is refused when R torch's method differs from the one it was written for, and
  ``scaler_lift=False`` leaves R torch's own refusal.

They need R torch: they skip with the reason when it is absent and fail under ``AMP_PARITY_REQUIRE_R=1``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cli.outcome import exit_status
from harness.contract.modes import SCRIPTS, all_mode_names
from harness.files.paths import SCRIPTS_ENV
from harness.model.pair_trace import PairTrace
from harness.model.result import CellResult, MatrixResult
from harness.model.verdicts import PairVerdict
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.spec import WorkloadSpec
from tests.planting import copy_scripts, plant
from tests.support import kept_workers, require_r_torch

SCALER_R = "r_scripts/cuda_amp_grad_scaler.R"
#: The R scaler every script that scales shares (and its CPU lift).
SHARED_SCALER_R = "r_scripts/scaler.R"

Plant = tuple[str, str, str]


def _run(root: Path, spec: WorkloadSpec, modes: tuple[str, ...], availability: Availability, monkeypatch: pytest.MonkeyPatch,
         plants: tuple[Plant, ...] = (), **runner_options: Any) -> MatrixResult:
    """The record calls of ``modes`` with plain SGD, both frontends, every pair traced, from a copy of the scripts under
    ``root`` with ``plants``."""
    copy_scripts(root)
    for relative, old, new in plants:
        plant(root, relative, old, new)
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    with MatrixRunner(spec, ("python", "r"), timeout=300, availability=availability, staging=root, **runner_options,
                      kept=kept_workers()) as runner:
        return runner.run(modes, ("sgd",), measure=False)


def _script(mode: str) -> str:
    """The script these tests mean by a mode name: with_autocast's ``default``, and the one script of each other mode."""
    return "with_autocast" if mode in SCRIPTS["with_autocast"].mode_names else "cuda_amp_grad_scaler"


def _pair(result: MatrixResult, mode: str, script: str | None = None) -> PairVerdict:
    return next(p for p in result.pairs if p.mode == mode and p.script == (script or _script(mode)))


def _cell(result: MatrixResult, frontend: str, mode: str, script: str | None = None) -> CellResult:
    return next(c for c in result.cells if c.frontend == frontend and c.mode == mode and c.script == (script or _script(mode)))


def _trace(pair: PairVerdict) -> PairTrace:
    return PairTrace.from_json(pair.details["trace"])


@pytest.fixture(scope="module")
def unchanged(tmp_path_factory: pytest.TempPathFactory, tiny_spec: WorkloadSpec, availability: Availability) -> Iterator[MatrixResult]:
    """Every mode of both scripts of an unchanged copy, plain SGD, traced: one runner for the tests that read it."""
    require_r_torch(availability)
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _run(tmp_path_factory.mktemp("unchanged"), tiny_spec, all_mode_names(), availability, monkeypatch)


#: Steps 0-2 only (one epoch of 3 batches).
SHORTER = {"epochs": 1, "num_batches": 3, "overflow_steps": ()}  # 3 steps: the preset's overflow (step 9) is past them

#: (file, the text as it is, the text planted, mode, first differing (step, point), last identical (step, point)).
DIVERGING: dict[str, tuple[str, str, str, str, tuple[int, str], tuple[int, str]]] = {
    # nn_leaky_relu(negative_slope = 0.01, inplace = FALSE) in R/nn-activation.R
    "r-forward-leaky-relu": ("r_scripts/models/mlp.R", "torch::nn_relu()", "torch::nn_leaky_relu()", "default",
                             (0, "forward.relu0"), (0, "forward.layer0")),
    # a sum is 4096 times the mean at tiny (32 x 128): R's loss reaches inf at step 3, so this one runs 3 steps (SHORTER)
    "r-loss-sum": ("r_scripts/loop.R", "nn_mse_loss()", 'nn_mse_loss(reduction = "sum")', "autocast",
                   (0, "loss"), (0, "forward.layer2")),
    # make_optimizer() in py_scripts/optimizer.py builds every script's optimizer from the run spec's row
    "python-lr-1e-6": ("py_scripts/optimizer.py", 'python["class"])(params, **args)',
                       'python["class"])(params, **(args | {"lr": args["lr"] * (1 + 1e-6)}))', "default",
                       (0, "param.stepped.layer0.weight"), (0, "grad.backward.layer2.bias")),
    # tiny: growth_interval 4, so the scale first grows in update() of step 3 (65536 -> 131072, r 196608)
    "r-growth-factor-1.5x": (SHARED_SCALER_R, "growth_factor = spec$growth_factor,", "growth_factor = spec$growth_factor * 1.5,",
                             "autocast_scaler", (3, "scaler.scale"), (3, "param.stepped.layer2.bias")),
}


#: The values (python, r) at the first difference where they are exact: the first grown scale, 65536 x 2 and x 3.
WORST_VALUES = {"r-growth-factor-1.5x": (131072.0, 196608.0)}


@pytest.mark.parametrize("name", list(DIVERGING))
def test_a_planted_change_is_traced_to_its_first_point(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """A planted change is ``diverged`` and the trace names the first (step, point) it touches and the last identical one."""
    require_r_torch(availability)
    relative, old, new, mode, first_at, last_at = DIVERGING[name]
    spec = tiny_spec.replace(**SHORTER) if name == "r-loss-sum" else tiny_spec
    result = _run(tmp_path, spec, (mode,), availability, monkeypatch, ((relative, old, new),))
    pair = _pair(result, mode)
    assert pair.verdict == "diverged", pair.explanation
    trace = _trace(pair)
    first = trace.first_difference
    assert first is not None and (first.step, first.point) == first_at, first
    assert trace.last_identical == last_at
    # a tensor's distance is measured by the run's second pass (both tensors kept whole), a one-element point's from its values
    measured = trace.detail if first.max_distance is None else first
    assert first.kind == "bytes" and measured is not None and (measured.step, measured.point) == first_at
    assert measured.max_distance is not None and measured.max_distance >= 1
    first = measured
    assert f"first differs at step {first_at[0]}, {first_at[1]}" in pair.explanation[0]
    assert pair.details["known_difference"] is None
    if name in WORST_VALUES:
        assert first.worst_values == WORST_VALUES[name]


def test_a_look_alike_of_the_known_difference_is_diverged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """R's clip norm times 1.001 first differs where the known difference does, but by more than its 1 ULP: ``diverged``."""
    require_r_torch(availability)
    # both the clip call and the traced coefficient read spec$clip_max_norm: one line changes both
    start = "  loop <- start_loop(spec, mode, with_scaler = TRUE)\n"
    planted = "  spec$clip_max_norm <- spec$clip_max_norm * 1.001\n" + start
    result = _run(tmp_path, tiny_spec, ("autocast_scaler_clip",), availability, monkeypatch, ((SCALER_R, start, planted),))
    pair = _pair(result, "autocast_scaler_clip")
    explanation = "\n".join(pair.explanation)
    assert pair.verdict == "diverged", explanation
    assert pair.details["known_difference"] is None
    trace = _trace(pair)
    first = trace.first_difference
    assert first is not None and (first.step, first.point, first.kind) == (0, "clip.coef", "bytes")
    assert first.max_distance is not None and first.max_distance > 1
    assert trace.last_identical == (0, "clip.total_norm")
    assert (f"not known difference clip-coef-reciprocal: its first difference is {first.max_distance} apart, "
            "beyond the entry's 1") in explanation


def test_the_known_difference_is_matched(unchanged: MatrixResult) -> None:
    """The unchanged clip pair is ``known_difference`` (``clip-coef-reciprocal``): 1 ULP at step 0's ``clip.coef``, the norm equal."""
    pair = _pair(unchanged, "autocast_scaler_clip")
    assert pair.verdict == "known_difference", pair.explanation
    assert pair.details["known_difference"] == ["clip-coef-reciprocal"] and pair.details["proven"]
    assert pair.details["stale_known_difference"] is None
    trace = _trace(pair)
    first = trace.first_difference
    assert first is not None and (first.step, first.point, first.kind, first.max_distance) == (0, "clip.coef", "bytes", 1)
    assert (first.elements, first.differing) == (1, 1)
    assert trace.last_identical == (0, "clip.total_norm")
    # every step but the preset's overflow (step 9): an infinite norm's coefficient is exactly 0, which cannot round apart
    assert trace.triggers["clip_engaged"] == tuple(s for s in range(20) if s != 9)
    assert "known difference clip-coef-reciprocal: first differs at step 0, clip.coef (1 ULP)" in pair.explanation[0]
    assert exit_status(unchanged) == 0


#: Each unchanged pair but the clip pair, with its traced points per step: 2 batch + 5 forward + loss + 6 grads + 6 params,
#: + the scaled loss where the loss goes through a scale (a disabled GradScaler's passes it through, and is traced too),
#: + 6 unscaled grads for the static scale, + found_inf, scale and growth tracker for a dynamic scaler.
UNCHANGED_POINTS = {("with_autocast", "default"): 20, ("with_autocast", "autocast"): 20, ("with_autocast", "lowp_weights"): 20,
                    ("with_autocast", "lowp_weights_scaled"): 27, ("cuda_amp_grad_scaler", "default"): 21,
                    ("cuda_amp_grad_scaler", "autocast_scaler"): 24}


@pytest.mark.parametrize(("script", "mode"), list(UNCHANGED_POINTS))
def test_the_unchanged_pairs_are_identical_in_every_point(unchanged: MatrixResult, script: str, mode: str) -> None:
    """Without a plant every pair but the clip pair is ``identical`` (the low-precision-weights modes and the scaler script's
    own default too) and every traced point of every step is bitwise equal."""
    pair = _pair(unchanged, mode, script)
    assert pair.verdict == "identical", pair.explanation
    trace = _trace(pair)
    # ... and the run's record after them (issue 37): the loss at every step, the scale and skip at every step of a
    # dynamic scaler, the two dtypes and the six final-weights tensors.
    points = 20 * UNCHANGED_POINTS[(script, mode)] + 20 + (40 if mode == "autocast_scaler" else 0) + 2 + 6
    assert trace.points == (points, points)
    assert trace.identical_points == points and trace.first_difference is None
    assert trace.last_identical == (19, "record.weights.layer2.weight")  # the tensors in layer order, bias first


def test_every_mode_of_both_scripts_ran_once_with_plain_sgd(unchanged: MatrixResult) -> None:
    """A mode name runs in every script that declares it: seven pairs, ``default`` twice (each script's own)."""
    assert sorted((p.script, p.mode, p.optimizer) for p in unchanged.pairs) == sorted(
        [(s, m, "sgd") for s, m in UNCHANGED_POINTS] + [("cuda_amp_grad_scaler", "autocast_scaler_clip", "sgd")])


def test_a_stale_known_difference_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """R clipping computed as PyTorch does makes the clip pair bitwise identical while clipping engages: the entry is stale.

    The copy patches R's clip itself, as the entry's switch does, without saying so (its record lists no switch): the
    record check cannot see that, but the trace can, and the entry then describes nothing."""
    require_r_torch(availability)
    cheat = ('  loop$clip_grad_norm <- binding_function(spec, "nn_utils_clip_grad_norm_")\n'
             '  loop$clip_grad_norm <- tryCatch(patched_function(loop$clip_grad_norm, list(list(id = "cheat", kind = "switch", '
             'target = "nn_utils_clip_grad_norm_", old = "clip_coef <- max_norm/(total_norm + 1e-06)", '
             'new = "clip_coef <- (total_norm + 1e-06)$reciprocal() * max_norm")), "nn_utils_clip_grad_norm_"), '
             'error = function(err) loop$clip_grad_norm)\n')
    plants = (("r_scripts/loop.R", '  loop$clip_grad_norm <- binding_function(spec, "nn_utils_clip_grad_norm_")\n', cheat),)
    result = _run(tmp_path, tiny_spec, ("autocast_scaler_clip",), availability, monkeypatch, plants)
    pair = _pair(result, "autocast_scaler_clip")
    assert pair.verdict == "stale_known_difference", pair.explanation
    assert pair.details["stale_known_difference"] == "clip-coef-reciprocal" and pair.details["known_difference"] is None
    assert "remove or update entry clip-coef-reciprocal" in pair.explanation[0]
    assert "its trigger clip_engaged held at 19 step(s) from step 0" in pair.explanation[0]
    trace = _trace(pair)
    # 760 traced points in the loop, and the run's record after them (20 losses, scales and skips, 2 dtypes, 6 tensors)
    assert trace.first_difference is None and trace.identical_points == 760 + 68 == trace.points[0]
    assert exit_status(result) == 1


# PyTorch's final weights hold -inf: harness/judge/weight_findings.py squares nan_to_num(-inf) = -1.8e308 (a numpy overflow warning)
def test_an_inf_after_unscale_is_seen_by_r_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """An inf put in after ``unscale_()`` at step 3 makes R's scaler skip it while PyTorch's steps on it: traced to ``scaler.found_inf``."""
    require_r_torch(availability)
    spec = tiny_spec.replace(overflow_steps=(3,), overflow_point="unscale")
    result = _run(tmp_path, spec, ("autocast_scaler",), availability, monkeypatch)
    python, r = (_cell(result, side, "autocast_scaler").record for side in ("python", "r"))
    assert python is not None and r is not None
    # R torch's step() checks the gradients again: it skips step 3 and backs off, and training goes on
    assert [k for k, skipped in enumerate(r.skipped) if skipped] == [3]
    assert r.loss_scale[3] == 32768 and math.isfinite(r.final_loss)
    # PyTorch's step() trusts unscale_()'s check: the inf reaches the weights, and step 3's update grows the scale
    assert python.loss_scale[3] == 131072 and not python.skipped[3]
    assert not any(math.isfinite(loss) for loss in python.losses[4:])
    assert [k for k, skipped in enumerate(python.skipped) if skipped] == list(range(4, 20))
    pair = _pair(result, "autocast_scaler")
    assert pair.verdict == "diverged", pair.explanation
    trace = _trace(pair)
    first = trace.first_difference
    assert first is not None and (first.step, first.point) == (3, "scaler.found_inf")
    assert first.worst_values == (0.0, 1.0)
    assert trace.last_identical == (3, "grad.unscaled.layer2.bias")


@pytest.fixture(scope="module")
def refused_lift(tmp_path_factory: pytest.TempPathFactory, tiny_spec: WorkloadSpec, availability: Availability) -> Iterator[MatrixResult]:
    """The scaler pair from a copy whose ``expected_scale_method`` no longer matches R torch's (its first line changed)."""
    require_r_torch(availability)
    edit = (SHARED_SCALER_R, '  "function (outputs) ",', '  "function (outputs, extra) ",')
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _run(tmp_path_factory.mktemp("refused"), tiny_spec, ("autocast_scaler",), availability, monkeypatch, (edit,))


def test_the_lift_is_refused_when_r_torchs_method_differs(refused_lift: MatrixResult) -> None:
    """An ``expected_scale_method`` that no longer matches R torch's method makes the R scaler cell unsupported, naming the line."""
    assert _cell(refused_lift, "python", "autocast_scaler").status.value == "ok"
    r = _cell(refused_lift, "r", "autocast_scaler")
    assert r.status.value == "unsupported"
    reason = " ".join((r.reason or "").split())
    assert "its `scale()` method differs from the one the lift was written for (line 1: \"function (outputs) \")" in reason
    assert "update `expected_scale_method` in r_scripts/scaler.R" in reason
    assert _pair(refused_lift, "autocast_scaler").verdict == "unsupported"


def test_the_refused_lift_reason_is_one_line(refused_lift: MatrixResult) -> None:
    """The unsupported reason of a refused lift is one line, as a table cell shows it."""
    reason = _cell(refused_lift, "r", "autocast_scaler").reason or ""
    assert "differs from the one the lift was written for" in reason and "\n" not in reason


def test_without_the_lift_r_torch_refuses_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """``scaler_lift=False`` leaves R torch's own CUDA-only check: the R scaler cell is unsupported with R torch's message."""
    require_r_torch(availability)
    result = _run(tmp_path, tiny_spec, ("autocast_scaler",), availability, monkeypatch, scaler_lift=False)
    r = _cell(result, "r", "autocast_scaler")
    assert r.status.value == "unsupported"
    assert r.reason == '`outputs` device must be "cuda", got "cpu".'
    assert _cell(result, "python", "autocast_scaler").status.value == "ok"
    assert _pair(result, "autocast_scaler").verdict == "unsupported"
