"""Bad input a new user types: each is refused before any cell runs, in one ``error:`` line, exit 4 (a usage error).

The command's messages and exit statuses are checked through ``harness.cli.main.main`` in this process
(:func:`tests.support.run_cli`): a new interpreter per case cost seconds and checked nothing more.
``tests/integration/test_cli_bad_input.py`` runs ``python -m harness`` itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.errors import ExitCode
from tests.support import one_error_line, run_cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--lr", "inf"], "error: argument --lr: must be a finite number, got 'inf' (see python -m harness run --help)."),
        (["run", "--batch-size", "abc"],
         "error: argument --batch-size: must be a whole number, got 'abc' (see python -m harness run --help)."),
        (["run", "--rounds", "3.5"], "error: argument --rounds: must be a whole number, got '3.5' (see python -m harness run --help)."),
        (["run", "--no-such-flag"], "error: unrecognized arguments: --no-such-flag (see python -m harness run --help)."),
        ([], "error: the following arguments are required: COMMAND (see python -m harness --help)."),
        (["report", "x.json"], "error: the following arguments are required: --out (see python -m harness report --help)."),
        (["run", "--timeout", "nan"],
         "error: argument --timeout: must be a finite number, got 'nan' (see python -m harness run --help)."),
        (["run", "--timeout", "0"],
         "error: argument --timeout: must be a number of seconds > 0, got '0' (see python -m harness run --help)."),
        (["run", "--timeout", "-5"],
         "error: argument --timeout: must be a number of seconds > 0, got '-5' (see python -m harness run --help)."),
        (["run", "--max-seconds", "nan"],
         "error: argument --max-seconds: must be a finite number, got 'nan' (see python -m harness run --help)."),
        (["run", "--mode", ""], "error: mode must be one or more of 'default', 'autocast', 'lowp_weights', 'lowp_weights_scaled', "
                                "'autocast_scaler', 'autocast_scaler_clip', got ''."),
        (["run", "--frontend", ","], "error: --frontend must be one or more of NAME or NAME=LANGUAGE[:PATH], got ','."),
        (["run", "--lr", "1e308"], "error: lr must be a number a float32 holds, from 1.175e-38 to 3.403e+38 "
                                   "(it is a float32 in both frontends), got 1e+308."),
        (["run", "--init-scale", "1e308"], "error: init_scale must be a number a float32 holds, from 1.175e-38 to "
                                           "3.403e+38 (it is a float32 in both frontends), got 1e+308."),
        (["run", "--clip-max-norm", "1e-45"], "error: clip_max_norm must be a number a float32 holds, from 1.175e-38 to "
                                              "3.403e+38 (it is a float32 in both frontends), got 1e-45."),
        (["run", "--growth-interval", "3000000000"],
         "error: growth_interval must be a whole number from 1 to 2147483647 (R's largest integer), got 3000000000."),
        (["run", "--preset", ""], "error: preset must be one of 'tiny', 'bench', 'recipe', got ''."),
        (["run", "--overflow-steps", "3,,7"], "error: argument --overflow-steps: must be whole numbers separated by single "
                                              "commas (e.g. 3,7), got '3,,7' (see python -m harness run --help)."),
        (["run", "--overflow-steps", "3,"], "error: argument --overflow-steps: must be whole numbers separated by single "
                                            "commas (e.g. 3,7), got '3,' (see python -m harness run --help)."),
        (["run", "--mode", "default", "--mode", ""],
         "error: mode must be one of 'default', 'autocast', 'lowp_weights', 'lowp_weights_scaled', 'autocast_scaler', "
         "'autocast_scaler_clip', got ''."),
        (["run", "--mode", "default,,autocast"],
         "error: mode must be one of 'default', 'autocast', 'lowp_weights', 'lowp_weights_scaled', 'autocast_scaler', "
         "'autocast_scaler_clip', got ''."),
        (["run", "--frontend", "python,"], "error: --frontend must be one of 'python', 'r', or NAME=python:PATH / NAME=r:PATH, got ''."),
        (["run", "--lr", "-inf"], "error: argument --lr: must be a finite number, got '-inf' (see python -m harness run --help)."),
        (["run", "--lr", "-1e-3"], "error: lr must be a finite number > 0, got -0.001."),
        (["run", "--max-seconds", "-1e3"],
         "error: argument --max-seconds: must be a number of seconds > 0, got '-1e3' (see python -m harness run --help)."),
    ],
)
def test_bad_flags_are_one_line_and_a_usage_error(args: list[str], message: str) -> None:
    """argparse's own errors and values that would fail in every cell print the one line given here, exit 4 (a usage error)."""
    assert one_error_line(run_cli(*args)) == message


