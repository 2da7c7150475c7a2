"""The scripts' side needs torch, numpy and safetensors only: with rich, matplotlib and rpy2 blocked, a script runs by hand,
the harness prepares an R script's run spec, and the worker side serves a cell, a trace and a matmul peak."""

from __future__ import annotations

import json
import subprocess
import sys

from harness.files.paths import REPO_ROOT

#: Installed first in a fresh interpreter: importing any of these fails, as it would where they are not installed.
_BLOCK = """
import importlib.abc, sys
BLOCKED = {"rich", "matplotlib", "rpy2"}
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: the scripts' side must not need it")
        return None
sys.meta_path.insert(0, Blocked())
"""

_SCRIPT = _BLOCK + """
import runpy
sys.argv = ["py_scripts/with_autocast.py", "--preset", "tiny", "--mode", "autocast", "--device", "cpu"]
runpy.run_path("py_scripts/with_autocast.py", run_name="__main__")
"""

_PREPARE = _BLOCK + """
import runpy
sys.argv = ["harness", "prepare", "--shell-of", "with_autocast.R", "--",
            "--preset", "tiny", "--mode", "default", "--optimizer", "adam"]
runpy.run_module("harness", run_name="__main__")
"""

_WORKER = _BLOCK + """
import json
from harness.worker_side.python_handler import PythonHandler
from harness.run.prepare import prepare_run_spec
from harness.workload.spec import WorkloadSpec
spec = WorkloadSpec.from_preset("tiny")
run_spec = prepare_run_spec(spec, "cuda_amp_grad_scaler", "sgd", save_weights=False)
request = {"script": "cuda_amp_grad_scaler", "mode": "autocast_scaler_clip", "run_spec": run_spec}
handler = PythonHandler()
record = handler(request)
trace = handler(request | {"kind": "trace", "trace": {"keep": []}})
peak = handler({"kind": "matmul_peak", "device": "cpu", "dtype": "float32", "threads": 1})
print(json.dumps({"losses": len(record["losses"]), "points": len(trace["points"]), "tflops": peak["tflops"] > 0,
                  "loaded": sorted(m for m in ("rich", "matplotlib", "rpy2") if m in sys.modules)}))
"""


def _bare(program: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", program], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_the_block_itself_stops_an_import() -> None:
    """The blocked interpreter refuses ``import rich`` (so the tests below could fail)."""
    done = _bare(_BLOCK + "import rich\n")
    assert done.returncode != 0 and "rich is blocked" in done.stderr


def test_a_script_runs_by_hand_without_rich_matplotlib_or_rpy2() -> None:
    """``python py_scripts/with_autocast.py --preset tiny --mode autocast`` prints its record with those blocked."""
    done = _bare(_SCRIPT)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout.splitlines()[-1])
    assert record["mode"] == "autocast" and len(record["losses"]) == 20 and record["output_dtype"] == "bfloat16"


def test_an_r_scripts_run_spec_is_prepared_without_them() -> None:
    """``python -m harness prepare --shell-of ...`` (what an R script run by hand calls) answers with those blocked."""
    done = _bare(_PREPARE)
    assert done.returncode == 0, done.stderr[-2000:]
    prepared = json.loads(done.stdout.splitlines()[-1])
    assert prepared["mode"] == "default" and prepared["spec"]["preset"] == "tiny" and prepared["spec"]["optimizer"]["name"] == "adam"


def test_the_worker_side_serves_a_cell_a_trace_and_a_peak_without_them() -> None:
    """The Python worker's handler runs a scaler cell, traces it and measures a matmul peak with those blocked."""
    done = _bare(_WORKER)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found == {"losses": 20, "points": found["points"], "tflops": True, "loaded": []} and found["points"] > 100
