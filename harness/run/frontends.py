"""The frontends: each installation with its language's handler, the cells the language cannot run, and its worker.

A language (``python``, ``r``) says which handler a worker runs and which cells the binding refuses; an
installation (:class:`harness.workload.installations.Installation`) says which interpreter runs it and with what
environment. The two together are a :class:`Frontend`.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Any

from harness.errors import UsageError
from harness.run.availability import Availability
from harness.run.worker import Worker
from harness.workload.installations import DEFAULT_INSTALLATIONS, Installation

__all__ = ["FRONTENDS", "LANGUAGE_FRONTENDS", "Frontend", "frontend_for", "open_worker", "worker_env"]

#: How long an activation script may take (an R torch bundle's unpacks itself once: tens of seconds).
_ACTIVATE_TIMEOUT_S = 300
#: Variables bash sets for itself, which an activation script does not export on purpose.
_SHELL_OWN = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})


@dataclass(frozen=True)
class Frontend:
    """A language binding under test, as one installation runs it.

    ``unsupported`` lists the ``(scaler, device)`` cells the binding is known to refuse: every cell whose mode uses that
    kind of loss scaler (:data:`harness.workload.scripts.SCALERS`) on that device, whatever its script; they still run,
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
    "python": Frontend("python", "harness.frontends.python_handler:PythonHandler"),
    # R torch's cuda_amp_grad_scaler() scales CUDA tensors only (R/autocast.R): on CPU an enabled one errors, unless the
    # script lifts that one check (make_grad_scaler() in r_scripts/common.R); a disabled one passes its calls through.
    "r": Frontend(
        "r", "harness.frontends.r_handler:RHandler", frozenset({("dynamic", "cpu")}), lifted=frozenset({("dynamic", "cpu")}),
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


def open_worker(name: str | Frontend, env: dict[str, str] | None = None) -> Worker:
    """A (not yet started) worker for a frontend (by default name or as given), with ``env`` added to its environment.

    Raises:
        UsageError: an installation's activation script failed (its last line of output says why).
    """
    frontend = FRONTENDS[name] if isinstance(name, str) else name
    installation = frontend.installation
    own = worker_env(installation) if installation is not None else {}
    python = installation.python if installation is not None else None
    return Worker(frontend.name, frontend.handler, {**own, **(env or {})}, python=python)


def worker_env(installation: Installation) -> dict[str, str]:
    """The environment an installation's worker gets on top of this process's: its ``env``, ``R_LIBS``, or what
    its activation script exports (read by sourcing it in bash and keeping what changed).

    Raises:
        UsageError: the activation script failed or could not be run.
    """
    env = dict(installation.env)
    if installation.r_libs is not None:
        env["R_LIBS"] = os.pathsep.join(p for p in (installation.r_libs, os.environ.get("R_LIBS", "")) if p)
    if installation.activate is None:
        return env
    base = {**os.environ, **env}
    script = 'source "$1" >&2 || exit $?; env -0'
    try:
        done = subprocess.run(["bash", "-c", script, "activate", installation.activate], env=base, capture_output=True,
                              timeout=_ACTIVATE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UsageError(f"installation {installation.name}", installation.activate, f"an activation script bash can run ({err})") from err
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"installation {installation.name}", installation.activate,
                         f"an activation script that succeeds (it exited {done.returncode}: {said[-1] if said else 'no message'})")
    after = dict(item.split("=", 1) for item in done.stdout.decode(errors="replace").split("\0") if "=" in item)
    changed = {key: value for key, value in after.items() if base.get(key) != value and key not in _SHELL_OWN}
    return env | {key: value for key, value in changed.items() if not key.startswith("BASH_FUNC_")}