def test_help_still_prints_the_whole_help_and_exits_0() -> None:
    """``run --help`` is not an error: the full usage, every flag, exit 0."""
    done = run_cli("run", "--help")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("usage: python -m harness run") and "--timeout" in done.stdout and "--debug" in done.stdout


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_is_accepted_before_or_after_the_command(where: str) -> None:
    """``--debug`` works on either side of ``run`` (the error line says "run with --debug"), and shows the traceback."""
    args = ["--debug", "run", "--device", "tpu"] if where == "before" else ["run", "--device", "tpu", "--debug"]
    done = run_cli(*args)
    assert done.returncode == ExitCode.USAGE_ERROR
    assert "Traceback" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == "error: device must be one of 'cpu', 'cuda', got 'tpu'."


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"amp_dtype": ["bf16"]}, "error: amp_dtype must be a string: one of 'bfloat16', 'float16' (or bf16, fp16), got ['bf16']."),
        ({"device": {"name": "cpu"}}, "error: device must be a string: one of 'cpu', 'cuda', got {'name': 'cpu'}."),
        ({"preset": ["tiny"]}, "error: preset must be one of 'tiny', 'bench', 'recipe', got ['tiny']."),
        ({"preset": 3}, "error: preset must be one of 'tiny', 'bench', 'recipe', got 3."),
        ({"lr": "0.1"}, "error: lr must be a finite number > 0, got '0.1'."),
        ({"lr": [0.1]}, "error: lr must be a finite number > 0, got [0.1]."),
        ({"batch_size": 32.5}, "error: batch_size must be a whole number >= 1, got 32.5."),
        ({"threads": True}, "error: threads must be a whole number >= 0, got True."),
        ({"seed": None, "epochs": {}}, "error: epochs must be a whole number >= 1, got {}."),
        ({"init_scale": 1e300}, "error: init_scale must be a number a float32 holds, from 1.175e-38 to 3.403e+38 "
                                "(it is a float32 in both frontends), got 1e+300."),
        ({"no_such_field": 1}, None),
    ],
)
def test_spec_file_of_every_wrong_type_is_one_line(tmp_path: Path, content: dict[str, object], message: str | None) -> None:
    """A spec file whose field has the wrong JSON type is refused in one line naming the field (no TypeError)."""
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(content))
    line = one_error_line(run_cli("prepare", "--spec-file", str(spec_file)))
    if message is not None:
        assert line == message
    else:
        assert line.startswith("error: field must be one of 'preset', 'batch_size'") and line.endswith("got 'no_such_field'.")


def test_more_threads_than_cores_warns_in_one_line_naming_the_core_count() -> None:
    """``--threads 1000`` is accepted with one ``warning:`` line that names this machine's cores and the fix."""
    from harness.workload.spec import available_cores

    cores = available_cores()
    done = run_cli("prepare", "--threads", "1000")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == (
        f"warning: threads=1000 is more than the {cores} cores this process may use: threads that share a core make "
        f"every GEMM many times slower. Pass --threads {cores} (or 0 for all cores)."
    )
    assert json.loads(done.stdout)["threads"] == 1000
    assert run_cli("prepare", "--threads", str(cores)).stderr == ""


def test_refused_run_writes_nothing(tmp_path: Path) -> None:
    """An empty ``--mode`` is refused before any cell, so no (empty) result is written."""
    path = tmp_path / "run.json"
    one_error_line(run_cli("run", "--mode", ",", "--frontend", "python", "--json", str(path)))
    assert os.listdir(tmp_path) == []


def _deep_json(tmp_path: Path) -> Path:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    return path


def _sparse_giant(tmp_path: Path) -> Path:
    path = tmp_path / "giant.json"
    with open(path, "wb") as file:
        file.truncate(65 * 2**20)  # sparse: no disk used, but more than either limit
    return path


@pytest.mark.parametrize(
    ("make", "spec_says", "report_says"),
    [
        (lambda tmp: Path("/dev/zero"), "(not a regular file: it is a character device), got '/dev/zero'.",
         "/dev/zero is not a result file: not a regular file: it is a character device."),
        (_deep_json, "(nested too deeply to be read: thousands of levels of [ or {), got ",
         "deep.json is not a result file: nested too deeply to be read: thousands of levels of [ or {."),
        (_sparse_giant, "(larger than 1 MiB, more than any file of this kind holds), got ",
         "giant.json is not a result file: larger than 64 MiB, more than any file of this kind holds."),
    ],
    ids=["dev-zero", "100k-deep", "65-MiB"],
)
def test_what_is_not_a_json_file_is_refused_not_read(tmp_path: Path, make: object, spec_says: str, report_says: str) -> None:
    """``--spec-file`` and ``report`` refuse a device, a file too large, a 100k-deep JSON: one line each, nothing read to the end."""
    path = make(tmp_path)  # type: ignore[operator]
    spec = one_error_line(run_cli("run", "--spec-file", str(path)))
    assert spec.startswith("error: spec_file must be a regular file holding a JSON object of spec fields ") and spec_says in spec
    report = one_error_line(run_cli("report", str(path), "--out", str(tmp_path / "out")))
    assert report_says in report and "unexpected" not in report and not (tmp_path / "out").exists()


