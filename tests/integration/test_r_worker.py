"""The R worker: rpy2 embeds R in its own process, survives R errors, crashes and hangs (no R torch needed)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ScriptError, WorkerCrashed, WorkerError, WorkerTimeout
from harness.files.paths import REPO_ROOT
from harness.run.availability import Availability
from harness.run.frontends import open_worker
from harness.run.worker import Worker

BRIDGE = REPO_ROOT / "tests" / "r_bridge"


@pytest.fixture(scope="module")
def r_worker(availability: Availability) -> Iterator[Worker]:
    """One R worker for the module, as the harness keeps one across benchmark rounds."""
    if availability.rscript is None or availability.rpy2_version is None or availability.rpy2_error:
        pytest.skip(availability.r_reason or "R or rpy2 missing")
    worker = open_worker("r")
    yield worker
    worker.close()


def _request(script: str, mode: str = "default", **spec: Any) -> dict[str, Any]:
    return {"script": script, "script_path": str(BRIDGE / f"{script}.R"), "mode": mode,
            "spec_summary": "preset tiny, device cpu", "run_spec": {"device": "cpu", "epochs": 2, "num_batches": 3, **spec}}


def test_worker_calls_r_and_returns_values(r_worker: Worker) -> None:
    """A call returns R's record as plain data, with one-element vectors kept as arrays."""
    record = r_worker.call(_request("echo", epochs=1, num_batches=1), timeout=60)
    assert record["losses"] == [1.0] and record["final_loss"] == 1.0
    record = r_worker.call(_request("echo", "autocast_scaler", init_scale=1024.0), timeout=60)
    assert record["losses"] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5, 1 / 6], rel=0, abs=0)
    assert record["loss_scale"] == [1024.0] * 6 and record["skipped"] == [False] * 6
    assert record["frontend"] == "r" and record["language_version"].startswith("R version")


def test_r_console_output_goes_to_python_logging(r_worker: Worker, caplog: pytest.LogCaptureFixture) -> None:
    """R's cat() and message() lines reach the ``harness.r`` logger of the parent process."""
    with caplog.at_level(logging.INFO, logger="harness.r"):
        r_worker.call(_request("echo"), timeout=60)
    messages = [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name == "harness.r"]
    assert ("harness.r", logging.INFO, "echo.R: cat() line") in messages
    assert ("harness.r", logging.WARNING, "echo.R: message() line") in messages


def test_r_error_keeps_rs_message_script_mode_and_spec(r_worker: Worker) -> None:
    """An R error becomes a ScriptError with R's own message, the script, the mode and the spec."""
    r_worker.start()
    pid = r_worker.pid
    assert pid is not None
    with pytest.raises(ScriptError) as info:
        r_worker.call(_request("r_error", "autocast"), timeout=60)
    assert "deliberate failure in r_error.R" in info.value.frontend_message
    assert "r_error" in str(info.value) and "mode autocast" in str(info.value) and "preset tiny" in str(info.value)
    assert r_worker.pid == pid  # the worker survived


def test_syntax_error_is_reported_with_rs_parse_message(r_worker: Worker) -> None:
    """A script that does not parse gives R's parse error, and the worker lives on."""
    with pytest.raises(ScriptError, match="unexpected"):
        r_worker.call(_request("syntax_error"), timeout=60)
    assert r_worker.call(_request("echo"), timeout=60)["script"] == "echo"


def test_crash_becomes_a_worker_error_and_the_next_call_works(r_worker: Worker) -> None:
    """A segfault kills the worker: the call raises WorkerCrashed naming the signal, the next call restarts it."""
    r_worker.start()
    starts = r_worker.starts
    with pytest.raises(WorkerCrashed, match="SIGSEGV|signal|status"):
        r_worker.call(_request("crash"), timeout=60)
    assert r_worker.call(_request("echo"), timeout=60)["script"] == "echo"
    assert r_worker.starts == starts + 1


def test_hang_past_the_timeout_is_stopped(r_worker: Worker) -> None:
    """A script that sleeps past its timeout raises WorkerTimeout within seconds, and the worker restarts."""
    with pytest.raises(WorkerTimeout, match="within 2 s"):
        r_worker.call(_request("hang"), timeout=2)
    assert r_worker.call(_request("echo"), timeout=60)["script"] == "echo"


def test_r_worker_never_loads_python_torch(r_worker: Worker) -> None:
    """The R worker's process has not imported Python torch (two libtorch builds must never meet)."""
    assert r_worker.call(_request("echo"), timeout=60)["script"] == "echo"
    assert _python_modules_of(r_worker) == []


def _python_modules_of(worker: Worker) -> list[str]:
    """Python torch's shared libraries mapped into the worker process (none for the R worker)."""
    with open(f"/proc/{worker.pid}/maps") as handle:
        maps = handle.read()
    return sorted({line.split()[-1] for line in maps.splitlines() if "libtorch_python" in line})


