"""The frontends: each installation with its language's handler, the cells the language cannot run, and its worker.

A language (``python``, ``r``) says which handler a worker runs and which cells the binding refuses; an
installation (:class:`harness.workload.installations.Installation`) says which interpreter runs it and with what
environment. The two together are a :class:`Frontend`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import UsageError
from harness.run.availability import Availability
from harness.run.process_group import end_group, start_group
from harness.run.worker import Worker
from harness.workload.installations import DEFAULT_INSTALLATIONS, Installation

__all__ = [
    "FRONTENDS", "LANGUAGE_FRONTENDS", "R_TORCH_VARIABLES", "Frontend", "check_described", "frontend_for", "open_worker", "worker_env",
]

#: How long an activation script may take unless told otherwise (an R torch bundle's unpacks itself once: tens of
#: seconds); a run's ``--timeout`` rules it, as it rules its workers' start and calls (:class:`harness.run.pool.WorkerPool`).
_ACTIVATE_TIMEOUT_S = 300.0
#: The variables that choose which R torch an R process loads: its package's library and its libtorch (mlverse/torch
#: R/install.R: ``TORCH_HOME``, else the package's own folder; ``TORCH_INSTALL`` decides whether it downloads one).
R_TORCH_VARIABLES = ("R_LIBS", "R_LIBS_USER", "R_LIBS_SITE", "TORCH_HOME", "TORCH_INSTALL")
_R_LIBRARY_VARIABLES = ("R_LIBS", "R_LIBS_USER", "R_LIBS_SITE")
#: Variables bash sets for itself, which an activation script does not export on purpose.
_SHELL_OWN = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})


@dataclass(frozen=True)
class Frontend:
    """A language binding under test, as one installation runs it.

    ``unsupported`` lists the ``(scaler, device)`` cells the binding is known to refuse: every cell whose mode uses that
    kind of loss scaler (:data:`harness.contract.modes.SCALERS`) on that device, whatever its script; they still run,
    and the binding's own error becomes the reason of an ``unsupported`` cell (if one starts to succeed, the strict
    expected-failure tests turn red, so the list is kept honest).
    """

    name: str
    handler: str
    unsupported: frozenset[tuple[str, str]] = frozenset()
    #: Declared-unsupported cells the scripts run anyway by lifting one check of the binding (``--no-scaler-lift``
    #: turns it off); a refused lift still ends the cell ``unsupported`` with its reason.
    lifted: frozenset[tuple[str, str]] = frozenset()
    installation: Installation | None = None

    @property
    def language(self) -> str:
        """``python`` or ``r``: which scripts the frontend runs."""
        return self.installation.language if self.installation is not None else self.name

    def installation_json(self) -> dict[str, Any]:
        """How the user named this frontend's installation (stored with each of its cells)."""
        installation = self.installation or Installation(self.name, self.language)
        return installation.to_json()

    def unavailable_reason(self, availability: Availability) -> str | None:
        """Why this frontend cannot run on this machine, or ``None``.

        The probe checks this harness's own Python and R; another interpreter or R library is checked when its worker
        starts (:meth:`harness.run.runner.MatrixRunner.describe_installations`), where R and rpy2 are still this machine's.
        """
        default = self.installation is None or self.installation.is_default
        if self.language == "python":
            return availability.python_reason if default else None
        return availability.r_reason if default else availability.r_host_reason


#: Each language's frontend, as this harness's own interpreter and R run it.
LANGUAGE_FRONTENDS: dict[str, Frontend] = {
    "python": Frontend("python", "harness.worker_side.python_handler:PythonHandler"),
    # R torch's cuda_amp_grad_scaler() scales CUDA tensors only (R/autocast.R): on CPU an enabled one errors, unless the
    # script lifts that one check (make_grad_scaler() in r_scripts/scaler.R); a disabled one passes its calls through.
    "r": Frontend(
        "r", "harness.worker_side.r_handler:RHandler", frozenset({("dynamic", "cpu")}), lifted=frozenset({("dynamic", "cpu")}),
    ),
}
#: The default frontends by name (``python``, ``r``).
FRONTENDS: dict[str, Frontend] = {
    name: Frontend(f.name, f.handler, f.unsupported, f.lifted, DEFAULT_INSTALLATIONS[name]) for name, f in LANGUAGE_FRONTENDS.items()
}


def frontend_for(installation: Installation) -> Frontend:
    """The frontend an installation runs: its language's handler and known refusals, under the installation's name."""
    language = LANGUAGE_FRONTENDS[installation.language]
    return Frontend(installation.name, language.handler, language.unsupported, language.lifted, installation)


def open_worker(name: str | Frontend, env: Mapping[str, str | None] | None = None, timeout: float | None = None) -> Worker:
    """A (not yet started) worker for a frontend (by default name or as given), with ``env`` added to its environment.

    ``timeout``: seconds its activation script and its start may each take (a run's ``--timeout``; default: their own).

    Raises:
        UsageError: an installation's activation script failed or did not finish (its last line of output says why).
    """
    frontend = FRONTENDS[name] if isinstance(name, str) else name
    installation = frontend.installation
    own = worker_env(installation, timeout) if installation is not None else {}
    python = installation.python if installation is not None else None
    return Worker(frontend.name, frontend.handler, {**own, **(env or {})}, python=python, start_timeout=timeout)


