"""How a call across a process or language boundary ended, spelt once for both sides of each.

R's bridge (``r_scripts/_bridge.R``) answers a script's call as ``c(kind, text)``, and a worker (``harness.worker_side.serve``)
answers the parent's request with ``{"status": ...}``: both in these words, read by :mod:`harness.worker_side.r_handler`
and :mod:`harness.run.worker` (a worker sends a member's value: only plain data crosses its socket). Not a cell's
status (:class:`harness.model.result.Status`), which the judges decide.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Reply"]


class Reply(StrEnum):
    """``ok``: the call returned its value; ``refused``: the script refused the cell (R's condition class
    ``amp_parity_refused``: the cell is unsupported in those words); ``error``: anything else, with its message."""

    OK = "ok"
    REFUSED = "refused"
    ERROR = "error"
