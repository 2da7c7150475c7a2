"""The harness's version, in one place: the package's (pyproject.toml reads it here), ``harness.__version__`` and every
result's provenance (:mod:`harness.run.provenance`)."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
