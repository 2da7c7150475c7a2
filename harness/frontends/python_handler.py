"""Runs inside the Python worker process: imports a Python script and calls ``run_workload``.

This is the only harness module that touches Python torch (through the scripts), and it is only
ever imported in the Python worker, never in the process that hosts R.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

from harness.paths import REPO_ROOT

__all__ = ["PythonHandler"]


class PythonHandler:
    """Imports ``py_scripts.<stem>`` once and answers ``{"script", "mode", "run_spec"}`` requests."""

    def __init__(self) -> None:
        if str(REPO_ROOT) not in sys.path:
            sys.path.insert(0, str(REPO_ROOT))
        import torch  # paid once, at start-up, not inside the first timed call

        self.torch_version = torch.__version__
        self._modules: dict[str, ModuleType] = {}

    def __call__(self, request: dict[str, Any]) -> Any:
        """Run one cell and return its run record."""
        script = request["script"]
        if script not in self._modules:
            self._modules[script] = importlib.import_module(f"py_scripts.{script}")
        record: dict[str, Any] = self._modules[script].run_workload(request["run_spec"], request["mode"])
        return record
