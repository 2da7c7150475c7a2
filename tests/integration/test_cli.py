"""The command line's real runs: the session's shared ``python -m harness run`` (the ``python_run`` fixture), runs through
``harness.cli.main.main`` that start the workers, ``doctor``'s probe of R, and signals sent to ``python -m harness`` itself.

The refusals that come before any cell runs are checked in process, in ``tests/unit/cli/test_cli.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT
from harness.model.result import RESULT_SCHEMA_VERSION
from harness.run.availability import Availability
from tests.support import PYTHON_RUN_GROUP, SharedRun, harness_command, run_cli


@PYTHON_RUN_GROUP
def test_run_writes_a_complete_result_and_refuses_to_overwrite(python_run: SharedRun) -> None:
    """``run --json`` prints the table and writes a versioned result with weights beside it; a second run refuses."""
    done, path = python_run.done, python_run.json
    assert done.returncode == 0, done.stderr
    assert "amp-parity · preset tiny" in done.stdout and "autocast" in done.stdout
    result = python_run.result()
    assert result["schema_version"] == RESULT_SCHEMA_VERSION and [c["status"] for c in result["cells"]] == ["ok"] * 7
    assert {c["optimizer"] for c in result["cells"]} == {"sgd"}
    for cell in result["cells"]:
        assert Path(cell["record"]["weights_path"]).parent == Path(f"{path.stem}.weights")  # relative to the result
        assert (path.parent / cell["record"]["weights_path"]).exists()
    # the real command's exit status
    again = harness_command("run", "--frontend", "python", "--mode", "default", "--optimizer", "sgd", "--json", str(path))
    assert again.returncode == ExitCode.USAGE_ERROR and "does not exist yet (or pass --overwrite)" in again.stderr
    assert python_run.result() == result


def test_doctor_reports_each_component_with_a_fix(availability: Availability) -> None:
    """``doctor`` lists Python torch, R, rpy2 and R torch, and says what happens to R cells (the session's probe, cached)."""
    done = run_cli("doctor")
    assert done.returncode == 0
    for name in ("Python torch", "rpy2", "R package torch", "R torch libtorch", "R clock"):
        assert name in done.stdout
    assert "R cells will" in done.stdout


def test_doctor_fails_under_require_r_when_r_torch_is_missing(availability: Availability, monkeypatch: pytest.MonkeyPatch) -> None:
    """With AMP_PARITY_REQUIRE_R=1 and no R torch, ``doctor`` exits 1 and says the R cells will fail."""
    if availability.r_reason is None:
        pytest.skip("R torch is installed here")
    monkeypatch.setenv("AMP_PARITY_REQUIRE_R", "1")
    done = run_cli("doctor")
    assert done.returncode == ExitCode.FAILED and "R cells will fail" in done.stdout


@pytest.mark.parametrize("signum", [2, 15], ids=["ctrl-c", "kill"])
def test_interrupted_run_leaves_nothing_behind(tmp_path: Path, signum: int) -> None:
    """Ctrl-C (130) or kill (143, 128 + SIGTERM, not 130) during a run exits with one line, leaving no result, weights or staged files."""
    import os
    import signal
    import time

    staging = tmp_path / "tmp"
    staging.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", "--frontend", "python", "--num-batches", "300", "--epochs", "4",
         "--json", str(tmp_path / "run.json")],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(staging)},
    )
    deadline = time.monotonic() + 120  # a fixed sleep could land in the imports on a loaded machine (exit -2, no line)
    while not any(p.name.startswith(".amp-parity-staging-") for p in tmp_path.iterdir()):  # the run has claimed run.json
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    time.sleep(2)
    process.send_signal(signal.Signals(signum))
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, stderr
    how = "interrupted" if signum == signal.SIGINT else "terminated (SIGTERM)"
    assert stderr.strip().splitlines()[-1] == f"error: {how}; no result was written."
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]
    assert list(staging.iterdir()) == []  # the workers' torchinductor_root and Rtmp* went with their folder


@PYTHON_RUN_GROUP
def test_report_command_and_run_report_write_the_report(python_run: SharedRun, tmp_path: Path) -> None:
    """``run --report DIR`` and ``report RESULT --out DIR`` both write report.md, the page, the summary and three plots with the
    run's numbers, and say where the page is."""
    assert python_run.done.returncode == 0, python_run.done.stderr
    result = python_run.result()
    assert [p["verdict"] for p in result["pairs"]] == []  # python only: no pair to compare
    again = run_cli("report", str(python_run.json), "--out", str(tmp_path / "b"))
    assert again.returncode == 0 and again.stdout.startswith("report written to")
    assert f"open {tmp_path / 'b' / 'report.html'} (one page, offline)" in again.stdout
    for folder in (python_run.report, tmp_path / "b"):
        names = sorted(p.name for p in folder.iterdir())
        assert names == ["loss_diff.png", "losses.png", "report.html", "report.md", "summary.md", "timing.png"]
        text = (folder / "report.md").read_text()
        assert f"{result['cells'][0]['record']['final_loss']:.7g}" in text