def worker_env(installation: Installation, timeout: float | None = None) -> dict[str, str | None]:
    """The environment an installation's worker gets on top of this process's: its ``env``, ``R_LIBS``, or what
    its activation script exports (read by sourcing it in bash and keeping what changed). ``None``: a variable removed.

    An R installation's torch comes from where it names, never from this shell: an activation script runs without the
    variables that choose an R torch (:data:`R_TORCH_VARIABLES`), and what it does not export its worker does not get (an
    activation that exited early ran this shell's R torch under the new name; now it finds none, or one
    :func:`check_described` refuses). A named R library is put first on this shell's ``R_LIBS``; its torch package must be
    there (:func:`check_described`).

    The script runs in a process group of its own, for at most ``timeout`` seconds (default :data:`_ACTIVATE_TIMEOUT_S`):
    then it is killed with everything it started (a ``sleep`` it waits on), and so is whatever it leaves behind.

    Raises:
        UsageError: the activation script failed, did not finish in time, or could not be run.
    """
    env: dict[str, str | None] = dict(installation.env)
    if installation.activate is not None:
        env |= {name: None for name in R_TORCH_VARIABLES if name not in installation.env}
        # An embedded R is interactive: without TORCH_INSTALL=0, an R torch with no libtorch asks to download one
        # (mlverse/torch R/package.R:42). A worker never downloads; an activation script may still say otherwise.
        env["TORCH_INSTALL"] = installation.env.get("TORCH_INSTALL", "0")
    if installation.r_libs is not None:
        # This shell's libraries (and its TORCH_HOME) stay behind the named one: torch's dependencies may be there. Its
        # torch package must be in the named one (check_described).
        env["R_LIBS"] = os.pathsep.join(p for p in (installation.r_libs, os.environ.get("R_LIBS", "")) if p)
    if installation.activate is None:
        return env
    base = {key: value for key, value in {**os.environ, **env}.items() if value is not None}
    script = 'source "$1" >&2 || exit $?; env -0'
    limit = _ACTIVATE_TIMEOUT_S if timeout is None else timeout
    try:
        process = start_group(["bash", "-c", script, "activate", installation.activate], env=base, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as err:
        raise UsageError(f"installation {installation.name}", installation.activate, f"an activation script bash can run ({err})") from err
    with process:  # its pipes closed, however it ends
        try:
            stdout, stderr = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            end_group(process)
            raise UsageError(f"installation {installation.name}", installation.activate,
                             f"an activation script that finishes within --timeout {limit:g} s (it was stopped, with every "
                             "process it started)") from None
        finally:
            end_group(process)  # what it started and left running goes too (a background helper, a sleep)
    if process.returncode != 0:
        said = stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"installation {installation.name}", installation.activate,
                         f"an activation script that succeeds (it exited {process.returncode}: {said[-1] if said else 'no message'})")
    after = dict(item.split("=", 1) for item in stdout.decode(errors="replace").split("\0") if "=" in item)
    changed = {key: value for key, value in after.items() if base.get(key) != value and key not in _SHELL_OWN}
    return env | {key: value for key, value in changed.items() if not key.startswith("BASH_FUNC_")}


def check_described(installation: Installation, env: Mapping[str, str | None], facts: Mapping[str, Any]) -> None:
    """Refuse an R installation whose worker loaded an R torch that is not the one it names.

    What the worker reports (:class:`harness.worker_side.r_handler.RHandler`: the library its torch package was loaded from,
    the ``libtorch_cpu.so`` it mapped) must lie where the installation points: its torch package in a library it names
    (``NAME=r:DIR``, or what its activation script or ``env`` put on ``R_LIBS``), or its libtorch under the ``TORCH_HOME``
    it names. Otherwise it is some other R torch under this name (a ``DIR`` without torch, an activation that exited
    early), and every cell would record the wrong library. This harness's own ``r`` is not checked: it is this shell's.

    Raises:
        UsageError: one line: what was loaded, what was named, and what to check.
    """
    if installation.language != "r" or installation.is_default:
        return
    library, libtorch = facts.get("r_library"), facts.get("libtorch_path")
    named = [p for name in _R_LIBRARY_VARIABLES for p in str(env.get(name) or "").split(os.pathsep) if p]
    if installation.r_libs is not None:
        named = [installation.r_libs]  # its torch must be in the library it names, not in this shell's behind it
    home = env.get("TORCH_HOME")
    if library and any(_same_folder(library, p) for p in named):
        return
    if home and libtorch and _inside(str(libtorch), str(home)):
        return
    where = ", ".join(named) if named else "no R library"
    if library is None:
        loaded = "an R torch it could not locate"
    else:
        loaded = f"R torch from {library}" + (f" (libtorch {libtorch})" if libtorch else "")
    fix = (f"install the torch package into {installation.r_libs}" if installation.r_libs is not None
           else "check that its activation script exports R_LIBS with the library holding torch (an early return exports nothing)")
    raise UsageError(f"installation {installation.name}", installation.where(),
                     f"an R installation whose worker loads the R torch it names, but it loaded {loaded}, and it names {where}"
                     + (f" and TORCH_HOME {home}" if home else "") + f": {fix}")


def _same_folder(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _inside(path: str, folder: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)
