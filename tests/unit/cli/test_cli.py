"""The command line as a user meets it: one ``error:`` line and exit 4 (a usage error) for bad input, a table and a JSON result otherwise.

Messages and exit statuses are checked through ``harness.cli.main.main`` in this process (:func:`tests.support.run_cli`);
what runs cells, probes R or is about the process itself is in ``tests/integration/test_cli.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ExitCode
from tests.support import golden_result, run_cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--preset", "huge"], "error: preset must be one of 'tiny', 'bench', 'recipe', got 'huge'."),
        (["run", "--mode", "turbo"],
         "error: mode must be one of 'default', 'autocast', 'lowp_weights', 'lowp_weights_scaled', 'autocast_scaler', "
         "'autocast_scaler_clip', got 'turbo'."),
        (["run", "--device", "tpu"], "error: device must be one of 'cpu', 'cuda', got 'tpu'."),
        (["run", "--device", "cuda"], "error: device must be 'cpu' on this machine: torch sees no CUDA GPU, got 'cuda'."),
        (["run", "--amp-dtype", "int8"], "error: amp_dtype must be one of 'bfloat16', 'float16' (or bf16, fp16), got 'int8'."),
        (["run", "--batch-size", "0"], "error: batch_size must be a whole number >= 1, got 0."),
        (["run", "--lr", "-1"], "error: lr must be a finite number > 0, got -1.0."),
        (["run", "--frontend", "julia"], "error: --frontend must be one of 'python', 'r', or NAME=python:PATH / NAME=r:PATH, got 'julia'."),
        (["run", "--rounds", "0"], "error: rounds must be an integer ≥ 1 (≥ 3 for a spread), got 0."),
        (["run", "--warmup-rounds", "0"],
         "error: warmup_rounds must be an integer ≥ 1: the first call writes the weights and is never timed, got 0."),
        (["run", "--max-seconds", "0"],
         "error: argument --max-seconds: must be a number of seconds > 0, got '0' (see python -m harness run --help)."),
        (["run", "--overflow-steps", "3,25"],
         "error: overflow_steps must be a list of whole step numbers from 0 to 19 (0-based: this run has 20 steps), got [3, 25]."),
        (["run", "--spec-file", "/nonexistent.json"],
         "error: spec_file must be a readable file (No such file or directory), got '/nonexistent.json'."),
    ],
)
def test_bad_values_end_in_one_line_naming_field_value_and_allowed(args: list[str], message: str) -> None:
    """Each bad value prints exactly one ``error:`` line on stderr, no traceback, exit status 4 (a usage error)."""
    if "cuda" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    done = run_cli(*args)
    assert done.returncode == ExitCode.USAGE_ERROR
    assert done.stderr.strip() == message
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("args", [["run", "--batch-size", "abc"], ["run", "--lr", "nan"]])
def test_unparsable_flags_name_the_flag(args: list[str]) -> None:
    """A flag whose text is not a number is refused by the parser in one line, naming the flag and the text, exit 4 (a usage error)."""
    done = run_cli(*args)
    assert done.returncode == ExitCode.USAGE_ERROR
    assert done.stderr.startswith(f"error: argument {args[1]}: must be a") and repr(args[2]) in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_spec_file_is_read_and_the_command_line_wins(tmp_path: Path) -> None:
    """``--spec-file`` supplies fields and explicit flags override them."""
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({"preset": "tiny", "num_batches": 3, "epochs": 1, "lr": 0.5}))
    done = run_cli("prepare", "--spec-file", str(spec_file), "--lr", "0.25")
    run_spec = json.loads(done.stdout)
    assert (run_spec["num_batches"], run_spec["epochs"], run_spec["lr"]) == (3, 1, 0.25)
    assert Path(run_spec["fixture_path"]).exists()


def test_result_folder_that_is_not_writable_is_refused_before_running(tmp_path: Path) -> None:
    """A --json path in a folder that does not exist is refused at once, with what to do."""
    done = run_cli("run", "--frontend", "python", "--json", str(tmp_path / "missing" / "run.json"))
    assert done.returncode == ExitCode.USAGE_ERROR
    folder = tmp_path / "missing"
    assert done.stderr.strip() == (
        f"error: cannot write a result in {folder}: it does not exist. Create it (mkdir -p {folder}) or choose another --json path."
    )


def test_report_judges_as_the_run_did_unless_told_otherwise(tmp_path: Path) -> None:
    """``report`` judges a one-ULP pair diverged as a strict run did, within tolerance with --tolerance-only, and back with --no-."""
    from safetensors.numpy import load_file, save_file

    from harness.model.result import MatrixResult
    from harness.store.result_file import save_result
    from tests.twins import nudge_one_ulp

    result = golden_result().to_json()  # a strict run whose default pair is bitwise identical
    record = next(c for c in result["cells"] if c["id"] == "with_autocast-default-sgd-r-cpu")["record"]
    weights = load_file(record["weights_path"])
    nudge_one_ulp("layer0.bias", (1,))(weights)
    record["weights_path"] = str(tmp_path / "nudged.safetensors")
    save_file(weights, record["weights_path"])
    assert result["judging"] == "strict"
    path = tmp_path / "paired.json"
    save_result(MatrixResult.from_json(result), path)
    verdicts, statuses = {}, {}
    for flag in ("", "--tolerance-only", "--no-tolerance-only"):
        out = tmp_path / (flag or "as-run")
        done = run_cli("report", str(path), "--out", str(out), *([flag] if flag else []))
        assert done.stderr == ""
        statuses[flag] = done.returncode
        text = (out / "report.md").read_text()
        verdicts[flag] = next(v for v in ("diverged", "within_tolerance") if f"| python vs r | **{v}** |" in text)
    assert verdicts == {"": "diverged", "--tolerance-only": "within_tolerance", "--no-tolerance-only": "diverged"}
    assert statuses == {"": ExitCode.FAILED, "--tolerance-only": ExitCode.OK, "--no-tolerance-only": ExitCode.FAILED}


def test_report_of_a_newer_schema_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """A result from a newer schema gets one line telling the user to upgrade."""
    from harness.model.result import RESULT_SCHEMA_VERSION

    path = tmp_path / "future.json"
    newer = RESULT_SCHEMA_VERSION + 1
    path.write_text(json.dumps({"schema_version": newer, "cells": []}))
    done = run_cli("report", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == ExitCode.USAGE_ERROR
    assert done.stderr.strip() == (
        f"error: {path} has result schema version {newer}; this harness reads versions 2 to {RESULT_SCHEMA_VERSION}: "
        "upgrade amp-parity to read it."
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"batch_size": 2.5}', "error: batch_size must be a whole number >= 1, got 2.5."),
        ('{"lr": "fast"}', "error: lr must be a finite number > 0, got 'fast'."),
        ('{"epochs": -1, "preset": "tiny"}', "error: epochs must be a whole number >= 1, got -1."),
        ('{"colour": "blue"}', "error: field must be one of "),
        ("[1, 2]", "error: spec_file must be a JSON object of spec fields, got "),
        ("{broken", "error: spec_file must be valid JSON ("),
    ],
)
def test_bad_spec_files_end_in_one_line(tmp_path: Path, content: str, message: str) -> None:
    """A spec file with a bad value, an unknown field or broken JSON is refused with one line naming it."""
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(content)
    done = run_cli("run", "--spec-file", str(spec_file))
    assert done.returncode == ExitCode.USAGE_ERROR
    assert done.stderr.strip().startswith(message) and len(done.stderr.strip().splitlines()) == 1


def test_debug_shows_the_traceback_the_normal_run_hides() -> None:
    """``--debug`` adds the traceback to the same error line; without it there is none."""
    plain, debug = run_cli("run", "--batch-size", "0"), run_cli("--debug", "run", "--batch-size", "0")
    assert "Traceback" not in plain.stderr
    assert "Traceback" in debug.stderr and "SpecError" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == plain.stderr.strip()


def test_bf16_on_a_gpu_without_it_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU that lacks bf16, ``--amp-dtype bfloat16`` is refused, naming the GPU and float16 as the fix."""
    import torch

    from harness.errors import SpecError
    from harness.run.prepare import require_device
    from harness.workload.spec import WorkloadSpec

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    with pytest.raises(SpecError, match=r"amp_dtype must be 'float16' on Tesla T4, which has no bf16 support, got 'bfloat16'"):
        require_device(WorkloadSpec.from_preset("tiny", device="cuda", amp_dtype="bfloat16"))
    require_device(WorkloadSpec.from_preset("tiny", device="cuda"))  # float16 is fine


def test_the_console_command_names_itself_as_it_was_invoked(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``amp-parity`` (the console script) names itself in its errors; ``python -m harness`` keeps its own name."""
    from harness.cli.main import console_main

    monkeypatch.setattr("sys.argv", ["/venv/bin/amp-parity", "run", "--bogus"])
    with pytest.raises(SystemExit) as ended:
        console_main()
    assert ended.value.code == ExitCode.USAGE_ERROR
    assert capsys.readouterr().err.strip() == "error: unrecognized arguments: --bogus (see amp-parity run --help)."
    assert run_cli("run", "--bogus").stderr.strip() == "error: unrecognized arguments: --bogus (see python -m harness run --help)."