def test_worker_killed_from_outside_is_reported_with_the_signal(r_worker: Worker) -> None:
    """A worker killed by another process (OOM killer, a user) mid-call is a WorkerCrashed naming SIGKILL."""
    import os
    import signal
    import threading

    r_worker.start()
    pid = r_worker.pid
    assert pid is not None
    killer = threading.Timer(1.0, os.kill, args=(pid, signal.SIGKILL))
    killer.start()
    try:
        with pytest.raises(WorkerCrashed, match="killed by signal SIGKILL"):
            r_worker.call(_request("hang"), timeout=60)
    finally:
        killer.cancel()
    assert r_worker.call(_request("echo"), timeout=60)["script"] == "echo"


_COUNTING_SCRIPT = """
assign("times_sourced", get0("times_sourced", envir = globalenv(), ifnotfound = 0) + 1, envir = globalenv())
run_workload <- function(spec, mode) list(version = "{version}", times_sourced = get("times_sourced", envir = globalenv()))
"""


def test_a_script_is_sourced_once_until_it_changes(r_worker: Worker, tmp_path: Any) -> None:
    """Repeated calls reuse the sourced script (its parse time stays out of timed rounds); an edited file is sourced again."""
    import os

    script = tmp_path / "counting.R"
    script.write_text(_COUNTING_SCRIPT.replace("{version}", "one"))
    request = {**_request("echo"), "script_path": str(script)}
    first = r_worker.call(request, timeout=60)
    assert r_worker.call(request, timeout=60) == first and first["version"] == "one"
    script.write_text(_COUNTING_SCRIPT.replace("{version}", "two"))
    later = os.stat(script).st_mtime + 5
    os.utime(script, (later, later))
    again = r_worker.call(request, timeout=60)
    assert again == {"version": "two", "times_sourced": first["times_sourced"] + 1}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_r_worker_times_the_calibration_loop(r_worker: Worker, availability: Availability, dtype: str) -> None:
    """A calibrate request gets R torch's loop's seconds and its step count; more steps take longer; a request the loop
    would misread is refused in one line, and the worker lives on (the twin of tests/unit/worker_side/test_calibration.py)."""
    from tests.support import require_r_torch

    require_r_torch(availability)
    request = {"kind": "calibrate", "device": "cpu", "dtype": dtype, "threads": 1, "iterations": 3,
               "batch_size": 8, "in_size": 16, "out_size": 4, "num_layers": 3}
    reply = r_worker.call(request, timeout=120)
    assert set(reply) == {"seconds", "iterations"} and reply["iterations"] == 3
    assert isinstance(reply["seconds"], float) and 0 < reply["seconds"] < 10
    assert r_worker.call(request | {"iterations": 300}, timeout=120)["seconds"] > 10 * r_worker.call(request, timeout=120)["seconds"]
    with pytest.raises(WorkerError, match=r"could not answer its calibrate request: .*iterations must be a whole number of at least 1"):
        r_worker.call(request | {"iterations": 0}, timeout=120)
    assert r_worker.call(request, timeout=120)["iterations"] == 3


def test_the_run_spec_parsed_field_by_field_is_the_whole_spec_parsed_at_once(r_worker: Worker) -> None:
    """R's bridge parses each top-level field of a run spec once per worker and keeps it (``parse_run_spec()``): for every
    distinct run spec of the main job (every script, optimizer row, feature and model, with and without weights), what it
    gives is identical() to ``jsonlite::fromJSON`` of the whole spec, on a first parse and again from what was kept; and past
    the cache's bound (a weights path per record call) it starts again and stays so (``tests/r_bridge/spec_check.R``). The
    spec a call hands its script is the same."""
    from harness.contract.modes import all_mode_names
    from harness.run.prepare import prepare_run_spec
    from harness.workload.features import FEATURES, NO_FEATURE
    from harness.workload.matrix import cells_for
    from harness.workload.model_designs import PRESET_MODELS
    from harness.workload.optimizers import OPTIMIZERS
    from harness.workload.spec import WorkloadSpec

    spec = WorkloadSpec.from_preset("tiny")
    specs: dict[str, dict[str, str]] = {}
    for cell in cells_for(("r",), all_mode_names(), tuple(OPTIMIZERS), "cpu", (NO_FEATURE, *FEATURES), PRESET_MODELS["tiny"]):
        for save in (False, True):
            run_spec = prepare_run_spec(spec.for_model(cell.model), cell.script, cell.optimizer, weights_out=Path("w.safetensors"),
                                        save_weights=save, feature=cell.feature)
            specs[json.dumps(run_spec)] = {name: json.dumps(value) for name, value in run_spec.items()}
    own = json.loads(next(iter(specs)))
    fresh = 1100  # more than the bridge keeps (PARSED_FIELDS_MAX), beside the batch's own fields
    request = {**_request("spec_check"), "run_spec": {**own, "own": json.dumps(own), "batch": json.dumps(list(specs.values())),
                                                       "fresh": fresh}}
    reply = r_worker.call(request, timeout=120)
    assert reply == {"same": 3 * len(specs) + fresh, "checked": 3 * len(specs) + fresh, "given": True}
    assert len(specs) > 100


