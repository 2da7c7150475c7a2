"""Known differences are proven by reconciliation, and their verdicts cannot be fooled: shown with planted changes.

Each test copies ``py_scripts/`` and ``r_scripts/`` (:mod:`tests.planting`), plants at most one real change in one
language's copy, and runs the real record calls (traced, with their reconciled runs) of one or two pairs. What this
proves (issues 25 and 26):

* the clean scripts give the clip pair ``known_difference``, proven: with R's switch on, the whole run is identical;
* R's clip called with ``max_norm`` 0.1 % larger is ``diverged`` and names ``clip.coef`` at step 0: the point is the
  value the clip used, and the reconciled run still differs;
* a change to one language's optimizer hyperparameters (Adam's beta1 in R) is ``diverged``, naming the optimizer-state
  point where it begins, even though its first point has a known difference's signature (first-moment-lerp);
* an R torch bug far beyond the tolerance (SGD's weight decay) is a proven ``known_difference``, and a crash (ASGD's
  averaging) is one too, its cell excused from the exit status;
* an entry as broad as the list allows cannot approve a planted change (R's lr one part in 10^6 larger);
* the same cells give the same verdicts whatever the order of the frontends, and as two slices merged.

They need R torch: they skip with the reason when it is absent and fail under ``AMP_PARITY_REQUIRE_R=1``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.cli.outcome import exit_status
from harness.files.paths import SCRIPTS_ENV
from harness.judge.divergence import read_cell_trace
from harness.model.record_points import records_only
from harness.model.result import MatrixResult
from harness.model.verdicts import PairVerdict
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.store.merge import merge_results
from harness.store.result_file import load_result, save_result
from harness.workload.spec import WorkloadSpec
from tests.planting import copy_scripts, plant
from tests.support import KNOWN_DIFFERENCE_ENTRY, kept_workers, require_r_torch

SCALER_R = "r_scripts/cuda_amp_grad_scaler.R"
CLIP = "autocast_scaler_clip"


def _run(root: Path, monkeypatch: pytest.MonkeyPatch, availability: Availability, modes: tuple[str, ...],
         optimizers: tuple[str, ...], plants: tuple[tuple[str, str, str], ...] = (), frontends: tuple[str, ...] = ("python", "r"),
         **options: Any) -> MatrixResult:
    """The record calls (traced, reconciled) of ``modes`` × ``optimizers`` from a copy of the scripts with ``plants``."""
    require_r_torch(availability)
    if not (root / "py_scripts").exists():
        copy_scripts(root)
        for relative, old, new in plants:
            plant(root, relative, old, new)
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    staging = options.setdefault("staging", root / "staging")
    staging.mkdir(parents=True, exist_ok=True)
    with MatrixRunner(WorkloadSpec.from_preset("tiny"), frontends, timeout=300, availability=availability, **options,
                      kept=kept_workers()) as runner:
        return runner.run(modes, optimizers, measure=False)


def _pair(result: MatrixResult, mode: str, optimizer: str) -> PairVerdict:
    return next(p for p in result.pairs if p.mode == mode and p.optimizer == optimizer)


def test_the_clip_pair_is_a_proven_known_difference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, availability: Availability) -> None:
    """Clean scripts: the clip pair differs at clip.coef by 1 ULP, and R's switch makes the whole run identical."""
    result = _run(tmp_path, monkeypatch, availability, (CLIP,), ("sgd",))
    pair = _pair(result, CLIP, "sgd")
    assert pair.verdict == "known_difference" and pair.details["proven"], pair.explanation
    assert pair.details["known_difference"] == ["clip-coef-reciprocal"]
    assert "r-clip-coef-reciprocal" in pair.details["trace"]["switches"]
    assert exit_status(result) == 0
    # issue 47: its reconciled run's records match python's, so it ran untraced: its trace holds its records only
    [r_cell] = [c for c in result.cells if c.frontend == "r" and c.pair == pair.pair]
    assert r_cell.reconciled is not None and records_only(read_cell_trace(r_cell.reconciled))
    # ... and its time is the cell's own untraced run (what the limit adds up; side by side, no round times it again)
    assert r_cell.untraced_seconds is not None and 0 < r_cell.untraced_seconds == r_cell.own_run_seconds
    # lean (docs/results keeps no .safetensors): without its weights and trace files the result is judged from what it
    # stored (every traced pair's trace with its reconciliation, the weights' digests and measurements), the same
    saved = tmp_path / "lean" / "clip.json"
    saved.parent.mkdir()
    save_result(result, saved)
    for file in tmp_path.rglob("*.safetensors"):  # wherever the saved result points (the run's staging, or its weights folder)
        file.unlink()
    lean = load_result(saved)
    assert [(p.pair, p.verdict, p.details.get("proven")) for p in lean.pairs] == [
        (p.pair, p.verdict, p.details.get("proven")) for p in result.pairs]
    assert any(w.startswith("trace files not present for 2 cell(s)") for w in lean.warnings), lean.warnings
    assert exit_status(lean) == 0


