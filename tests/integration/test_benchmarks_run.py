"""The benchmark suite really runs and saves what ``--benchmark-compare`` needs (Python cells, 3 rounds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.files.paths import REPO_ROOT


def test_benchmarks_run_and_record_extra_info(tmp_path: Path) -> None:
    """``pytest tests/benchmarks --benchmark-only`` times each Python cell, grouped by pair, with loop time, bridge and set-up."""
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/benchmarks", "--benchmark-only", f"--benchmark-json={out}",
         "-k", "python", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "AMP_PARITY_BENCH_ROUNDS": "3"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    benchmarks = json.loads(out.read_text())["benchmarks"]
    assert sorted(b["group"] for b in benchmarks) == sorted([  # every mode of both scripts, plain SGD by default
        "with_autocast-default-sgd-cpu", "with_autocast-autocast-sgd-cpu", "with_autocast-lowp_weights-sgd-cpu",
        "with_autocast-lowp_weights_scaled-sgd-cpu", "cuda_amp_grad_scaler-default-sgd-cpu",
        "cuda_amp_grad_scaler-autocast_scaler-sgd-cpu", "cuda_amp_grad_scaler-autocast_scaler_clip-sgd-cpu",
    ])
    for bench in benchmarks:
        assert bench["stats"]["rounds"] == 3
        info = bench["extra_info"]
        assert info["frontend"] == "python" and info["preset"] == "tiny" and info["final_loss"] > 0 and info["optimizer"] == "sgd"
        assert info["torch_version"].startswith("2.") and 0 < info["loop_seconds_median"] < bench["stats"]["median"]
        assert info["overhead_seconds"] == bench["stats"]["median"] - info["workload_seconds_median"]
        assert info["setup_seconds"] == info["workload_seconds_median"] - info["loop_seconds_median"] > 0
        assert info["clock"] == "time.perf_counter"
        assert 0 < info["overhead_share"] < 1 and info["tflops"] > 0
