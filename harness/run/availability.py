"""What can run here: Python torch, R, rpy2, R torch and its libtorch, each probed in a subprocess.

Probing R torch in a subprocess (``Rscript r_scripts/_probe.R``) keeps libtorch out of this process;
probing rpy2 in a subprocess catches an rpy2 that imports but cannot load the installed R (rpy2 3.6
with R 4.2 fails at load time with missing symbols).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from harness.files.paths import REPO_ROOT
from harness.run.cpu_features import cpu_has_bf16, usable_cpus
from harness.run.process_group import end_group, start_group

__all__ = ["INSTALL_R_TORCH", "Availability", "probe", "probe_host", "python_cuda", "r_required"]

INSTALL_R_TORCH = 'install.packages("torch"); torch::install_torch()'
_PROBE_TIMEOUT_S = 120


@dataclass(frozen=True)
class Availability:
    """One probe of this machine; ``r_reason`` is ``None`` exactly when R cells can run."""

    python_version: str
    torch_version: str | None
    rscript: str | None
    rpy2_version: str | None
    rpy2_error: str | None
    r: dict[str, Any] = field(default_factory=dict)
    r_probe_error: str | None = None
    #: Whether R's side was probed (``r`` holds the answer). A run does not probe it first (:func:`probe_host`): its R
    #: worker answers the same questions when it starts, and the runner completes this with them (or, where the worker
    #: cannot start, with :func:`probe`'s answer, which says why).
    r_probed: bool = True

    @property
    def python_reason(self) -> str | None:
        """Why the Python frontend cannot run, or ``None``."""
        return None if self.torch_version else "Python torch is not installed: pip install torch"

    @property
    def r_host_reason(self) -> str | None:
        """Why no R installation can run here (R or rpy2 missing or broken: every R worker is this Python embedding R), or ``None``."""
        if self.rscript is None:
            return "R is not installed: apt-get install r-base-core r-base-dev (or see https://cloud.r-project.org)"
        if self.rpy2_version is None:
            return 'rpy2 is not installed: pip install "rpy2>=3.5.17,<3.6"'
        if self.rpy2_error:
            return f"rpy2 {self.rpy2_version} cannot load R: {self.rpy2_error}"
        return None

    @property
    def r_reason(self) -> str | None:
        """Why the R frontend (the R torch this machine's R finds) cannot run here, in one line with the fix, or ``None``."""
        if self.r_host_reason:
            return self.r_host_reason
        if not self.r_probed:
            return None  # not known yet: the R worker's start tells (see r_probed)
        if self.r_probe_error:
            return f"the R probe failed: {self.r_probe_error}"
        if not self.r.get("torch_installed"):
            return f"the R package torch is not installed: in R, {INSTALL_R_TORCH}"
        if not self.r.get("libtorch_installed"):
            return "R torch is installed but its libtorch is not: in R, torch::install_torch()"
        if not self.r.get("libtorch_loads"):
            return f"R torch's libtorch fails to load ({self.r.get('libtorch_error')}): in R, torch::install_torch(reinstall = TRUE)"
        return None

    def to_json(self) -> dict[str, Any]:
        """Plain data for the result's ``environment``."""
        return {
            "python_version": self.python_version, "platform": platform.platform(),
            "torch_version": self.torch_version, "rscript": self.rscript, "rpy2_version": self.rpy2_version,
            "rpy2_error": self.rpy2_error, "r": self.r, "r_probe_error": self.r_probe_error,
            "python_unavailable": self.python_reason, "r_unavailable": self.r_reason,
            "cpus": usable_cpus(), "bf16_instructions": cpu_has_bf16(),
        }


def r_required() -> bool:
    """``AMP_PARITY_REQUIRE_R=1``: a missing R side fails instead of skipping (maintainers' CI)."""
    return os.environ.get("AMP_PARITY_REQUIRE_R", "").strip().lower() in {"1", "true", "yes"}


@functools.lru_cache(maxsize=1)
def probe() -> Availability:
    """Probe once per process (a few hundred ms: one Python and one Rscript subprocess)."""
    rscript = shutil.which("Rscript")
    rpy2_version = _dist_version("rpy2")
    rpy2_error = _rpy2_load_error() if rpy2_version and rscript else None
    r_info: dict[str, Any] = {}
    r_error = None
    if rscript:
        r_info, r_error = _run_r_probe(rscript)
    return Availability(
        python_version=platform.python_version(),
        torch_version=_dist_version("torch"),
        rscript=rscript,
        rpy2_version=rpy2_version,
        rpy2_error=rpy2_error,
        r=r_info,
        r_probe_error=r_error,
    )


@functools.lru_cache(maxsize=1)
def probe_host() -> Availability:
    """What a run needs to know before its workers start, without starting R (milliseconds, where :func:`probe` takes
    seconds: an Rscript that loads R torch, and an interpreter that loads R through rpy2).

    Why: the run's R worker is the R the probe would start, and it loads R torch anyway; it answers the probe's questions
    when it starts (harness/worker_side/r_handler.py), so the run waits for one R start, not two. ``r_probed`` is ``False``
    until then.
    """
    return Availability(
        python_version=platform.python_version(), torch_version=_dist_version("torch"), rscript=shutil.which("Rscript"),
        rpy2_version=_dist_version("rpy2"), rpy2_error=None, r_probed=False,
    )


def python_cuda() -> str:
    """What Python torch sees of CUDA, probed in a subprocess (``doctor`` only: it costs an ``import torch``)."""
    code = (
        "import torch\n"
        "if torch.cuda.is_available():\n"
        "    print(f'{torch.cuda.get_device_name()} (CUDA {torch.version.cuda}, bf16 {torch.cuda.is_bf16_supported()})')\n"
        "else:\n"
        "    print(f'no GPU visible (torch {torch.__version__}, built for CUDA {torch.version.cuda})')\n"
    )
    try:
        done = _run_probe([sys.executable, "-c", code])
    except subprocess.TimeoutExpired:
        return f"import torch took over {_PROBE_TIMEOUT_S} s"
    return done.stdout.strip() or (done.stderr.strip().splitlines() or ["import torch failed"])[-1]


def _run_probe(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` for a probe in a temporary folder of its own, but a Ctrl-C or kill during it reaps the probe it stops.

    ``subprocess.run`` kills the child on KeyboardInterrupt without waiting for it, so the interrupted
    run's last line was ``warning: subprocess N is still running`` instead of its own.

    Raises:
        subprocess.TimeoutExpired: the probe took over the probe timeout (it is killed and reaped).
    """
    # Its own $TMPDIR, removed after it: a probe stopped mid-way (R's Rtmp*) leaves nothing in the user's.
    # In a process group of its own, ended as one: what Rscript or an interpreter wrapper started goes with it.
    with tempfile.TemporaryDirectory(prefix="amp-parity-probe-") as tmp, start_group(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env={**os.environ, "TMPDIR": tmp},
        stdin=subprocess.DEVNULL,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=_PROBE_TIMEOUT_S)
        except BaseException:
            end_group(process)
            raise
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def _dist_version(name: str) -> str | None:
    if importlib.util.find_spec(name) is None:
        return None
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _rpy2_load_error() -> str | None:
    code = "import rpy2.robjects as ro; ro.r('1')"
    try:
        done = _run_probe([sys.executable, "-c", code])
    except subprocess.TimeoutExpired:
        return f"loading R through rpy2 took over {_PROBE_TIMEOUT_S} s"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.returncode}"


def _run_r_probe(rscript: str) -> tuple[dict[str, Any], str | None]:
    try:
        done = _run_probe([rscript, str(REPO_ROOT / "r_scripts" / "_probe.R")])
    except subprocess.TimeoutExpired:
        return {}, f"Rscript r_scripts/_probe.R took over {_PROBE_TIMEOUT_S} s"
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        return {}, (lines[-1] if lines else f"exit status {done.returncode}")
    try:
        info = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}, f"Rscript r_scripts/_probe.R printed no JSON line (its output ended {done.stdout[-200:]!r})"
    return info, None