def test_a_clip_called_with_another_max_norm_is_diverged_at_its_own_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                          availability: Availability) -> None:
    """R's clip with max_norm * 1.001 (0.1 % on every clipped gradient) is diverged, naming clip.coef at step 0."""
    planted = (SCALER_R, "max_norm = loop$spec$clip_max_norm)", "max_norm = loop$spec$clip_max_norm * 1.001)")
    result = _run(tmp_path, monkeypatch, availability, (CLIP,), ("sgd",), (planted,))
    pair = _pair(result, CLIP, "sgd")
    assert pair.verdict == "diverged", pair.explanation
    first = pair.details["trace"]["first_difference"]
    assert (first["step"], first["point"]) == (0, "clip.coef")
    assert first["max_distance"] > 1000  # the value the clip used: 0.1 % apart, not 1 ULP
    assert "not known difference clip-coef-reciprocal" in "\n".join(pair.explanation)
    assert exit_status(result) == 1


def test_a_planted_optimizer_hyperparameter_is_diverged_at_the_optimizer_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                               availability: Availability) -> None:
    """R's Adam with beta1 one part in 10^4 larger: diverged, naming the optimizer's own point where it begins (the first
    bias correction, 1 - beta1^step, the value R's step used), and its reconciled run (first-moment-lerp's switch on) still
    differs there."""
    planted = ("r_scripts/optimizer.R", "  opt <- do.call(constructor, c(list(params), r$args))",
               "  if (!is.null(r$args$betas)) r$args$betas[[1]] <- r$args$betas[[1]] * 1.0001\n"
               "  opt <- do.call(constructor, c(list(params), r$args))")
    result = _run(tmp_path, monkeypatch, availability, ("default",), ("adam",), (planted,))
    pair = _pair(result, "default", "adam")
    assert pair.verdict == "diverged", pair.explanation
    trace = pair.details["trace"]
    assert trace["first_difference"]["point"] == "optim.bias_correction1.layer0.weight" and trace["first_difference"]["step"] == 0
    assert trace["reconciled_identical"] is False and trace["reconciled"]["point"] == "optim.bias_correction1.layer0.weight"
    # issue 47: its untraced reconciled run's records part from python's, so it ran again traced, to say where (above)
    [r_cell] = [c for c in result.cells if c.frontend == "r" and c.pair == pair.pair]
    assert r_cell.reconciled is not None and not records_only(read_cell_trace(r_cell.reconciled))
    assert r_cell.untraced_seconds is not None  # its first, untraced run's time: the one a limit may add up
    assert "first differs at step 0, optim.bias_correction1.layer0.weight" in pair.explanation[0]
    assert "not known difference first-moment-lerp: it first differs at optim.bias_correction1.layer0.weight" in "\n".join(
        pair.explanation)


