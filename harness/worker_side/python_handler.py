"""Runs inside the Python worker process: imports a Python script and calls ``run_workload``.

This is the only harness module that touches Python torch (through the scripts), and it is only
ever imported in the Python worker, never in the process that hosts R.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from types import ModuleType
from typing import Any

from harness.contract.requests import FOLLOW_REQUEST
from harness.files.paths import SCRIPTS_ENV, scripts_root

__all__ = ["PythonHandler"]


#: The module sweep's requests (harness/run/modules.py) and the function of ``py_scripts/modules.py`` that answers each.
_MODULE_KINDS = {"module_entries": "module_entries", "module_prepare": "prepare_module"}


class PythonHandler:
    """Imports ``py_scripts.<stem>`` once and answers requests by their ``kind``.

    ``cell`` (the default): ``{"script", "mode", "run_spec"}`` → the run record. ``describe``: ``{"device", "threads"}`` →
    this installation's facts (:func:`harness.worker_side.installation_facts.installation_facts`, and the thread counts
    :func:`harness.worker_side.thread_probe.backward_threads` measures once ``threads`` is set). ``matmul_peak``:
    ``{"device", "dtype", "threads"}`` → :func:`harness.worker_side.matmul_peak.measure_matmul_peak`. ``gemm_profile``:
    a cell request → :func:`harness.worker_side.gemm_profiler.profile_gemms` of one step. ``trace``: a cell request
    with ``trace: {"keep": [[step, name], ...]}`` → the call's points (:class:`harness.worker_side.trace_recorder.TraceRecorder`).
    ``calibrate``: ``{"device", "dtype", "threads", "iterations"}`` and the MLP's shapes (``SHAPE_FIELDS``) →
    :func:`harness.worker_side.calibration.calibrate`.
    ``module_entries``, ``module_prepare``: the module sweep's calls (``py_scripts/modules.py``); ``module_compare``:
    :func:`harness.worker_side.module_compare.compare_module`. ``scripts_root`` (:data:`FOLLOW_REQUEST`): ``{"root"}`` →
    ``None``, the scripts imported anew from ``root`` from the next request on.
    Peaks, profiles, traces and calibrations run here, in the process and with the torch that runs the cells.
    """

    def __init__(self) -> None:
        self._root: str | None = None
        self._modules: dict[str, ModuleType] = {}
        self._path = list(sys.path)  # the path before any scripts root was put first (the harness's import folder is on it)
        self._follow(str(scripts_root()))
        import torch  # paid once, at start-up, not inside the first timed call

        # And what the trace recorder needs (blake3): an interpreter without it fails to start, with the fix, not at its
        # first traced call.
        importlib.import_module("harness.worker_side.trace_recorder")

        self.torch_version = torch.__version__

    def _follow(self, root: str) -> None:
        """Import ``py_scripts`` from ``root`` from now on (a planted copy under $AMP_PARITY_SCRIPTS, or the next run's):
        first on the path, and every module of the scripts imported before forgotten, so each is imported anew from there.
        The environment follows too, for what reads the root there (:func:`harness.files.paths.scripts_root`)."""
        if root == self._root:
            return
        sys.path[:] = [root, *(p for p in self._path if p != root)]
        for name in [n for n in sys.modules if n == "py_scripts" or n.startswith("py_scripts.")]:
            del sys.modules[name]
        importlib.invalidate_caches()
        self._modules.clear()
        os.environ[SCRIPTS_ENV] = root
        self._root = root

    def __call__(self, request: dict[str, Any]) -> Any:
        """Answer one request (see the class docstring)."""
        kind = request.get("kind", "cell")
        try:
            if kind == FOLLOW_REQUEST:
                self._follow(str(request["root"]))
                return None
            if kind == "describe":
                _set_threads(request.get("threads"))
                _first_step()
                return _describe(request.get("device", "cpu"), request.get("threads"))
            if kind == "matmul_peak":
                from harness.worker_side.matmul_peak import measure_matmul_peak

                return measure_matmul_peak(request["device"], request["dtype"], request["threads"])
            if kind == "calibrate":
                from harness.worker_side.calibration import calibrate, check_calibration

                return calibrate(**check_calibration(request))
            if kind in _MODULE_KINDS:  # the module sweep (py_scripts/modules.py): plain data in, plain data out
                return getattr(self._script("modules"), _MODULE_KINDS[kind])(request)
            if kind == "module_compare":  # the two languages' files of one entry (the worker's measurement)
                from harness.worker_side.module_compare import compare_module

                return compare_module(request)
            module = self._script(request["script"])
            if kind == "gemm_profile":
                from harness.worker_side.gemm_profiler import profile_gemms

                return profile_gemms(module.run_workload, request["run_spec"], request["mode"], request.get("step", 3))
            if kind == "trace":
                return self._trace(module, request)
            record: dict[str, Any] = module.run_workload(request["run_spec"], request["mode"])
            return record
        finally:
            gc.enable()  # a script that failed inside its timed loop leaves the collector off

    def _trace(self, module: ModuleType, request: dict[str, Any]) -> dict[str, Any]:
        """Run the cell with every ``trace_point`` going to a recorder; a run stopped once the kept points are in has no record."""
        import torch

        from harness.worker_side.trace_recorder import TraceComplete, TraceRecorder, recorder_arguments

        tracing = importlib.import_module("py_scripts.tracing")
        recorder = TraceRecorder(**recorder_arguments(request["trace"]))

        def sink(step: int, name: str, tensor: torch.Tensor) -> None:
            if not recorder.keeps(step, name):  # the run parted from the compared one at an earlier step: cut from here
                tracing.cut_trace(recorder.kept_after_cut)
                return
            flat = tensor.detach().to("cpu").contiguous().reshape(-1)
            dtype = str(flat.dtype).removeprefix("torch.")
            if recorder.record(step, name, dtype, list(tensor.shape), flat.view(torch.uint8).numpy()):
                raise TraceComplete

        tracing.set_trace_sink(sink)
        try:
            record = module.run_workload(request["run_spec"], request["mode"])
        except TraceComplete:
            record = None
        finally:
            tracing.set_trace_sink(None)
        return recorder.reply(record)

    def _script(self, script: str) -> ModuleType:
        if script not in self._modules:
            self._modules[script] = importlib.import_module(f"py_scripts.{script}")
        return self._modules[script]


def _set_threads(threads: int | None) -> None:
    """The run's intra-op threads, set at start, before the first backward (``threads``, where the request has it).

    Python's CPU backward runs on the calling thread and follows each script's ``torch.set_num_threads`` anyway; set here
    too, as the R worker must (its twin in :class:`harness.worker_side.r_handler.RHandler`: R torch's backward threads keep
    the count they first ran with, :mod:`harness.worker_side.thread_probe`).
    """
    if threads is not None:
        import torch

        torch.set_num_threads(int(threads))


def _first_step() -> None:
    """One optimizer step of a 1×1 model, once, when the worker starts (the runner's ``describe``).

    PyTorch imports much on a process's first optimizer step (torch._dynamo among 77 modules: 0.75 s here), which a
    worker's first cell would otherwise pay inside its record call, its time charged to that cell (the trace cost target
    read it as tracing: 1.12 s for a 0.34 s bench cell). Paid at start instead, it is part of making Python ready to
    run a cell, where R's start pays library(torch); the two workers start side by side. Twin: ``amp_parity_first_step()``
    in r_scripts/_bridge.R (R's first step pays its JIT compiling the packages' code).
    """
    import torch

    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    model(torch.ones(1, 1)).sum().backward()
    optimizer.step()


def _describe(device: str, threads: int | None = None) -> dict[str, Any]:
    """This interpreter's torch: its version, the libtorch build it loaded, and the device a cell would run on."""
    import platform

    import torch

    from harness.worker_side.installation_facts import installation_facts
    from harness.worker_side.thread_probe import backward_threads, probed_counts

    name = torch.cuda.get_device_name() if device == "cuda" and torch.cuda.is_available() else device
    return installation_facts(
        "python", torch_version=str(torch.__version__), libtorch_version=str(torch.__version__).split("+")[0],
        language_version=f"Python {platform.python_version()}", cuda=torch.version.cuda, device_name=name,
    ) | backward_threads(probed_counts(threads))
