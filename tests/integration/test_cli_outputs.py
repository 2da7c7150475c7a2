"""The command line's output places under fire: two runs at once, kills, bad places, a save that fails after the run.

Each test reproduces one failure a user met. Those about the process (concurrent runs, kills, a full disk
planted into the real command, ``$TMPDIR``) run ``python -m harness`` as a user would (a subprocess); those that
run cells through ``harness.cli.main.main`` start its workers. The refusals before the first cell are unit tests,
in ``tests/unit/cli/test_cli_outputs.py``.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT
from harness.files.staging import StagingDir
from harness.run.availability import Availability
from harness.run.pool import TEMPORARY_WEIGHTS_PREFIX
from harness.store.result_file import WEIGHTS_MARKER
from tests.support import require_r_torch, run_cli

#: A Python-only run long enough (a few seconds per cell) to be caught mid-way.
_QUICK = ("run", "--frontend", "python", "--mode", "default", "--optimizer", "sgd", "--rounds", "1", "--warmup-rounds", "1")
_SLOW = (*_QUICK, "--num-batches", "300", "--epochs", "4")


def _env(tmp: Path) -> dict[str, str]:
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp)}


def _harness(*args: str, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=env or dict(os.environ))


def _start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def _wait_for(condition: object, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_two_runs_with_the_same_new_json_the_second_is_refused_and_the_first_keeps_its_weights(tmp_path: Path) -> None:
    """The second of two concurrent runs for one --json is refused at once; the result points at its own weights."""
    env = _env(tmp_path / "tmp")
    first = _start(*_SLOW, "--json", str(tmp_path / "X.json"), env=env)
    _wait_for(lambda: any(p.name.startswith(".amp-parity-staging-") for p in tmp_path.iterdir()))
    second = _harness(*_QUICK, "--json", str(tmp_path / "X.json"), env=env)
    assert second.returncode == ExitCode.USAGE_ERROR
    assert second.stderr.strip() == (
        f"error: another run is writing {tmp_path / 'X.json'} (it holds {tmp_path / '.X.weights.lock'}); "
        "wait for it to end or choose another --json path."
    )
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    result = json.loads((tmp_path / "X.json").read_text())
    assert result["spec"]["num_batches"] == 300
    marker = json.loads((tmp_path / "X.weights" / ".amp-parity-weights.json").read_text())
    assert marker == {"result": "X.json", "files": [  # both scripts' default: their final weights and their traces
        "cuda_amp_grad_scaler-default-sgd-python-cpu.safetensors", "cuda_amp_grad_scaler-default-sgd-python-cpu.trace.safetensors",
        "with_autocast-default-sgd-python-cpu.safetensors", "with_autocast-default-sgd-python-cpu.trace.safetensors"]}
    assert (tmp_path / result["cells"][0]["record"]["weights_path"]).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.json", "X.weights", "tmp"]
    mode = stat.S_IMODE((tmp_path / "X.json").stat().st_mode)  # weights were 0600 beside a 0644 result
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "X.weights").iterdir()} == {mode}


def test_a_save_that_fails_after_the_run_still_prints_the_table_and_says_where_the_result_went(tmp_path: Path) -> None:
    """A full disk at the very end (planted into the real CLI) loses neither the table nor the result."""
    plant = (  # the disk fills up just as the result is renamed into place
        "import errno, os, sys\n"
        "real = os.replace\n"
        "def full(src, dst):\n"
        "    if os.path.basename(dst) == 'X.json':\n"
        "        raise OSError(errno.ENOSPC, 'No space left on device')\n"
        "    real(src, dst)\n"
        "os.replace = full\n"
        "from harness.cli.main import main\n"
        "main(sys.argv[1:])\n"
    )
    env = _env(tmp_path / "tmp")
    done = subprocess.run([sys.executable, "-c", plant, *_QUICK, "--json", str(tmp_path / "X.json")], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == ExitCode.USAGE_ERROR
    assert "amp-parity · preset" in done.stdout and "default" in done.stdout
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: cannot write {tmp_path / 'X.json'}: No space left on device. The result was saved to ")
    saved = Path(line.split(" was saved to ")[1].removesuffix(" instead (weights beside it)."))
    assert saved.parent.parent == tmp_path / "tmp"
    rescued = json.loads(saved.read_text())
    assert (saved.parent / rescued["cells"][0]["record"]["weights_path"]).stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


def test_a_killed_run_leaves_no_traceback_and_its_debris_is_swept_by_the_next_run(tmp_path: Path) -> None:
    """SIGKILL of a run leaves its staging folder and lock beside the result; the next run for that --json removes them.

    (The orphan's exit mid-call is proven in tests/integration/test_worker.py; here it is idle, and must stay quiet too.)
    """
    env = _env(tmp_path / "tmp")
    run = _start(*_SLOW, "--json", str(tmp_path / "X.json"), env=env)
    staging = lambda: [p for p in tmp_path.iterdir() if p.name.startswith(".amp-parity-staging-")]  # noqa: E731
    _wait_for(lambda: staging() and any(staging()[0].iterdir()))  # the record call wrote its weights: timed rounds run now
    run.send_signal(signal.SIGKILL)
    _, stderr = run.communicate(timeout=300)  # EOF once the orphaned worker has exited too
    assert run.returncode == -signal.SIGKILL
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert len(staging()) == 1
    again = _harness(*_QUICK, "--json", str(tmp_path / "X.json"), env=env)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.json", "X.weights", "tmp"]


def test_a_killed_run_without_json_has_its_temporary_staging_swept(tmp_path: Path) -> None:
    """The ``amp-parity-weights-*`` folder a killed run leaves in $TMPDIR is removed by the next run, a live one's is not."""
    env = _env(tmp_path / "tmp")
    run = _start(*_SLOW, env=env)
    staged = lambda: [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith(TEMPORARY_WEIGHTS_PREFIX)]  # noqa: E731
    _wait_for(lambda: staged() and any(staged()[0].iterdir()))
    os.killpg(run.pid, signal.SIGKILL)  # the run and its worker: nothing cleans up
    run.communicate(timeout=60)
    (killed,) = staged()
    with StagingDir(tmp_path / "tmp", TEMPORARY_WEIGHTS_PREFIX) as live:  # another run's, alive while the next one starts
        done = _harness(*_QUICK, env=env)
        assert done.returncode == 0, done.stderr
        assert staged() == [live.path] and not killed.exists()


def test_prepare_leaves_nothing_in_the_temporary_folder(tmp_path: Path) -> None:
    """``prepare`` without --weights-out names a fresh weights file but creates no folder (it left one per call)."""
    env = _env(tmp_path / "tmp")
    done = _harness("prepare", "--preset", "tiny", env=env)
    assert done.returncode == 0, done.stderr
    weights_out = Path(json.loads(done.stdout)["weights_out"])
    assert weights_out.parent == tmp_path / "tmp" and not weights_out.exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_report_from_another_folder_reads_the_weights(tmp_path: Path, availability: Availability) -> None:
    """A result written with a relative --json is reported from another folder with the same verdicts (not ``error``)."""
    require_r_torch(availability)
    (tmp_path / "results").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = _harness("run", "--mode", "default", "--optimizer", "sgd", "--rounds", "1", "--warmup-rounds", "1", "--json", "results/X.json",
                    cwd=tmp_path, env=env)
    assert done.returncode in (0, 1), done.stderr
    verdicts = [p["verdict"] for p in json.loads((tmp_path / "results" / "X.json").read_text())["pairs"]]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report = _harness("report", "../results/X.json", "--out", "rep", cwd=elsewhere, env=env)
    assert report.returncode == 0, report.stderr
    assert verdicts and "error" not in verdicts
    assert "cannot read" not in (elsewhere / "rep" / "report.md").read_text()


def test_a_report_a_user_writes_during_the_run_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``report.md`` written into the ``--report`` folder while the cells run is not replaced without --overwrite; the result is kept."""
    from harness.run.runner import MatrixRunner

    real_run = MatrixRunner.run

    def run_and_write(self: MatrixRunner, *args: object, **kwargs: object) -> object:
        (tmp_path / "rep" / "report.md").write_text("mine")
        return real_run(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(MatrixRunner, "run", run_and_write)
    done = run_cli(*_QUICK, "--json", str(tmp_path / "X.json"), "--report", str(tmp_path / "rep"))
    assert done.returncode == ExitCode.USAGE_ERROR
    assert done.stderr.strip().splitlines()[-1].startswith(
        f"error: {tmp_path / 'rep' / 'report.md'} appeared during the run; it is replaced only with --overwrite. No report was written"
    )
    assert "result written to" in done.stdout and "report written" not in done.stdout
    assert (tmp_path / "rep" / "report.md").read_text() == "mine"
    assert sorted(p.name for p in (tmp_path / "rep").iterdir()) == ["report.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.json", "X.weights", "rep"]


def test_ctrl_c_after_the_result_was_published_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Interrupted while the report is drawn: the line says the result exists (not "no result was written"); no empty report folder."""
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("harness.views.report.write_report", interrupted)
    done = run_cli(*_QUICK, "--json", str(tmp_path / "X.json"), "--report", str(tmp_path / "rep"))
    assert done.returncode == 130
    assert done.stderr.strip() == (
        f"error: interrupted after the result was written to {tmp_path / 'X.json'}; no report was written; the table was not printed."
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.json", "X.weights"]


def test_a_closed_stdout_after_the_run_is_not_an_error(tmp_path: Path) -> None:
    """``run ... | head`` gave "unexpected BrokenPipeError", exit 1: now no error line, the run's own status, and the result is written."""
    env = _env(tmp_path / "tmp")
    with subprocess.Popen([sys.executable, "-m", "harness", *_QUICK, "--json", str(tmp_path / "X.json")], cwd=REPO_ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as run:
        assert run.stdout is not None and run.stderr is not None
        run.stdout.close()  # the reader is gone before the table is printed, as `| head -0` leaves it
        stderr = run.stderr.read()
        run.wait(timeout=300)
    assert (run.returncode, stderr) == (0, "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.json", "X.weights", "tmp"]


def test_a_result_with_resume_cells_is_replaced_with_overwrite(tmp_path: Path) -> None:
    """Issue 48 (1), through the real scripts: a resume cell leaves its checkpoint (``.safetensors`` and ``.json``) in the
    weights folder; the marker names every file the run left there, so ``run --json X --overwrite`` replaces the result
    (it was refused: "X.weights holds ...checkpoint.json, which amp-parity did not write")."""
    resume = ("run", "--frontend", "python", "--mode", "default", "--optimizer", "adagrad", "--feature", "none,resume",
              "--rounds", "1", "--warmup-rounds", "1", "--no-trace", "--json", str(tmp_path / "X.json"))
    first = run_cli(*resume)
    assert first.returncode == 0, first.stderr
    written = sorted(p.name for p in (tmp_path / "X.weights").iterdir())
    assert any(name.endswith(".checkpoint.json") for name in written), written
    marker = json.loads((tmp_path / "X.weights" / WEIGHTS_MARKER).read_text())
    assert sorted(marker["files"]) == [n for n in written if n != WEIGHTS_MARKER]
    again = run_cli(*resume, "--overwrite")
    assert again.returncode == 0, again.stderr
