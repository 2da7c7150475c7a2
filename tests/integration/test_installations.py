"""Installations as frontends, run for real: a second Python (a venv reusing this torch), an R library path, a planted
installation, a broken one, and the merge of two installations' results.

A venv made with ``--system-site-packages`` is a second interpreter that loads this very libtorch: seconds to make,
and the pair must be ``identical`` with identity expected *because* both sides report one build. A planted one
(its ``sitecustomize`` nudges SGD's learning rate) must be caught.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.errors import ExitCode, UsageError
from harness.files.paths import REPO_ROOT
from harness.model.result import MatrixResult
from harness.model.verdicts import PairVerdict
from harness.run.availability import Availability
from harness.run.frontends import worker_env
from harness.run.runner import MatrixRunner
from harness.store.merge import merge_results
from harness.store.result_file import save_result
from harness.workload.installations import Installation
from harness.workload.spec import WorkloadSpec
from tests.support import kept_workers, require_r_torch, run_cli

#: A real difference inside an installation: its torch's SGD steps with lr * (1 + 1e-6).
_PLANTED_SITECUSTOMIZE = """
import torch

_init = torch.optim.SGD.__init__


def _nudged(self, params, lr=1e-3, *args, **kwargs):
    _init(self, params, lr * (1 + 1e-6), *args, **kwargs)


torch.optim.SGD.__init__ = _nudged
"""


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A second Python installation that reuses this one's torch (its own interpreter path, its own sys.prefix)."""
    folder = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)], check=True)
    return str(folder / "bin" / "python")


def _run(spec: WorkloadSpec, frontends: tuple[Installation | str, ...], availability: Availability,
         weights: Path | None = None, trace: bool = False) -> MatrixResult:
    """The ``default`` cells of ``frontends`` (both scripts' own, plain SGD); ``weights``: a folder that keeps their final weights
    (a result to merge reads them), else a temporary one, removed after (the verdicts are judged before)."""
    if weights is not None:
        weights.mkdir()
    with contextlib.ExitStack() as stack:
        staging = weights if weights is not None else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="amp-parity-test-")))
        with MatrixRunner(spec, frontends, timeout=300, availability=availability, trace=trace, staging=staging,
                          kept=kept_workers()) as runner:
            return runner.run(("default",), ("sgd",), measure=False)  # the record calls: what the verdicts and facts read


def _default_pairs(pairs: tuple[PairVerdict, ...]) -> tuple[PairVerdict, PairVerdict]:
    """The two pairs of a run of ``default``: with_autocast's and the scaler script's own, in that order."""
    assert [(p.script, p.mode) for p in pairs] == [("with_autocast", "default"), ("cuda_amp_grad_scaler", "default")], pairs
    return pairs[0], pairs[1]


def test_a_second_python_on_one_build_is_identical_and_says_why(
    tiny_spec: WorkloadSpec, availability: Availability, venv_python: str,
) -> None:
    """python and a venv's python: one libtorch build on one CPU, so identity is expected, and met."""
    result = _run(tiny_spec, ("python", Installation("venv", "python", python=venv_python)), availability)
    for pair in _default_pairs(result.pairs):
        assert (pair.frontends, pair.verdict, pair.details["identity_expected"]) == (("python", "venv"), "identical", True)
        assert pair.explanation[1].startswith("expected: python and venv load one libtorch build (")
    python, venv = (c.installation or {} for c in result.cells[:2])  # with_autocast's default pair
    assert venv["interpreter"] == venv_python and python["interpreter"] == sys.executable
    assert python["libtorch_build"] == venv["libtorch_build"] and len(python["libtorch_build"]) == 40


def test_a_planted_installation_is_diverged(tiny_spec: WorkloadSpec, availability: Availability, tmp_path: Path) -> None:
    """An installation whose torch steps SGD with lr * (1 + 1e-6): same build, so anything but identity is a finding, and
    the trace (each side in its own interpreter's worker) names where the two installations part."""
    (tmp_path / "sitecustomize.py").write_text(_PLANTED_SITECUSTOMIZE)
    planted = Installation("planted", "python", python=sys.executable, env={"PYTHONPATH": str(tmp_path)})
    result = _run(tiny_spec, ("python", planted), availability, trace=True)
    for pair, trace in zip(_default_pairs(result.pairs), result.traces, strict=True):  # both scripts build the nudged SGD
        assert pair.verdict == "diverged" and pair.details["identity_expected"]
        assert "not bitwise identical where identity is expected" in pair.summary
        assert trace.pair == pair.pair and trace.frontends == ("python", "planted") and trace.first_difference is not None
        assert f"first differs at step {trace.first_difference.step}, {trace.first_difference.point}" in pair.summary


