"""The frontends: each runs a paired script inside a :class:`harness.worker.Worker` process."""

from __future__ import annotations

from harness.frontends.registry import FRONTENDS, Frontend, open_worker

__all__ = ["FRONTENDS", "Frontend", "open_worker"]
