"""The loop features (harness/workload/features.py) through the real scripts: unchanged they are bitwise identical with
plain SGD and each cell passes its own float64 check; a change planted in one language is ``diverged`` at the point where
it begins.

Plain SGD is bitwise identical between the bindings in the plain loop, so whatever differs first in these pairs is the
feature itself. The plants are the issue's: a scheduler hyperparameter (R's ``lr_step`` gamma, R's plateau factor, the
declared lambda's decay in R and in Python), an accumulation count off by one (Python's ``every``), a clip value (R's
``clip_grad_value_``) and a norm type (R's inf -> 2 in ``clip_norm_inf``); two more act on the AMP examples' loops: an
explicit new scale (Python's ``update(new_scale)``) and a gradient penalty's weight (R's). The schedulers that stop R (a
bfloat16 loss fed to the plateau scheduler, one-cycle over two param groups) are their proven R torch bugs. They need R
torch: they skip with the reason when it is absent and fail under ``AMP_PARITY_REQUIRE_R=1``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.files.paths import SCRIPTS_ENV
from harness.model.pair_trace import PairTrace
from harness.model.result import MatrixResult
from harness.model.verdicts import PairVerdict
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec
from tests.planting import copy_scripts, plant
from tests.support import kept_workers, require_r_torch

Plant = tuple[str, str, str]


def _run(root: Path, spec: WorkloadSpec, modes: tuple[str, ...], features: tuple[str, ...], availability: Availability,
         monkeypatch: pytest.MonkeyPatch, plants: tuple[Plant, ...] = ()) -> MatrixResult:
    """The traced record calls of ``features`` in ``modes`` with plain SGD, from a copy of the scripts with ``plants``."""
    copy_scripts(root)
    for relative, old, new in plants:
        plant(root, relative, old, new)
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    with MatrixRunner(spec, ("python", "r"), timeout=300, availability=availability, staging=root, kept=kept_workers()) as runner:
        return runner.run(modes, ("sgd",), measure=False, features=features)


def _pair(result: MatrixResult, script: str, mode: str, feature: str) -> PairVerdict:
    return next(p for p in result.pairs if (p.script, p.mode, p.feature) == (script, mode, feature))


def test_unchanged_features_are_identical_and_pass_their_own_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """Each feature, unchanged, with plain SGD in the scaler mode: bitwise identical pairs, and cells within their bound
    of the float64 reference that follows the feature (a reference that ignored the schedule, the accumulation or the
    clamp would put them far outside it)."""
    require_r_torch(availability)
    features = ("lr_step", "lr_cosine", "lr_multiplicative", "lr_lambda", "lr_lambda_groups", "lr_reduce_on_plateau",
                "accumulate", "clip_value")
    result = _run(tmp_path, tiny_spec, ("autocast_scaler",), features, availability, monkeypatch)
    assert {p.feature for p in result.pairs} == set(features)
    for pair in result.pairs:
        if pair.feature == "clip_value":  # the preset's overflow, clamped by the clip: R's step checks the grads again
            assert pair.verdict == "known_difference" and pair.details["proven"], pair.explain()
            assert pair.details["known_difference"] == ["scaler-step-rechecks-grads"], pair.explain()
        else:
            assert pair.verdict == "identical", pair.explain()
    for cell in result.cells:
        excused = cell.feature == "clip_value" and cell.frontend == "r"  # its scale history, from the bug's step
        assert cell.verdict is not None and cell.verdict.outcome == ("excused" if excused else "pass"), (cell.id, cell.verdict)


#: R's make_scheduler() call of the row's function (r_scripts/features.R), where a plant changes one argument.
_R_SCHEDULER = "do.call(binding_function(spec, r[[\"function\"]]), c(list(opt), args))"
#: The iteration after which lr_reduce_on_plateau first reduces the lr in tiny with plain SGD (patience 2: iteration 3's
#: loss is 3 % below the best, those of iterations 4 to 6 are not).
PLATEAU = 6


def test_the_amp_examples_loops_are_identical_or_a_proven_r_torch_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """The AMP examples' loops with plain SGD in the scaler mode: two losses and two optimizers (with an explicit new
    scale), a gradient penalty and a custom autograd function are bitwise identical and pass their own check; the scale
    of a list of losses stops R, proven by its switch (R torch bug ``scaler-scale-list``); a layer unused on odd steps
    with each binding's zero_grad() is identical (a zero gradient moves nothing in plain SGD)."""
    require_r_torch(availability)
    features = ("multi_optimizer", "multi_optimizer_list", "penalty", "custom_function", "sometimes_used_default")
    result = _run(tmp_path, tiny_spec, ("autocast_scaler",), features, availability, monkeypatch)
    assert {p.feature for p in result.pairs} == set(features)
    for pair in result.pairs:
        if pair.feature == "multi_optimizer_list":
            assert pair.verdict == "known_difference" and pair.details["proven"], pair.explain()
            assert pair.details["known_difference"] == ["scaler-scale-list"], pair.explain()
        else:
            assert pair.verdict == "identical", pair.explain()
    for cell in result.cells:
        if cell.feature == "multi_optimizer_list" and cell.frontend == "r":
            assert cell.reason is not None and "'self$.scale' is not a function" in cell.reason
        else:
            assert cell.verdict is not None and cell.verdict.outcome == "pass", (cell.id, cell.verdict)


