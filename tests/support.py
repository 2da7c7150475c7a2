"""Helpers the tests import: the CPU matrix, the R-torch skip rule and the golden result.

Kept apart from ``conftest.py``, which holds only pytest fixtures and hooks: a test module imports
plain functions and constants from here, never from a conftest (pytest loads conftests itself, and
importing one a second time as a module gives two copies of its state).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import io
import json
import os
import platform
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.contract.modes import all_mode_names
from harness.judge.cells import check_float64
from harness.judge.reference import Reference, measure_distance
from harness.model.result import MatrixResult
from harness.model.verdicts import Float64Bound, Float64Check
from harness.run.availability import Availability, r_required
from harness.run.kept_workers import KeptWorkers
from harness.workload.matrix import Cell, cells_for

__all__ = [
    "CELLS", "COLLECTED", "DURATIONS", "FRONTENDS", "GOLDEN_RESULT", "KNOWN_DIFFERENCE_ENTRY", "MATRIX_OPTIMIZERS", "PAIRS",
    "PYTHON_RUN_GROUP", "ROOT", "SharedRun", "golden_result",
    "Edit", "harness_command", "python_shell", "set_field",
    "require_frontend", "require_r_torch",
    "close_kept_workers", "kept_workers", "run_cli", "shared_run", "write_durations", "write_durations_file",
]

FRONTENDS = ("python", "r")

#: The checkout's root, and the whole suite's measured seconds per test (``--store-durations``; tests/unit/test_row_costs.py
#: reads them).
ROOT = Path(__file__).resolve().parent.parent
DURATIONS = ROOT / "tests" / "data" / "durations.json"
#: Torch's intra-op threads and NumPy's BLAS (OpenBLAS) threads in a process that runs tests (each xdist worker, or a
#: session without xdist). The suite's processes share 2 cores: two xdist workers, and the workers and shells their tests
#: start. An op on 2 threads then waits at its barrier for a core another process holds: in the whole suite, 12 cases of
#: ``test_every_row_matches_torch_optim_in_float64`` took 2.4-2.7 s each (0.03-0.14 s alone) with torch on 2 threads, and
#: with torch on 1, 10 cases of ``test_reference_follows_each_loop_feature_as_torch_does`` took 1.3-2.7 s (0.03-0.09 s
#: alone): NumPy's float64 references on OpenBLAS's 2 threads. Beside two busy loops, its Adam cases take 18.4 s with
#: OpenBLAS's threads and 9.2 s on one. Rows were charged over the 1 s a row may cost (tests/unit/test_row_costs.py).
#: Cells' workers set their own (the spec's ``threads``); a harness command's process sets its BLAS the same way
#: (:data:`harness.cli.main.BLAS_THREADS`, issue 38).
TEST_PROCESS_THREADS = 1
#: The tests that read the session's ``python_run``: one xdist group, so one worker runs them all and the other never waits
#: on the lock while the first runs it (pyproject's ``--dist loadgroup``).
PYTHON_RUN_GROUP = pytest.mark.xdist_group("python-run")
#: Every collected test's node id and parameters, kept by conftest.py before ``-k`` or ``-m`` deselect any.
COLLECTED = pytest.StashKey[list[tuple[str, dict[str, object]]]]()

#: A known-differences entry as the list writes one (the committed clip entry, its texts cut short): tests edit a copy.
KNOWN_DIFFERENCE_ENTRY = '''
[[difference]]
id = "clip-coef-reciprocal"
kind = "difference"
title = "t"
languages = ["r", "python"]
scripts = ["cuda_amp_grad_scaler"]
modes = ["autocast_scaler_clip"]
optimizers = "all"
devices = ["cpu"]
trigger = "clip_engaged"
switches = ["r-clip-coef-reciprocal"]
seen_on = ["s"]
mechanism = "m"
sources = ["s"]
upstream = "u"

[difference.signature]
first_point = "clip.coef"
first_step = "trigger"
max_distance = 1
'''

#: The optimizer the parametrized matrix runs: plain SGD, the recipe's (every row is tested on its own, cheaply, in
#: tests/integration/test_optimizers.py; every row in every mode with both frontends would be 238 cells per test).
MATRIX_OPTIMIZERS = ("sgd",)
CELLS = cells_for(FRONTENDS, all_mode_names(), MATRIX_OPTIMIZERS, "cpu")
PAIRS = sorted({cell.pair for cell in CELLS}, key=[c.pair for c in CELLS].index)

#: A small real result of both frontends, the four modes of result schema 7, with its weights beside it
#: (``golden.weights/``), written by ``python -m harness run``; stored in schema 7, it loads through the upgrade to 8
#: (plain SGD, the only optimizer then): ``tests/data/README.md`` says how it was made.
GOLDEN_RESULT = Path(__file__).resolve().parent / "data" / "golden.json"


#: The session's kept workers, made on first use (tests/conftest.py's ``pytest_sessionfinish`` stops them).
_KEPT: list[KeptWorkers] = []


def kept_workers() -> KeptWorkers:
    """The session's kept workers (:mod:`harness.run.kept_workers`), for a runner that only runs cells of another copy of
    the scripts: it borrows a started pair instead of starting and stopping its own (about 3 s a runner on 2 cores, most
    of a planted test's time). Tests of a worker's start, crash, environment or memory never take them."""
    if not _KEPT:
        _KEPT.append(KeptWorkers())
    return _KEPT[0]


def close_kept_workers() -> None:
    """Stop the session's kept workers, if it made them."""
    while _KEPT:
        _KEPT.pop().close()


def golden_result() -> MatrixResult:
    """The golden result as ``load_result`` reads it (weights paths absolute); immutable, so one copy serves every test."""
    return _golden_loaded()


@functools.cache
def _golden_loaded() -> MatrixResult:
    """Read once per process."""
    from harness.store.result_file import load_result

    return load_result(GOLDEN_RESULT)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m harness ARGS`` run in this process (``harness.cli.main.main``): exit status, stdout and stderr.

    For tests of what the command prints and returns, without a new interpreter's imports (seconds on a
    busy 2-core machine). The CLI's process-wide settings (SIGTERM handler, warning display) are put
    back afterwards. Tests whose point is the process (signals, locks, concurrent runs, ``$TMPDIR``)
    use :func:`harness_command` instead.
    """
    from harness.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    handler = signal.getsignal(signal.SIGTERM)
    code: int | str | None = 0
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(args))
    except SystemExit as done:
        code = done.code
    finally:
        signal.signal(signal.SIGTERM, handler)
    if isinstance(code, str):  # sys.exit("text") prints the text and exits 1
        err.write(code + "\n")
        code = 1
    return subprocess.CompletedProcess(["python", "-m", "harness", *args], int(code or 0), out.getvalue(), err.getvalue())


def python_shell(script: str, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``python py_scripts/<script>.py ARGV`` from the checkout, run through the script's own ``main_cli`` in this process
    (what the script's ``__main__`` block calls): exit status, stdout and stderr, without a new interpreter's torch import
    (about 2 s a call on 2 busy cores). A test of what only a process shows (the folder it is run from) runs the script."""
    import importlib

    from harness.files.paths import REPO_ROOT
    from py_scripts.shell import main_cli

    module = importlib.import_module(f"py_scripts.{script}")
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    old_argv = sys.argv
    sys.argv = [str(REPO_ROOT / "py_scripts" / f"{script}.py"), *argv]
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main_cli(module.SCRIPT, module.run_workload)
    except SystemExit as done:
        code = done.code
    finally:
        sys.argv = old_argv
    if isinstance(code, str):  # sys.exit("text") prints the text and exits 1
        err.write(code + "\n")
        code = 1
    return subprocess.CompletedProcess(["python", f"py_scripts/{script}.py", *argv], int(code or 0), out.getvalue(), err.getvalue())


