"""Loop feature ``resume`` through the real scripts: a run checkpointed at step k, built afresh and resumed, in its own
language and in the other one (the checkpoint layout of docs/contract.md#checkpoint), ends bitwise where the
uninterrupted run ends; R torch's scaler, which has no ``state_dict()``, is ``unsupported`` in those words; a checkpoint
step off by one in one language is ``diverged`` where it begins.

Adagrad in the scaler script's ``default`` mode: its pair is bitwise identical in the plain loop, and its state holds
both kinds of entry (a step count, which PyTorch keeps in a float32 tensor and R torch's R code in an R double, and a
tensor), so whatever differs first is the checkpoint. The cross-language resume is run by handing one language's
checkpoint to the other's call (the run spec's ``resume_from``), outside the matrix: the matrix's cells each resume in
their own language. They need R torch: they skip with the reason when it is absent and fail under
``AMP_PARITY_REQUIRE_R=1``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from harness.files.paths import SCRIPTS_ENV
from harness.judge.known_differences import load_known_differences
from harness.model.pair_trace import PairTrace
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.matrix import Cell
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import WorkloadSpec
from tests.planting import copy_scripts, plant
from tests.support import kept_workers, require_r_torch

SCRIPT, MODE, OPTIMIZER = "cuda_amp_grad_scaler", "default", "adagrad"


def _weights(path: Path) -> dict[str, np.ndarray]:
    """The final weights as raw bits (a bitwise comparison: -0.0 and NaN payloads count)."""
    return {name: array.view(np.uint32) for name, array in load_file(path).items()}


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_resuming_in_either_language_ends_where_the_uninterrupted_run_ends(runner: MatrixRunner, availability: Availability) -> None:
    """Each language resumed from its own checkpoint and from the other's, without a scheduler and with lr_step's:
    bitwise the uninterrupted run's final weights (the session's runner: its workers are started once)."""
    require_r_torch(availability)
    pool = runner.pool
    tmp_path = pool.staging

    def run(frontend: str, feature: str, name: str, resume_from: Path | None = None) -> dict[str, np.ndarray]:
        request = pool.cell_request(Cell(frontend, SCRIPT, MODE, OPTIMIZER, "cpu", feature), weights_name=f"{name}.safetensors")
        if resume_from is not None:
            request["run_spec"]["resume_from"] = str(resume_from)
        pool.call(frontend, request)
        return _weights(tmp_path / f"{name}.safetensors")

    for feature, uninterrupted_feature in (("resume", "none"), ("resume_lr_step", "lr_step")):
        uninterrupted = {lang: run(lang, uninterrupted_feature, f"{lang}-{feature}-plain") for lang in ("python", "r")}
        assert _same(uninterrupted["python"], uninterrupted["r"])  # an identical pair: a resume's own difference shows
        own = {lang: run(lang, feature, f"{lang}-{feature}-own") for lang in ("python", "r")}
        crossed = {"r": run("r", feature, f"r-{feature}-from-python", tmp_path / f"python-{feature}-own.checkpoint"),
                   "python": run("python", feature, f"python-{feature}-from-r", tmp_path / f"r-{feature}-own.checkpoint")}
        for lang in ("python", "r"):
            assert _same(own[lang], uninterrupted[lang]), f"{feature}: {lang} resumed from its own checkpoint"
            assert _same(crossed[lang], uninterrupted[lang]), f"{feature}: {lang} resumed from the other language's"


#: Every optimizer row R runs in the plain loop (one whose R cell a known R torch bug stops, by the error its entry
#: describes, has no run to resume: asgd-average-into-mu).
_RESUMABLE_IN_R = tuple(name for name in OPTIMIZERS if not any(
    k.signature.error is not None and k.covers(SCRIPT, MODE, name, "cpu") for k in load_known_differences()))


@pytest.mark.parametrize("optimizer", _RESUMABLE_IN_R)
def test_every_optimizer_resumed_in_r_ends_where_its_uninterrupted_run_ends(
    runner: MatrixRunner, availability: Availability, optimizer: str,
) -> None:
    """R's run of each optimizer row checkpointed and resumed is bitwise its uninterrupted run, whatever type R torch keeps
    the row's step count in: an R double in R code, but for optim_adamw, a 0-d float32 tensor (``harness search``, seed 54:
    AdamW resumed in R failed, ``$ operator is invalid for atomic vectors``, as the checkpoint gave its step back as a
    double; the matrix's covering design resumes four other rows). The rows' state is the table's (each entry's type)."""
    require_r_torch(availability)
    pool = runner.pool

    def run(feature: str) -> dict[str, np.ndarray]:
        name = f"r-{optimizer}-{feature}-every-row"
        pool.call("r", pool.cell_request(Cell("r", SCRIPT, MODE, optimizer, "cpu", feature), weights_name=f"{name}.safetensors"))
        return _weights(pool.staging / f"{name}.safetensors")

    assert _same(run("resume"), run("none"))


def test_rs_scaler_cannot_be_checkpointed_and_the_cell_says_so(runner: MatrixRunner, availability: Availability) -> None:
    """With the scaler enabled, R's resume cell is ``unsupported`` in R torch's words (its scaler has no state_dict());
    Python's runs, bitwise the uninterrupted run (its scale and growth tracker carried)."""
    require_r_torch(availability)
    result = runner.run(("autocast_scaler",), (OPTIMIZER,), measure=False, features=("none", "resume"))
    cells = {c.id: c for c in result.cells}
    r_cell = cells[f"{SCRIPT}-autocast_scaler-{OPTIMIZER}+resume-r-cpu"]
    assert r_cell.status == "unsupported", (r_cell.status, r_cell.reason)
    assert r_cell.reason is not None and "state_dict" in r_cell.reason
    python_cell = cells[f"{SCRIPT}-autocast_scaler-{OPTIMIZER}+resume-python-cpu"]
    plain = cells[f"{SCRIPT}-autocast_scaler-{OPTIMIZER}-python-cpu"]
    assert python_cell.record is not None and plain.record is not None
    assert python_cell.record.loss_scale == plain.record.loss_scale  # the growth at step 7 is the carried tracker's
    assert python_cell.record.weights_path is not None and plain.record.weights_path is not None
    assert _same(_weights(Path(python_cell.record.weights_path)), _weights(Path(plain.record.weights_path)))


def test_a_checkpoint_step_off_by_one_in_one_language_is_diverged_where_it_begins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_spec: WorkloadSpec, availability: Availability
) -> None:
    """Python's checkpoint says one step more than it holds: it resumes a batch late, and the pair is ``diverged``, first
    at the step count read back."""
    require_r_torch(availability)
    copy_scripts(tmp_path)
    plant(tmp_path, "py_scripts/features.py", "save_checkpoint(loop.spec, prefix, step + 1, loop.net,",
          "save_checkpoint(loop.spec, prefix, step + 2, loop.net,")
    monkeypatch.setenv(SCRIPTS_ENV, str(tmp_path))
    with MatrixRunner(tiny_spec, ("python", "r"), timeout=300, availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run((MODE,), (OPTIMIZER,), measure=False, features=("resume",))
    pair = next(p for p in result.pairs if p.feature == "resume")
    assert pair.verdict == "diverged", pair.explain()
    first = PairTrace.from_json(pair.details["trace"]).first_difference
    assert first is not None and (first.step, first.point) == (6, "resume.step"), first