@PYTHON_RUN_GROUP
def test_run_records_its_judging_policy(python_run: SharedRun, tmp_path: Path) -> None:
    """``run --tolerance-only`` records ``tolerance_only`` in the result; without the flag ``strict``."""
    assert python_run.result()["judging"] == "strict"
    path = tmp_path / "tolerance_only.json"
    done = run_cli("run", "--frontend", "python", "--mode", "default", "--optimizer", "sgd", "--rounds", "1", "--warmup-rounds", "1",
                    "--num-batches", "2", "--epochs", "1", "--json", str(path), "--tolerance-only", "-v")
    assert done.returncode == 0, done.stderr
    stored = json.loads(path.read_text())
    assert stored["judging"] == "tolerance_only"
    # -v: where the time went, phase by phase as stored, then writing (which the file cannot hold)
    [line] = [line for line in done.stdout.splitlines() if line.startswith("phases: ")]
    assert [p["name"] for p in stored["phases"]] == [part.rsplit(" ", 2)[0] for part in line[8:].split(" (together")[0].split(" · ")][:-1]
    assert " · writing " in line and "writing" not in [p["name"] for p in stored["phases"]]


def test_sizes_off_multiples_of_8_run_with_a_one_line_warning() -> None:
    """``--batch-size 30`` runs and warns once, in one ``warning:`` line, about tensor cores."""
    done = run_cli("run", "--batch-size", "30", "--frontend", "python", "--mode", "default", "--optimizer", "sgd", "--rounds", "1",
                    "--warmup-rounds", "1", "--num-batches", "2", "--epochs", "1")
    assert done.returncode == 0
    assert done.stderr.strip() == "warning: batch_size=30 not a multiple of 8: it runs, but tensor cores may not engage on a GPU."


@PYTHON_RUN_GROUP
def test_run_interleaved_with_profile_records_the_protocol(python_run: SharedRun) -> None:
    """``--rounds 3 --interleave --profile`` is what the result's protocol, timing and GEMM profile say ran."""
    assert python_run.done.returncode == 0, python_run.done.stderr
    result = python_run.result()
    assert result["protocol"] | {"gc": None, "clocks": None} == {
        "warmup_rounds": 1, "rounds": 3, "max_seconds": 60.0, "interleave": True, "gc": None, "clocks": None,
    }
    cell = next(c for c in result["cells"] if c["mode"] == "autocast")
    lowp = next(c for c in result["cells"] if c["mode"] == "lowp_weights")  # bfloat16 weights: every GEMM in bfloat16 too
    assert lowp["gemm_profile"]["half_share"] == 1.0 and lowp["efficiency"]["gemm_dtype"] == "bfloat16"
    assert cell["timing"]["rounds"] == 3 and cell["timing"]["warmup_calls"] == 1
    assert cell["gemm_profile"]["half_share"] == 1.0 and cell["gemm_profile"]["step"] == 3
    assert "targets: " in python_run.done.stdout


def test_a_run_in_which_no_cell_ran_fails_and_meets_no_figure(availability: Availability, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--frontend r`` without R torch: every cell skipped, so a usage error, one ``error:`` line, no figure "met" (it said 1 of 1)."""
    import dataclasses

    import harness.run.runner

    monkeypatch.delenv("AMP_PARITY_REQUIRE_R", raising=False)
    no_r = dataclasses.replace(availability, r={"torch_installed": False, "libtorch_installed": False, "libtorch_loads": False})
    monkeypatch.setattr(harness.run.runner, "probe_host", lambda: no_r)  # R's side known before any worker starts
    done = run_cli("run", "--preset", "tiny", "--frontend", "r", "--optimizer", "sgd", "--rounds", "1", "--warmup-rounds", "1")
    assert done.returncode == ExitCode.USAGE_ERROR
    assert done.stderr.splitlines() == [
        "error: no cell ran: all 7 were skipped (with_autocast-default-sgd-r-cpu: the R package torch is not installed: in R, "
        'install.packages("torch"); torch::install_torch()); nothing was measured. Fix what the reason says, or choose other '
        "--frontend/--mode."
    ]
    assert "targets:" not in done.stdout and "skipped" in done.stdout