def harness_command(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                    timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The real command, ``python -m harness ARGS``, in a new process (from the checkout unless ``cwd`` says otherwise)."""
    from harness.files.paths import REPO_ROOT

    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd or REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


@dataclasses.dataclass(frozen=True)
class SharedRun:
    """A real ``python -m harness run`` that several tests read (and none may change): its outcome and outputs."""

    done: subprocess.CompletedProcess[str]
    json: Path
    report: Path

    def result(self) -> dict[str, Any]:
        """The result file as stored (weights paths relative)."""
        data: dict[str, Any] = json.loads(self.json.read_text(encoding="utf-8"))
        return data


def shared_run(root: Path, name: str, *args: str) -> SharedRun:
    """``python -m harness run ARGS --json ROOT/NAME/NAME.json --report ROOT/NAME/report``, once for every process.

    ``root`` is a folder all pytest-xdist workers of a session share: the first worker to get here runs
    the command (under a lock) and records its exit status and output; the others wait and read them.
    A run of a few seconds' cells costs tens of seconds of interpreter and worker start-up on a busy
    2-core machine, so the tests that only read a run's output share one.
    """
    folder = root / name
    paths = SharedRun(subprocess.CompletedProcess([], 0), folder / f"{name}.json", folder / "report")
    outcome = root / f"{name}.outcome.json"
    with open(root / f"{name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not outcome.exists():
            folder.mkdir()
            done = harness_command("run", *args, "--json", str(paths.json), "--report", str(paths.report))
            outcome.write_text(json.dumps([done.returncode, done.stdout, done.stderr]), encoding="utf-8")
    returncode, stdout, stderr = json.loads(outcome.read_text(encoding="utf-8"))
    command = [sys.executable, "-m", "harness", "run", *args]
    return dataclasses.replace(paths, done=subprocess.CompletedProcess(command, returncode, stdout, stderr))


def write_durations(path: Path, seconds: Mapping[str, Sequence[float]], workers: object) -> None:
    """Each test's seconds, by node id, as ``[setup, call, teardown]``, with what was measured: a whole suite's run
    (``--store-durations``)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    measured = {"workers": workers, "cpus": os.cpu_count(), "machine": platform.processor() or platform.machine(),
                "load_at_end": load, "tests": len(seconds), "seconds": round(sum(sum(v) for v in seconds.values()), 2)}
    write_durations_file(path, measured, seconds)


def write_durations_file(path: Path, measured: Mapping[str, Any], seconds: Mapping[str, Sequence[float]]) -> None:
    """The durations file: what was measured, then one line per test (a diff shows which tests moved)."""
    lines = [f"{json.dumps(node)}: {json.dumps([round(x, 3) for x in value])}" for node, value in sorted(seconds.items())]
    path.write_text(f'{{"measured": {json.dumps(dict(measured))},\n"seconds": {{\n' + ",\n".join(lines) + "\n}}\n",
                    encoding="utf-8")


def require_r_torch(availability: Availability) -> None:
    """Skip with the one-line reason when R torch cannot run; fail instead under AMP_PARITY_REQUIRE_R=1."""
    reason = availability.r_reason
    if reason is None:
        return
    if r_required():
        pytest.fail(f"AMP_PARITY_REQUIRE_R=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def require_frontend(cell: Cell, availability: Availability) -> None:
    """``require_r_torch`` for R cells; Python cells always run."""
    if cell.frontend == "r":
        require_r_torch(availability)


def float64_check(
    losses: Sequence[Any], weights: Mapping[str, Any], reference: Reference, bound: Float64Bound, skipped: frozenset[int]
) -> Float64Check:
    """What a run measures of a cell against ``reference`` (its distance), then judges: the float64 check a cell's verdict holds."""
    return check_float64(list(losses), reference.losses, measure_distance(list(losses), weights, reference, skipped), bound, skipped)


def report_text(result: MatrixResult, judging: str | None = None) -> str:
    """The report of ``result`` judged (as the CLI does: views read a judged result), for tests that change a result first."""
    from harness.judge.assess import assess_result
    from harness.views.report import render_markdown

    return render_markdown(assess_result(result, judging))


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a refused command (asserting there is exactly one, a usage error's status and no traceback)."""
    from harness.errors import ExitCode

    assert done.returncode == ExitCode.USAGE_ERROR, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


#: An edit of a result's JSON, in place (the hand edits the load must refuse).
Edit = Callable[[dict[str, Any]], None]


def set_field(*keys: Any, value: Any) -> Edit:
    """The edit that sets ``data[k0][k1]...[kn] = value``."""
    def edit(data: dict[str, Any]) -> None:
        target = data
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return edit