@pytest.mark.parametrize("length", [250, 300, 5000])
def test_a_json_name_too_long_for_the_file_system_is_one_line(tmp_path: Path, length: int) -> None:
    """``--json`` with a 250-, 300- or 5000-character name: the same "too long" line (300 was an unexpected Errno 36)."""
    line = one_error_line(run_cli("run", "--frontend", "python", "--mode", "default", "--json", str(tmp_path / ("j" * length + ".json"))))
    assert "a name is too long for the file system" in line and line.endswith("Choose another --json path.")
    assert list(tmp_path.iterdir()) == []


_OPTIMIZERS = ("'sgd', 'sgd_momentum', 'sgd_nesterov', 'rmsprop', 'rmsprop_centered', 'adam', 'adam_amsgrad', 'adamw', 'adagrad', "
               "'adadelta', 'asgd', 'rprop', 'ignite_sgd', 'ignite_adam', 'ignite_adamw', 'ignite_rmsprop', 'ignite_adagrad'")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--optimizer", "nadam"], f"error: optimizer must be one of {_OPTIMIZERS}, 'all', got 'nadam'."),
        (["trace", "--optimizer", "sgd", "--optimizer", "nadam"], f"error: optimizer must be one of {_OPTIMIZERS}, 'all', got 'nadam'."),
        (["run", "--optimizer", "all,nadam"], f"error: optimizer must be one of {_OPTIMIZERS}, 'all', got 'nadam'."),
        (["run", "--optimizer", ","], f"error: optimizer must be one or more of {_OPTIMIZERS}, 'all', got ','."),
        (["run", "--optimizer-arg", "adam.eps"], "error: argument --optimizer-arg: must be OPTIMIZER.ARG=VALUE (e.g. adam.eps=1e-6), "
                                                 "got 'adam.eps' (see python -m harness run --help)."),
        (["run", "--optimizer-arg", ".eps=1"], "error: argument --optimizer-arg: must be OPTIMIZER.ARG=VALUE (e.g. adam.eps=1e-6), "
                                               "got '.eps=1' (see python -m harness run --help)."),
        (["run", "--optimizer-arg", "adam.eps=abc"], "error: argument --optimizer-arg: must be a number, got 'abc' "
                                                     "(see python -m harness run --help)."),
        (["run", "--optimizer-arg", "adam.eps=inf"], "error: argument --optimizer-arg: must be a finite number, got 'inf' "
                                                     "(see python -m harness run --help)."),
        (["run", "--optimizer-arg", "nadam.eps=1e-6"], "error: optimizer_args must be an optimizer: one of "
                                                       f"{_OPTIMIZERS.replace(chr(39), '')}, got 'nadam'."),
        (["run", "--optimizer-arg", "adam.rho=0.9"],
         "error: optimizer_args.adam must be one of adam's arguments: lr, betas, eps, weight_decay, amsgrad, got 'rho'."),
        (["run", "--optimizer-arg", "adam.betas=0.9"],
         "error: optimizer_args.adam.betas must be two finite numbers >= 0, e.g. [0.9, 0.99], got 0.9."),
        (["run", "--optimizer-arg", "sgd_nesterov.nesterov=1"],
         "error: optimizer_args.sgd_nesterov.nesterov must be true or false, got 1.0."),
        (["run", "--optimizer-arg", "adam.eps=-1"], "error: optimizer_args.adam.eps must be a finite number >= 0, got -1.0."),
        (["run", "--optimizer-arg", "asgd.t0=2.5"],
         "error: optimizer_args.asgd.t0 must be a whole number from 0 to 2147483647 (R's largest integer), got 2.5."),
        (["run", "--optimizer", "sgd", "--optimizer-arg", "adam.eps=1e-6"],
         "error: --optimizer-arg must be about an optimizer this run runs (sgd): add --optimizer adam, or drop the flag, "
         "got 'adam.…'."),
        (["prepare", "--optimizer", "nadam"], f"error: optimizer must be one of {_OPTIMIZERS.replace(chr(39), '')}, got 'nadam'."),
        (["prepare", "--optimizer", "sgd,adam"], f"error: optimizer must be one of {_OPTIMIZERS.replace(chr(39), '')}, got 'sgd,adam'."),
    ],
)
def test_bad_optimizers_and_optimizer_args_are_one_line_and_exit_1(args: list[str], message: str, tmp_path: Path) -> None:
    """An unknown optimizer (``--optimizer``: several for run and trace, one for a run spec), a malformed ``--optimizer-arg``, or
    one naming an unknown optimizer, argument or a value of the wrong kind: refused before any cell, one line, nothing written."""
    path = tmp_path / "run.json"
    assert one_error_line(run_cli(*args, *(["--json", str(path)] if args[0] == "run" else []))) == message
    assert list(tmp_path.iterdir()) == []