def test_r_torchs_buffer_ignores_a_views_storage_offset(availability: Availability) -> None:
    """Upstream bug the trace found: R torch's buffer_from_torch_tensor(x[2, ]) returns row 1's bytes (the bridge clones first).

    When R torch fixes lantern's _lantern_buffer_from_tensor this fails: then docs/known-differences.md and the
    clone in r_scripts/_bridge.R's trace sink can say so.
    """
    import subprocess

    from tests.support import require_r_torch

    require_r_torch(availability)
    code = (
        "x <- torch::torch_arange(0, 8, dtype = torch::torch_float32())$reshape(c(3, 3)); "
        "cat(readBin(torch::buffer_from_torch_tensor(x[2, ]), 'numeric', size = 4, n = 3), '|', "
        "readBin(torch::buffer_from_torch_tensor(x[2, ]$clone()), 'numeric', size = 4, n = 3))"
    )
    done = subprocess.run(["Rscript", "-e", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1", "2", "|", "3", "4", "5"]


def test_an_r_number_point_has_the_bytes_of_its_0d_tensor(availability: Availability) -> None:
    """Issue 38: the trace writes an R number's bytes itself (``number_bytes(number_point(...))`` in tracing.R), where it
    made a 0-d float64 or int64 tensor of it before: the same 8 bytes for every value, the edges included (a subnormal,
    the infinities, NaN, -0, counts across 2^31 and 2^32, negative ones), so no digest changed; and no warning."""
    from harness.files.paths import script_path
    from tests.support import require_r_torch

    require_r_torch(availability)
    code = (
        f"e <- new.env(); sys.source({str(script_path('r', 'tracing'))!r}, envir = e); "
        "bytes <- function(v, dtype) torch::buffer_from_torch_tensor(torch::torch_scalar_tensor(v, dtype = "
        "if (dtype == 'int64') torch::torch_int64() else torch::torch_float64())); "
        "ok <- c(vapply(c(0.1, -2.5, 1e-300, 5e-324, Inf, -Inf, NaN, 0, -0, 1/3), function(v) "
        "identical(e$number_bytes(e$number_point(v)), bytes(v, 'float64')), NA), "
        "vapply(c(0, 1, 7, 2^31 - 1, 2^31, 2^32, 2^40 + 3, -1, -2^31, -2^31 - 5, 2^53 - 1, -(2^53 - 1)), function(v) "
        "identical(e$number_bytes(e$number_point(v, 'int64')), bytes(v, 'int64')), NA)); "
        "cat(ok)"
    )
    done = subprocess.run(["Rscript", "-e", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["TRUE"] * 22
    assert "Warning" not in done.stderr


def test_a_traced_r_call_records_the_shapes_python_records(availability: Availability) -> None:
    """The trace sink's shapes (``dim()`` of each point, _bridge.R) are Python's, 0-d points included (the loss, the scaler's
    scale, found_inf and growth tracker, the clip's total norm: ``[]``), but for the clip's coefficient, which R torch
    computes with one element (``max_norm / (total_norm + 1e-6)``: R's number becomes a 1-element tensor,
    R/nn-utils-clip-grad.R); the dtypes are Python's too."""
    from harness.run.prepare import prepare_run_spec
    from harness.workload.spec import WorkloadSpec
    from tests.support import require_r_torch

    require_r_torch(availability)
    run_spec = prepare_run_spec(WorkloadSpec.from_preset("tiny"), "cuda_amp_grad_scaler", "sgd", save_weights=False)
    request = {"script": "cuda_amp_grad_scaler", "mode": "autocast_scaler_clip", "spec_summary": "preset tiny, device cpu",
               "run_spec": run_spec, "kind": "trace", "trace": {"keep": [], "stop": False}}
    points = {}
    for frontend in ("r", "python"):
        worker = open_worker(frontend)
        try:
            reply = worker.call(request, timeout=300)
            points[frontend] = {(step, name): (dtype, shape) for step, name, dtype, shape, *_ in reply["points"]}
        finally:
            worker.close()
    scalars = {name for (_, name), (_, shape) in points["r"].items() if shape == []}
    assert {"loss", "scaler.scale", "scaler.found_inf", "scaler.growth_tracker", "clip.total_norm"} <= scalars
    r_coef = {key: (dtype, [1]) for key, (dtype, _) in points["python"].items() if key[1] == "clip.coef"}
    assert r_coef and points["r"] == points["python"] | r_coef


def test_the_r_worker_leaves_rs_event_hook_unset(availability: Availability) -> None:
    """rpy2 points R's process-events hook at a Python callback, called from every interrupt check of R's loops (632 times
    in one bench autocast call); the worker unsets it, so R's timed loop runs as under Rscript."""
    if availability.rscript is None or availability.rpy2_version is None or availability.rpy2_error:
        pytest.skip(availability.r_reason or "R or rpy2 missing")
    code = ("from harness.worker_side.r_handler import RHandler; from rpy2.rinterface_lib import openrlib; RHandler(); "
            "print(openrlib.rlib.ptr_R_ProcessEvents == openrlib.ffi.NULL)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "True"
