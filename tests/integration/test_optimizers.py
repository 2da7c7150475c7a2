"""Every row of the optimizer table builds in both languages: each script's shell mode takes ``--optimizer NAME`` and returns
a record naming it, and each row's cell is judged on its own against its float64 reference.

Kept cheap: shell mode is tested once per optimizer family (R's R-code ``optim_*`` and libtorch ``optim_ignite_*``), in
both scripts, two steps each: the main job already runs every row in both languages through the workers, so what shell
mode adds (its flags, its record, its weights file) is the same for every row of a family. Python's shell mode runs in
this process (its ``main_cli``, what ``python py_scripts/<stem>.py`` calls), R's through ``Rscript``, as a user runs it.
A new row adds only its own check below (one cell per language), not a shell.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.contract.record import RECORD_FIELD_NAMES
from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT
from harness.judge.cells import judge_cell
from harness.model.result import Status
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.matrix import Cell
from harness.workload.optimizers import OPTIMIZERS
from tests.support import python_shell, require_r_torch

#: The first row of each optimizer family (``Optimizer.family``): shell mode builds it in with_autocast's default and in the
#: scaler script's autocast_scaler (R's scaler on CPU with its CUDA-only check lifted, as shell mode does by default).
FAMILIES = {o.family: name for name, o in reversed(OPTIMIZERS.items())}
SCRIPT_MODES = (("with_autocast", "default"), ("cuda_amp_grad_scaler", "autocast_scaler"))
#: Two steps (one epoch of two batches): enough for a record, and for every row's state to be created and used once.
_SHORT = ("--preset", "tiny", "--num-batches", "2", "--epochs", "1", "--device", "cpu")


def _python_shell(script: str, argv: list[str]) -> tuple[int, str, str]:
    """``python py_scripts/<script>.py ARGV``, run through the script's own ``main_cli`` in this process."""
    done = python_shell(script, argv)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_builds_in_pythons_shell_mode(family: str, tmp_path: Path) -> None:
    """``--optimizer NAME``: the Python script builds the row's PyTorch optimizer and its record names it, with the contract's fields."""
    optimizer = FAMILIES[family]
    for script, mode in SCRIPT_MODES:
        _python_row(optimizer, script, mode, tmp_path / script)


def _python_row(optimizer: str, script: str, mode: str, tmp_path: Path) -> None:
    """One row in one script's Python shell mode: exit 0, a record naming it, its weights file written."""
    tmp_path.mkdir()
    code, out, err = _python_shell(script, [*_SHORT, "--mode", mode, "--optimizer", optimizer,
                                            "--weights-out", str(tmp_path / "w.safetensors")])
    assert code == 0, err
    record = json.loads(out.strip().splitlines()[-1])
    assert (record["optimizer"], record["script"], record["mode"], record["frontend"]) == (optimizer, script, mode, "python")
    assert tuple(record) == RECORD_FIELD_NAMES and len(record["losses"]) == 2 and (tmp_path / "w.safetensors").is_file()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_builds_in_rs_shell_mode(family: str, tmp_path: Path, availability: Availability) -> None:
    """``Rscript r_scripts/<stem>.R --optimizer NAME``: R torch's function for the row (``optim_*`` or ``optim_ignite_*``) takes
    the row's arguments under R torch's names, and the record names the row, with the contract's fields in order."""
    require_r_torch(availability)
    optimizer = FAMILIES[family]
    for script, mode in SCRIPT_MODES:
        _r_row(optimizer, script, mode, tmp_path / script)


def _r_row(optimizer: str, script: str, mode: str, tmp_path: Path) -> None:
    """One row in one script's R shell mode: exit 0, a record naming it, its weights file written, the lifted check named."""
    tmp_path.mkdir()
    done = subprocess.run(["Rscript", f"r_scripts/{script}.R", *_SHORT, "--mode", mode, "--optimizer", optimizer,
                           "--weights-out", str(tmp_path / "w.safetensors")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert (record["optimizer"], record["script"], record["mode"], record["frontend"]) == (optimizer, script, mode, "r")
    assert tuple(record) == RECORD_FIELD_NAMES and len(record["losses"]) == 2 and (tmp_path / "w.safetensors").is_file()
    assert (record["lifted_check"] is not None) == (mode == "autocast_scaler")  # R's scaler on CPU, its one check lifted


def test_an_unknown_optimizer_is_refused_by_both_shell_modes_in_one_line(availability: Availability) -> None:
    """Both languages' shell modes refuse an unknown optimizer (or two: shell mode runs one) in the same one line."""
    require_r_torch(availability)
    every = ", ".join(OPTIMIZERS)
    for value in ("nadam", "sgd,adam"):
        expected = f"error: optimizer must be one of {every}, got {value!r}."
        code, out, err = _python_shell("with_autocast", [*_SHORT, "--mode", "default", "--optimizer", value])
        assert (code, out, err.strip()) == (ExitCode.USAGE_ERROR, "", expected)
        done = subprocess.run(["Rscript", "r_scripts/with_autocast.R", *_SHORT, "--mode", "default", "--optimizer", value],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
        assert (done.returncode, done.stdout, done.stderr.strip()) == (ExitCode.USAGE_ERROR, "", expected)


def _own_check_params() -> list[object]:
    """Each row with each frontend. An R cell whose row a known R torch bug covers (harness/judge/known_differences.toml:
    SGD's and RMSprop's weight decay, ASGD's averaging) is a strict xfail naming the entries: its own check fails until
    R torch is fixed, and then this test says so (the run itself excuses such a cell only where its pair proves the bug)."""
    from harness.judge.known_differences import load_known_differences

    bugs = [k for k in load_known_differences() if k.kind == "bug" and "r" in k.languages]
    params: list[object] = []
    for name in OPTIMIZERS:
        for frontend in ("python", "r"):
            args = OPTIMIZERS[name].args  # an entry inert on the row's arguments (weight decay 0) cannot act: no xfail
            entries = [k.id for k in bugs if frontend == "r" and k.covers("with_autocast", "default", name, "cpu")
                       and k.switches_for(name, "r") and k.inert(args) is None]
            marks = ([pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"R torch bug {', '.join(entries)}")]
                     if entries else [])
            params.append(pytest.param(name, frontend, marks=marks, id=f"{name}-{frontend}"))
    return params


@pytest.mark.parametrize(("optimizer", "frontend"), _own_check_params())
def test_every_rows_cell_passes_its_own_check(optimizer: str, frontend: str, runner: MatrixRunner, availability: Availability) -> None:
    """A row's with_autocast default cell (20 steps, float32) stays within its float64 bound: the row's own float64 update
    replayed in NumPy agrees with both bindings' optimizer."""
    if frontend == "r":
        require_r_torch(availability)
    outcome = runner.run_cell(Cell(frontend, "with_autocast", "default", optimizer, "cpu"))
    assert outcome.status is Status.OK, outcome.reason
    assert outcome.record is not None and outcome.record.optimizer == optimizer
    verdict = judge_cell(outcome, runner.spec, runner.reference_summary(every_optimizer=False))  # as the run judges it: its own trajectory
    assert verdict.float64 is not None and verdict.outcome == "pass", verdict.reason