def test_optimizer_args_reach_the_run_spec_and_add_to_the_spec_files(tmp_path: Path) -> None:
    """``--optimizer-arg`` replaces one hyperparameter of one row in the run spec, under each language's name; flags add to the
    spec file's ``optimizer_args`` (the flag wins for the same argument) rather than replacing the table."""
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({"optimizer_args": {"asgd": {"t0": 4, "alpha": 0.5}, "adam": {"eps": 1e-6}}}))
    done = run_cli("prepare", "--spec-file", str(spec_file), "--optimizer", "asgd", "--optimizer-arg", "asgd.t0=3",
                   "--optimizer-arg", "asgd.lambda=0.001")
    assert done.returncode == 0, done.stderr
    run_spec = json.loads(done.stdout)
    assert run_spec["optimizer_args"] == {"asgd": {"t0": 3, "alpha": 0.5, "lambda": 0.001}, "adam": {"eps": 1e-6}}
    optimizer = run_spec["optimizer"]
    assert optimizer["name"] == "asgd" and optimizer["r"]["function"] == "optim_asgd" and optimizer["python"]["class"] == "ASGD"
    assert optimizer["r"]["args"] == {"lr": run_spec["lr"], "lambda": 0.001, "alpha": 0.5, "t0": 3, "weight_decay": 0.01}
    assert optimizer["python"]["args"] == {"lr": run_spec["lr"], "lambd": 0.001, "alpha": 0.5, "t0": 3, "weight_decay": 0.01}
    pairs = json.loads(run_cli("prepare", "--optimizer", "adam", "--optimizer-arg", "adam.betas=0.8,0.9").stdout)["optimizer"]
    assert pairs["python"]["args"]["betas"] == pairs["r"]["args"]["betas"] == [0.8, 0.9]
    flag = json.loads(run_cli("prepare", "--optimizer", "sgd_nesterov", "--optimizer-arg", "sgd_nesterov.nesterov=false").stdout)
    assert flag["optimizer"]["python"]["args"]["nesterov"] is False


@pytest.mark.parametrize("script", ["with_autocast", "cuda_amp_grad_scaler"])
def test_the_run_spec_carries_the_scripts_modes_and_the_contract(script: str) -> None:
    """``prepare --script S`` hands S's modes with their properties, the optimizer row (plain SGD by default), no switches, and
    the record's fields with their kinds, its version and the dtype table (harness/contract/): what both languages' scripts
    read."""
    from harness.contract.dtypes import dtype_table
    from harness.contract.modes import SCRIPTS
    from harness.contract.record import RECORD_FIELD_NAMES, RECORD_SCHEMA_VERSION, record_field_kinds

    run_spec = json.loads(run_cli("prepare", "--script", script).stdout)
    assert run_spec["modes"] == SCRIPTS[script].modes_json()
    assert run_spec["optimizer"]["name"] == "sgd" and run_spec["optimizer"]["python"] == {"class": "SGD", "args": {"lr": run_spec["lr"]}}
    assert run_spec["switches"] == [] and run_spec["static_loss_scale"] == 1024.0
    assert (run_spec["record_fields"], run_spec["record_schema_version"]) == (record_field_kinds(), RECORD_SCHEMA_VERSION)
    assert list(run_spec["record_fields"]) == list(RECORD_FIELD_NAMES) and RECORD_SCHEMA_VERSION == 5
    assert run_spec["record_fields"]["switches"] == "list of strings" and run_spec["dtypes"] == dtype_table()


def test_a_spec_files_arguments_for_optimizers_that_do_not_run_leave_the_spec_alone(tmp_path: Path) -> None:
    """A spec file may carry every optimizer's arguments: a run of ``sgd`` alone has the spec (and digest) of a run without
    them, so the two compare as the same spec; ``adam``'s stay where ``adam`` runs."""
    import argparse

    from harness.workload.flags import for_optimizers
    from harness.workload.spec import WorkloadSpec

    spec = WorkloadSpec.from_preset("tiny", optimizer_args={"adam": {"eps": 1e-6}})
    args = argparse.Namespace(optimizer_args=None)
    assert for_optimizers(spec, args, ("sgd",)).digest() == WorkloadSpec.from_preset("tiny").digest()
    assert for_optimizers(spec, args, ("sgd", "adam")) is spec
