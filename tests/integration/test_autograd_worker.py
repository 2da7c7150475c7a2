"""The float64 autograd worker's client (harness/judge/models/autograd_client.py), with its worker process: its pipes
closed at exit, its answers remembered bitwise."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from harness.judge.models import autograd_client
from harness.workload.fixtures import ensure_fixtures, load_fixture_arrays
from harness.workload.spec import WorkloadSpec

_ROOT = Path(__file__).resolve().parents[2]


def test_a_model_run_leaves_no_pipe_of_the_worker_unclosed_at_exit() -> None:
    """Every model run printed ``sys:1: ResourceWarning: unclosed file <_io.BufferedReader name=9>`` at its end: the
    worker's stdout, never closed. A process that asks the worker once and exits, with ResourceWarning shown, prints none."""
    script = textwrap.dedent("""
        import numpy as np
        from harness.judge.models import reference_model
        gradients = reference_model("gru").gradients
        params = {"gru.weight_ih_l0": np.ones((18, 3)), "gru.weight_hh_l0": np.ones((18, 6)), "gru.bias_ih_l0": np.ones(18),
                  "gru.bias_hh_l0": np.ones(18), "head.weight": np.ones((2, 6)), "head.bias": np.ones(2)}
        loss, grads = gradients(params, np.ones((4, 5, 3)), np.ones((4, 2)), -1, 1, 0.0)
        print("answered", len(grads))
    """)
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", script], cwd=_ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(_ROOT)})
    assert done.returncode == 0 and "answered 6" in done.stdout, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr


@pytest.fixture(scope="module")
def gru_case(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    spec = WorkloadSpec.from_preset("tiny", model="gru")
    arrays = load_fixture_arrays(ensure_fixtures(spec, tmp_path_factory.mktemp("fx")))
    params = {p.name: arrays[p.name].astype(np.float64) for p in spec.parameters}
    return params, arrays["data"][0].astype(np.float64), arrays["targets"][0].astype(np.float64)


def test_a_request_asked_again_is_answered_from_memory_bitwise_and_as_a_copy(
        gru_case: tuple[dict[str, np.ndarray], np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reference's first step is the same request, and a replay of skipped steps is its plain run's up to the first
    skip: the second ask is not sent, its answer is the first's bit for bit, and changing one answer changes no other."""
    params, x, target = gru_case
    gradients = autograd_client.model_reference("gru")[0]
    monkeypatch.setattr(autograd_client, "_memo", type(autograd_client._memo)())
    sent = []
    real_start = autograd_client.start
    monkeypatch.setattr(autograd_client, "start", lambda: sent.append(1) or real_start())
    loss, first = gradients(params, x, target, -1, 1, 0.0)
    again_loss, again = gradients(params, x, target, -1, 1, 0.0)
    assert len(sent) == 1 and loss == again_loss
    assert all(first[n] is not None and np.array_equal(first[n], again[n]) for n in params)  # type: ignore[arg-type]
    first["head.bias"][...] = 0.0  # type: ignore[index]
    assert not np.array_equal(gradients(params, x, target, -1, 1, 0.0)[1]["head.bias"], first["head.bias"])  # type: ignore[arg-type]
    other = {**params, "head.bias": params["head.bias"] + 1.0}
    gradients(other, x, target, -1, 1, 0.0)
    assert len(sent) == 2  # another request is sent