#: An entry as broad as the list allows: both scripts, every mode and optimizer, every parameter's stepped weights as its
#: first point at any of the first 64 steps, the largest distance the list takes, and a switch that acts on every row.
BROAD = (KNOWN_DIFFERENCE_ENTRY.replace('id = "clip-coef-reciprocal"', 'id = "anything-at-the-weights"')
         .replace('scripts = ["cuda_amp_grad_scaler"]', 'scripts = ["with_autocast", "cuda_amp_grad_scaler"]')
         .replace('modes = ["autocast_scaler_clip"]', 'modes = ["default", "autocast", "lowp_weights", "lowp_weights_scaled", '
                                                      '"autocast_scaler", "autocast_scaler_clip"]')
         .replace('trigger = "clip_engaged"', 'trigger = "always"')
         .replace('first_point = "clip.coef"', 'first_point = "param.stepped.{param}"')
         .replace('first_step = "trigger"', "first_step = [%s]").replace("max_distance = 1", "max_distance = %d"))


def test_a_broad_entry_cannot_approve_a_planted_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       availability: Availability) -> None:
    """R's learning rate one part in 10^6 larger, and an entry whose signature matches anything at the weights: the match
    proves nothing, because the reconciled runs (its switch on) still differ, so the pair is diverged and the run fails."""
    from harness.judge.known_differences import MAX_DISTANCE, load_known_differences

    listed = tmp_path / "broad.toml"
    listed.write_text(BROAD % (", ".join(map(str, range(64))), MAX_DISTANCE))
    known = load_known_differences(listed)
    planted = ("r_scripts/optimizer.R", "  opt <- do.call(constructor, c(list(params), r$args))",
               "  r$args$lr <- r$args$lr * (1 + 1e-6)\n  opt <- do.call(constructor, c(list(params), r$args))")
    result = _run(tmp_path / "scripts", monkeypatch, availability, ("default",), ("sgd",), (planted,), known=known)
    pair = _pair(result, "default", "sgd")
    assert pair.verdict == "diverged", pair.explanation
    assert pair.details["trace"]["first_difference"]["point"].startswith("param.stepped.")
    assert "which anything-at-the-weights describes, but it does not explain the whole difference" in pair.explanation[0]
    assert exit_status(result) == 1


def test_r_torch_bugs_beyond_the_tolerance_and_a_crash_are_proven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   availability: Availability) -> None:
    """SGD's weight-decay index bug (final weights several times off) and ASGD's averaging crash are proven entries;
    the crashed R cell is excused, so the run exits 0."""
    result = _run(tmp_path, monkeypatch, availability, ("default",), ("sgd_momentum", "asgd"))
    sgd, asgd = _pair(result, "default", "sgd_momentum"), _pair(result, "default", "asgd")
    assert sgd.verdict == "known_difference" and sgd.details["proven"] and sgd.details["known_kinds"] == ["bug"]
    assert sgd.details["trace"]["first_difference"]["point"] == "optim.momentum_buffer.layer0.weight"
    r_asgd = next(c for c in result.cells if c.optimizer == "asgd" and c.frontend == "r")
    assert str(r_asgd.status) == "error" and "$ operator is invalid for atomic vectors" in (r_asgd.reason or "")
    assert asgd.verdict == "known_difference" and asgd.details["excused"] == [r_asgd.id]
    assert exit_status(result) == 0


def test_the_same_verdicts_whatever_the_order_and_the_slices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             availability: Availability) -> None:
    """python,r and r,python and two slices (python, r) merged, labelled or not, give the same verdicts and exit 0."""
    modes, optimizers = (CLIP, "default"), ("sgd", "adam")
    scripts = tmp_path / "scripts"
    verdicts = []
    for order in (("python", "r"), ("r", "python")):
        result = _run(scripts, monkeypatch, availability, modes, optimizers, frontends=order)
        verdicts.append({p.pair: p.verdict for p in result.pairs})
        assert exit_status(result) == 0
    slices = []
    for name in ("python", "r"):
        result = _run(scripts, monkeypatch, availability, modes, optimizers, frontends=(name,), staging=tmp_path / f"{name}.staging")
        path = tmp_path / f"{name}.json"
        save_result(result, path)
        slices.append(path)
    for labels in ((None, None), ("here", "there")):
        merged = merge_results(slices, labels=labels)
        verdicts.append({p.pair: p.verdict for p in merged.pairs})
        assert exit_status(merged) == 0
    assert all(v == verdicts[0] for v in verdicts), verdicts
    assert verdicts[0]["cuda_amp_grad_scaler-autocast_scaler_clip-sgd-cpu"] == "known_difference"