def test_a_broken_installation_is_refused_before_any_cell(tmp_path: Path) -> None:
    """A venv without torch: one line naming the installation, what it said and the fix; no result is written."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    out = tmp_path / "r.json"
    done = run_cli("run", "--preset", "tiny", "--frontend", f"python,bare=python:{bare}", "--json", str(out), "--rounds", "1")
    assert done.returncode == ExitCode.USAGE_ERROR and len(done.stderr.strip().splitlines()) == 1, done.stderr
    line = done.stderr.strip()
    assert line.startswith("error: installation bare must be one that starts a worker (bare worker could not start: ")
    assert "No module named 'torch'" in line
    assert line.endswith(f"pip install torch numpy safetensors blake3 in it, got 'python: {bare}/bin/python'.")
    assert not out.exists() and not (tmp_path / "r.weights").exists()


def test_an_installation_without_the_trace_hash_is_refused_before_any_cell(tmp_path: Path) -> None:
    """A venv with torch, numpy and safetensors (the system's) but no blake3, which hashes every trace point in the
    worker: refused at start, naming the module, before a cell runs; not a cell error at its first traced call."""
    venv = tmp_path / "nob3"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "blake3.py").write_text("raise ModuleNotFoundError(\"No module named 'blake3'\", name='blake3')\n")
    out = tmp_path / "r.json"
    done = run_cli("run", "--preset", "tiny", "--frontend", f"python,nob3=python:{venv}", "--json", str(out), "--rounds", "1")
    assert done.returncode == ExitCode.USAGE_ERROR and len(done.stderr.strip().splitlines()) == 1, done.stderr
    line = done.stderr.strip()
    assert line.startswith("error: installation nob3 must be one that starts a worker") and "No module named 'blake3'" in line
    assert "pip install torch numpy safetensors blake3 in it" in line
    assert not out.exists()


def test_an_r_library_path_is_an_installation(tiny_spec: WorkloadSpec, availability: Availability) -> None:
    """The R library this machine's R torch is in, named as an installation: the same build as ``r``, so identical."""
    require_r_torch(availability)
    library = next(p for p in os.environ.get("R_LIBS", "").split(os.pathsep) if p and (Path(p) / "torch").is_dir())
    result = _run(tiny_spec, ("r", Installation("rlib", "r", r_libs=library)), availability)
    for pair in _default_pairs(result.pairs):
        assert (pair.frontends, pair.verdict, pair.details["identity_expected"]) == (("r", "rlib"), "identical", True)
    assert result.cells[1].installation and result.cells[1].installation["r_libs"] == library


def test_results_of_two_installations_merge_into_one_judged_pair(
    tiny_spec: WorkloadSpec, availability: Availability, venv_python: str, tmp_path: Path,
) -> None:
    """Two runs (as two CI jobs would make them), one installation each, merged: the pair is judged as if run together."""
    a, b = tmp_path / "python.json", tmp_path / "venv.json"
    save_result(_run(tiny_spec, ("python",), availability, tmp_path / "python.weights"), a)
    save_result(_run(tiny_spec, (Installation("venv", "python", python=venv_python),), availability, tmp_path / "venv.weights"), b)
    merged = merge_results([a, b])
    for pair in _default_pairs(merged.pairs):
        assert (pair.frontends, pair.verdict, pair.details["identity_expected"]) == (("python", "venv"), "identical", True)
    done = run_cli("merge", str(a), str(b), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    assert "| `with_autocast-default-sgd-cpu` | python vs venv | **identical** |" in (tmp_path / "report" / "report.md").read_text()


def test_what_an_activation_script_exports_is_the_worker_s_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sourced in bash with the installation's ``env`` (an R torch bundle reads AMP_RTORCH_TORCH_PYTHON): what changed is kept,
    and this shell's R torch is not passed on: what chooses an R torch is the script's alone (none set: none given)."""
    script = tmp_path / "activate.sh"
    script.write_text('export TORCH_HOME="$HOME_OF_BUNDLE/torchhome"\nexport R_LIBS="/bundle/Rlib${R_LIBS:+:$R_LIBS}"\nplain=1\n')
    monkeypatch.setenv("R_LIBS", "/site")
    env = worker_env(Installation("r28", "r", activate=str(script), env={"HOME_OF_BUNDLE": "/b"}))
    assert env == {"HOME_OF_BUNDLE": "/b", "TORCH_HOME": "/b/torchhome", "R_LIBS": "/bundle/Rlib", "R_LIBS_USER": None,
                   "R_LIBS_SITE": None, "TORCH_INSTALL": "0"}


def test_a_failing_activation_script_is_one_line(tmp_path: Path) -> None:
    script = tmp_path / "activate.sh"
    script.write_text('echo "rtorch: set AMP_RTORCH_TORCH_PYTHON to a python with torch==2.8.0" >&2\nreturn 1\n')
    with pytest.raises(UsageError) as refused:
        worker_env(Installation("r28", "r", activate=str(script)))
    assert str(refused.value) == (
        f"installation r28 must be an activation script that succeeds (it exited 1: rtorch: set AMP_RTORCH_TORCH_PYTHON to a "
        f"python with torch==2.8.0), got '{script}'."
    )


def test_an_installations_file_and_a_baseline_from_the_command_line(venv_python: str, tmp_path: Path) -> None:
    """``--installations`` names the venv, ``--baseline`` makes it the side every other is paired with; the result keeps both."""
    (tmp_path / "installations.toml").write_text(f'[venv]\nlanguage = "python"\npython = "{venv_python}"\n')
    out = tmp_path / "r.json"
    done = run_cli("run", "--preset", "tiny", "--mode", "default", "--optimizer", "sgd", "--rounds", "1", "--warmup-rounds", "1",
                   "--no-trace",
                   "--installations", str(tmp_path / "installations.toml"), "--frontend", "python,venv", "--baseline", "venv",
                   "--json", str(out))
    assert done.returncode == 0, done.stderr
    stored = json.loads(out.read_text())
    assert (stored["frontends"], stored["baseline"]) == (["python", "venv"], "venv")
    assert [(p["frontends"], p["verdict"]) for p in stored["pairs"]] == [(["venv", "python"], "identical")] * 2  # both defaults
    assert "parity (venv vs python)" in done.stdout


@pytest.mark.parametrize("kind", ["library-without-torch", "activation-that-exits-early"])
def test_an_r_installation_that_is_not_one_is_refused_before_any_cell(
    availability: Availability, tmp_path: Path, kind: str,
) -> None:
    """``NAME=r:DIR`` where DIR holds no torch, or an activation script that returns before it exports anything, ran this
    shell's R torch under the new name and recorded the wrong library: now one line before the first cell, nothing written."""
    require_r_torch(availability)
    if kind == "library-without-torch":
        place = tmp_path / "Rlib"
        place.mkdir()
    else:
        place = tmp_path / "activate.sh"
        place.write_text('return 0\nexport R_LIBS="/never/reached"\n')
    out = tmp_path / "r.json"
    done = run_cli("run", "--frontend", f"python,x=r:{place}", "--mode", "default", "--rounds", "1", "--warmup-rounds", "1",
                   "--json", str(out))
    assert done.returncode != 0 and "amp-parity · preset" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: installation x must be "), done.stderr
    assert lines[0].endswith(f", got 'r: {place}'.") and "WARNING" not in done.stderr and "(mode -, )" not in lines[0]
    assert not out.exists()


def test_the_bundle_this_shell_activated_is_an_installation_too(availability: Availability, tmp_path: Path) -> None:
    """The activation script this shell sourced, named as an installation, is accepted: what it exports is its own R torch
    (it runs without this shell's R torch variables, so an idempotent script still exports them)."""
    require_r_torch(availability)
    script = REPO_ROOT.parent / "shared" / "rtorch" / "activate.sh"
    if not script.is_file():
        pytest.skip(f"no R torch bundle at {script}")
    done = run_cli("run", "--frontend", f"r,again=r:{script}", "--mode", "default", "--optimizer", "sgd", "--rounds", "1",
                   "--warmup-rounds", "1", "--no-trace")
    assert done.returncode == 0, done.stderr
    assert "with_autocast-default-sgd-cpu" in done.stdout and "identical" in done.stdout