#: (file, the text as it is, the text planted, script, mode, feature, first differing (step, point), last identical (step, point)).
DIVERGING: dict[str, tuple[str, str, str, str, str, str, tuple[int, str], tuple[int, str]]] = {
    # lr_step's gamma 0.7 -> 0.71 in R: the scheduler's first decay is its step after iteration 3 (step_size 4)
    "r-scheduler-gamma": ("r_scripts/features.R", _R_SCHEDULER, _R_SCHEDULER.replace("args))", "modifyList(args, list(gamma = 0.71))))"),
                          "with_autocast", "default", "lr_step", (3, "optim.lr.group0"), (3, "scheduler.last_epoch")),
    # lr_reduce_on_plateau's factor 0.5 -> 0.6 in R: the first reduction, after iteration PLATEAU, sets another lr
    "r-plateau-factor": ("r_scripts/features.R", _R_SCHEDULER, _R_SCHEDULER.replace("args))", "modifyList(args, list(factor = 0.6))))"),
                         "with_autocast", "default", "lr_reduce_on_plateau", (PLATEAU, "optim.lr.group0"),
                         (PLATEAU, "scheduler.cooldown_counter")),
    # lr_multiplicative's declared decay 0.01 -> 0.011 in Python: the factor of the scheduler's first step differs
    "python-multiplicative-decay": ("py_scripts/features.py", 'warmup, decay = declared["warmup"], declared["decay"]',
                                    'warmup, decay = declared["warmup"], declared["decay"] * 1.1',
                                    "with_autocast", "default", "lr_multiplicative", (0, "optim.lr.group0"),
                                    (0, "scheduler.last_epoch")),
    # lr_lambda's declared decay 0.1 -> 0.11 in R: factor(0) has no decay, factor(1) does, at the scheduler's first step
    "r-lambda-decay": ("r_scripts/features.R", "decay <- declared$decay", "decay <- declared$decay * 1.1",
                       "with_autocast", "default", "lr_lambda", (0, "optim.lr.group0"), (0, "scheduler.last_epoch")),
    # every 2 -> 3 in Python: the first micro-batch's loss is divided by 3, not 2
    "python-accumulation-off-by-one": ("py_scripts/features.py", 'loss / loop.spec["feature"]["args"]["every"]',
                                       'loss / (loop.spec["feature"]["args"]["every"] + 1)',
                                       "cuda_amp_grad_scaler", "autocast_scaler", "accumulate", (0, "loss.scaled"), (0, "loss")),
    # clip_value 0.002 -> 0.003 in R: the first clamp leaves layer0's largest gradients (0.0023) as they are
    "r-clip-value": ("r_scripts/features.R", "clip_value = loop$spec$feature$args$clip_value)",
                     "clip_value = loop$spec$feature$args$clip_value * 1.5)",
                     "cuda_amp_grad_scaler", "autocast_scaler", "clip_value", (0, "grad.clipped.layer0.weight"),
                     (0, "grad.unscaled.layer2.bias")),
    # clip_norm_inf's norm_type inf -> 2 in R: the first total norm is the 2-norm, not the largest element
    "r-clip-norm-type": ("r_scripts/features.R", "if (clip_norm$inf_norm == 1) Inf else 2", "if (clip_norm$inf_norm == 1) 2 else 2",
                         "cuda_amp_grad_scaler", "autocast_scaler", "clip_norm_inf", (0, "clip.total_norm"),
                         (0, "grad.unscaled.layer2.bias")),
    # multi_optimizer's explicit new scale 2^20 -> 2^21 in Python: the update at step 14 sets another scale
    "python-new-scale": ("py_scripts/features.py", 'loop.scaler.update(float(multi["new_scale"]))',
                         'loop.scaler.update(float(multi["new_scale"]) * 2)', "cuda_amp_grad_scaler", "autocast_scaler",
                         "multi_optimizer", (14, "scaler.scale"), (14, "param.stepped.layer2.bias")),
    # the gradient penalty's weight 0.1 -> 0.15 in R: the penalized loss differs where the norm is added to it
    "r-penalty-weight": ("r_scripts/features.R", "total <- loss + loop$spec$feature$args$weight * gradient_norm(",
                         "total <- loss + loop$spec$feature$args$weight * 1.5 * gradient_norm(", "cuda_amp_grad_scaler", "autocast_scaler",
                         "penalty", (0, "loss.scaled"), (0, "penalty.grad_norm")),
}


