"""The frontends by name, with the handler each worker runs and the cells each cannot run."""

from __future__ import annotations

from dataclasses import dataclass

from harness.run.availability import Availability
from harness.run.worker import Worker

__all__ = ["FRONTENDS", "Frontend", "open_worker"]


@dataclass(frozen=True)
class Frontend:
    """A language binding under test.

    ``unsupported`` lists ``(script, device)`` cells the binding is known to refuse; they still run, and
    the binding's own error becomes the reason of an ``unsupported`` cell (if one starts to succeed,
    the strict expected-failure tests turn red, so the list is kept honest).
    """

    name: str
    handler: str
    unsupported: frozenset[tuple[str, str]] = frozenset()
    #: Declared-unsupported cells the scripts run anyway by lifting one check of the binding (``--no-scaler-lift``
    #: turns it off); a refused lift still ends the cell ``unsupported`` with its reason.
    lifted: frozenset[tuple[str, str]] = frozenset()

    def unavailable_reason(self, availability: Availability) -> str | None:
        """Why this frontend cannot run on this machine, or ``None``."""
        return availability.python_reason if self.name == "python" else availability.r_reason


FRONTENDS: dict[str, Frontend] = {
    "python": Frontend("python", "harness.frontends.python_handler:PythonHandler"),
    # R torch's cuda_amp_grad_scaler() works on CUDA tensors only (R/autocast.R): on CPU it errors, unless the
    # script lifts that one check (r_scripts/cuda_amp_grad_scaler.R, make_grad_scaler()).
    "r": Frontend(
        "r", "harness.frontends.r_handler:RHandler", frozenset({("cuda_amp_grad_scaler", "cpu")}),
        lifted=frozenset({("cuda_amp_grad_scaler", "cpu")}),
    ),
}


def open_worker(name: str, env: dict[str, str] | None = None) -> Worker:
    """A (not yet started) worker for frontend ``name``, with ``env`` added to its environment."""
    return Worker(name, FRONTENDS[name].handler, env)