#: Issue 37 (1): the final weights scaled after the loop, where no traced point sees them: only the records show it.
_AFTER_LOOP = {
    "r": ("r_scripts/with_autocast.R", "  run_epochs(loop, train_step)\n",
          "  run_epochs(loop, train_step)\n  torch::with_no_grad(for (p in loop$net$parameters) p$mul_(1.0001))\n"),
    "python": ("py_scripts/with_autocast.py", '    run_epochs(loop, train_step)\n',
               '    run_epochs(loop, train_step)\n'
               '    torch.no_grad()(lambda: [p.mul_(1.0001) for p in loop.net.parameters()])()\n'),
}


@pytest.mark.parametrize(("language", "optimizer"), [("r", "adam"), ("python", "ignite_adam")])
def test_a_change_the_trace_cannot_see_is_diverged_behind_an_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, availability: Availability, language: str, optimizer: str
) -> None:
    """Issue 37 (1): the weights scaled after the loop in one language's copy, in a pair an entry covers with a switch on
    that language's side (first-moment-lerp: R's Adam, PyTorch's for the ignite row). The traced points part as the entry
    describes, and the reconciled runs are identical at every point of the loop, but their records (final weights) are
    not: ``diverged``, never proven, and the run exits 1."""
    result = _run(tmp_path, monkeypatch, availability, ("default",), (optimizer,), plants=(_AFTER_LOOP[language],))
    pair = _pair(result, "default", optimizer)
    assert pair.verdict == "diverged" and not pair.details["proven"], pair.explanation
    assert "still differ at" in pair.summary and "record.weights." in pair.summary, pair.summary
    assert exit_status(result) == 1


#: Issue 37 (3): GradScaler's backoff factor halved in one language's copy.
_HALVED_BACKOFF = {
    "r": ("r_scripts/scaler.R", "backoff_factor = spec$backoff_factor,", "backoff_factor = spec$backoff_factor / 2,"),
    "python": ("py_scripts/scaler.py", 'backoff_factor=spec["backoff_factor"],', 'backoff_factor=spec["backoff_factor"] / 2,'),
}


@pytest.mark.parametrize("language", ["r", "python"])
def test_a_halved_backoff_is_diverged_in_the_main_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, availability: Availability, language: str
) -> None:
    """Issue 37 (3): with the preset's own spec (no --overflow-steps), every scaler cell overflows once, so a halved
    backoff shows: the pair is ``diverged`` at the loss scale, the planted cell fails GradScaler's rule, exit 1."""
    result = _run(tmp_path, monkeypatch, availability, ("autocast_scaler",), ("sgd",), plants=(_HALVED_BACKOFF[language],))
    pair = _pair(result, "autocast_scaler", "sgd")
    assert pair.verdict == "diverged", pair.explanation
    assert any("loss scale differs first at step 9" in line for line in pair.explanation), pair.explanation
    planted = next(c for c in result.cells if c.frontend == language)
    assert planted.verdict is not None and planted.verdict.outcome == "fail" and "GradScaler" in planted.verdict.reason
    assert exit_status(result) == 1


def test_a_scaler_failure_in_a_cell_a_bug_excuses_is_not_excused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, availability: Availability
) -> None:
    """Issue 37 (2): R's SGD-with-momentum cells fail their float64 check by sgd-weight-decay-index, which excuses them;
    with R's backoff halved, the scale history breaks GradScaler's rule too: that failure is not the bug's, the pair
    is not proven (its reconciled runs' scale histories differ) and the cell fails the run."""
    result = _run(tmp_path, monkeypatch, availability, ("autocast_scaler",), ("sgd_momentum",), plants=(_HALVED_BACKOFF["r"],))
    pair = _pair(result, "autocast_scaler", "sgd_momentum")
    assert pair.verdict == "diverged" and not pair.details["proven"], pair.explanation
    r_cell = next(c for c in result.cells if c.frontend == "r")
    assert r_cell.verdict is not None and r_cell.verdict.outcome == "fail", r_cell.verdict
    assert exit_status(result) == 1