@pytest.mark.parametrize("name", list(DIVERGING))
def test_a_planted_feature_change_is_diverged_where_it_begins(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """A feature's hyperparameter changed in one language: ``diverged``, first differing at the point it changes."""
    require_r_torch(availability)
    relative, old, new, script, mode, feature, first_at, last_at = DIVERGING[name]
    result = _run(tmp_path, tiny_spec, (mode,), (feature,), availability, monkeypatch, ((relative, old, new),))
    pair = _pair(result, script, mode, feature)
    assert pair.verdict == "diverged", pair.explain()
    trace = PairTrace.from_json(pair.details["trace"])
    first = trace.first_difference
    assert first is not None and (first.step, first.point) == first_at, first
    assert trace.last_identical == last_at
    assert pair.details["known_difference"] is None


def test_a_frozen_layer_stops_rs_scaler_and_the_bug_entry_proves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """Loop feature ``frozen`` with plain SGD: without a scaler the pair is identical; with one, R stops on the frozen
    parameter's undefined gradient, and the reconciled run (R's scaler skipping it) is bitwise identical: the pair is the
    proven R torch bug ``scaler-unscale-undefined-grad``."""
    require_r_torch(availability)
    result = _run(tmp_path, tiny_spec, ("default", "autocast_scaler"), ("frozen",), availability, monkeypatch)
    assert _pair(result, "with_autocast", "default", "frozen").verdict == "identical"
    scaled = _pair(result, "cuda_amp_grad_scaler", "autocast_scaler", "frozen")
    assert scaled.verdict == "known_difference", scaled.explain()
    assert scaled.details["known_difference"] == ["scaler-unscale-undefined-grad"] and scaled.details["proven"]
    r_cell = next(c for c in result.cells if c.id == "cuda_amp_grad_scaler-autocast_scaler-sgd+frozen-r-cpu")
    assert r_cell.reason is not None and "tensor does not have a device" in r_cell.reason


def test_the_schedulers_that_stop_r_are_their_proven_bugs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """lr_reduce_on_plateau fed a bfloat16 loss (weights in bfloat16) stops R in as.numeric(), and lr_one_cycle over two
    param groups stops R's initialize: each pair is its R torch bug, proven (the reconciled run bitwise identical); the
    plateau scheduler fed a float32 loss is identical."""
    require_r_torch(availability)
    copy_scripts(tmp_path)
    monkeypatch.setenv(SCRIPTS_ENV, str(tmp_path))
    with MatrixRunner(tiny_spec, ("python", "r"), timeout=300, availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("lowp_weights", "autocast_scaler"), ("sgd", "ignite_sgd"), measure=False,
                            features=("lr_reduce_on_plateau", "lr_one_cycle_groups"))
    assert _pair(result, "cuda_amp_grad_scaler", "autocast_scaler", "lr_reduce_on_plateau").verdict == "identical"
    for script, mode, feature, bug, error in (
        ("with_autocast", "lowp_weights", "lr_reduce_on_plateau", "plateau-bfloat16-metric", "dtype 'BFloat16' not handled"),
        ("cuda_amp_grad_scaler", "autocast_scaler", "lr_one_cycle_groups", "one-cycle-max-momentum-index", "subscript out of bounds"),
    ):
        pair = _pair(result, script, mode, feature)
        assert pair.verdict == "known_difference" and pair.details["proven"], pair.explain()
        assert pair.details["known_difference"] == [bug], pair.explain()
        r_cell = next(c for c in result.cells if (c.script, c.mode, c.feature, c.frontend) == (script, mode, feature, "r"))
        assert r_cell.reason is not None and error in r_cell.reason


def test_param_groups_with_adam_are_the_known_first_moment_difference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """Loop feature ``param_groups`` with R's Adam: R names its in-step points (bias corrections, ...) within their param
    group, so the pair's first difference is Adam's own known one, proven; plain SGD in two groups is identical."""
    require_r_torch(availability)
    copy_scripts(tmp_path)
    monkeypatch.setenv(SCRIPTS_ENV, str(tmp_path))
    with MatrixRunner(tiny_spec, ("python", "r"), timeout=300, availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("autocast_scaler",), ("sgd", "adam"), measure=False, features=("param_groups",))
    by_optimizer = {p.optimizer: p for p in result.pairs}
    assert by_optimizer["sgd"].verdict == "identical", by_optimizer["sgd"].explain()
    adam = by_optimizer["adam"]
    assert adam.verdict == "known_difference" and adam.details["known_difference"] == ["first-moment-lerp"], adam.explain()


def test_two_optimizers_with_rs_adam_name_their_in_step_points_in_both_scripts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """Loop feature ``multi_optimizer`` with R's Adam, whose step traces points inside itself (its bias corrections), named
    by the parameters of the optimizer stepping: ``with_autocast.R`` stepped the first optimizer under the second's names
    (the last built), and the traced record call failed, ``subscript out of bounds`` (``harness search``, seed 54; the
    matrix's covering design runs the feature in the scaler script only, which named them). Both scripts: Adam's own
    known difference, proven, in each."""
    require_r_torch(availability)
    copy_scripts(tmp_path)
    monkeypatch.setenv(SCRIPTS_ENV, str(tmp_path))
    with MatrixRunner(tiny_spec, ("python", "r"), timeout=300, availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        cells = [Cell(f, script, mode, "adam", "cpu", "multi_optimizer")
                 for script, mode in (("with_autocast", "default"), ("cuda_amp_grad_scaler", "autocast_scaler")) for f in ("python", "r")]
        result = runner.run(("default", "autocast_scaler"), ("adam",), measure=False, features=("multi_optimizer",), only_cells=cells)
    assert all(c.ok for c in result.cells), [c.reason for c in result.cells]
    assert [(p.script, p.verdict, bool(p.details.get("proven"))) for p in result.pairs] == [
        ("with_autocast", "known_difference", True), ("cuda_amp_grad_scaler", "known_difference", True)], \
        [p.explain() for p in result.pairs]
