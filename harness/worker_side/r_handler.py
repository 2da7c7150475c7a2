"""Runs inside the R worker process: rpy2 embeds R and calls ``amp_parity_call`` from ``r_scripts/_bridge.R``.

Python torch is never imported here (two libtorch builds in one process crash). Only plain data
crosses the boundary: the run spec goes in as a JSON string and the record comes back as one, the
same JSON the R script prints in shell mode. R's console output is routed to the ``harness.r``
logger, which the worker sends back to the parent.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from harness.contract.replies import Reply
from harness.contract.requests import FOLLOW_REQUEST
from harness.files.paths import SCRIPTS_ENV, bytecode_dir, script_path, scripts_root
from harness.worker_side.trace_recorder import TraceRecorder, recorder_arguments

__all__ = ["RHandler"]

r_log = logging.getLogger("harness.r")

#: What ``describe`` asks R: its torch package's version, the libtorch it was built for, R's version, and the folder the
#: torch package was loaded from (a tensor made first, so libtorch is surely loaded when the worker reads which one it
#: mapped). The folder says which R library this worker's R torch came from: the parent checks it is the one named.
_DESCRIBE = """
function() {
  invisible(torch::torch_zeros(1L))
  version <- libtorch_version()
  c(as.character(utils::packageVersion("torch")), if (is.null(version)) "" else version, R.version.string,
    normalizePath(find.package("torch"), mustWork = FALSE))
}
"""

#: The probe's answer (r_scripts/_probe.R, sourced: it only defines probe_r_side()) as JSON text.
_PROBE = """
function(path) {
  probe <- new.env()
  sys.source(path, envir = probe)
  jsonlite::toJSON(probe$probe_r_side(), auto_unbox = TRUE, null = "null")
}
"""


class RScriptFailed(Exception):
    """An R error, carrying R's own message for the parent's ScriptError; ``refused``: the script refused the cell
    (a condition of class ``amp_parity_refused``), rather than failing while it ran."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.frontend_message = message
        self.refused = refused


class RHandler:
    """Embeds R once, sources ``r_scripts/_bridge.R`` (which loads the shared files from the folder it is given) and answers run requests.

    ``cell`` (the default): the run record. ``describe``: this installation's facts
    (:func:`harness.worker_side.installation_facts.installation_facts`). ``trace``: a cell request with
    ``trace: {"keep": [[step, name], ...]}`` → the call's points, recorded by
    :class:`harness.worker_side.trace_recorder.TraceRecorder` (as in the Python worker). ``calibrate``:
    ``{"device", "dtype", "threads", "iterations"}`` and the MLP's shapes → ``{"seconds", "iterations"}`` from ``amp_parity_calibrate()``
    in _bridge.R, the twin of :func:`harness.worker_side.calibration.calibrate`. ``module_run``: one entry of the module
    sweep (``amp_parity_modules_reply()`` in r_scripts/modules.R). ``scripts_root`` (:data:`FOLLOW_REQUEST`): ``{"root"}``
    → ``None``, the bridge and the shared files sourced anew from ``root`` (:meth:`_follow`).
    """

    def __init__(self) -> None:
        from rpy2.rinterface_lib import callbacks

        callbacks.consolewrite_print = _to_log(logging.INFO)
        callbacks.consolewrite_warnerror = _to_log(logging.WARNING)
        callbacks.consoleread = _no_answer  # R asking (askYesNo, readline) gets no answer: a worker has no one to ask
        import rpy2.robjects as ro
        from rpy2.rinterface_lib import openrlib

        # R calls its "process events" hook from every user-interrupt check (632 times in one bench autocast call), and rpy2
        # points it at a Python callback (a lock and a call into Python each time) that does nothing but relay Ctrl-C, which a
        # worker ignores (the parent handles it). Unhooked, R's loop runs as it does under Rscript, which has no such hook:
        # measured 1-3 % faster at bench (R, autocast, medians of 20 rounds). R checks the hook for NULL (src/unix/sys-std.c).
        openrlib.rlib.ptr_R_ProcessEvents = openrlib.ffi.NULL
        self._ro = ro
        # Our R files byte-compiled, the bridge too, from this cache (r_scripts/_bytecode.R): a script's first call would
        # otherwise spend most of its time in R's JIT compiling them.
        ro.globalenv["amp_parity_bytecode_dir"] = ro.StrVector([str(bytecode_dir())])
        ro.r["source"](str(script_path("r", "_bytecode")))
        self._root: str | None = None
        self._follow(str(scripts_root()))

    def _follow(self, root: str) -> None:
        """Source the bridge, and through it the shared files, from ``root``'s ``r_scripts/`` (the checkout's, a planted copy
        under $AMP_PARITY_SCRIPTS, or the next run's: a kept worker's ``scripts_root`` request), over what an earlier root
        defined; each script is then sourced from there on its first call (the bridge keeps them by path)."""
        if root == self._root:
            return
        ro = self._ro
        os.environ[SCRIPTS_ENV] = root  # what reads the root in this process (script_path) follows it
        # The bridge loads the shared files from the folder named here: R has no __file__, and the harness already knows
        # where the scripts are.
        bridge = script_path("r", "_bridge")
        ro.globalenv["amp_parity_r_dir"] = ro.StrVector([str(bridge.parent)])
        ro.r["source_compiled"](str(bridge), ro.globalenv)
        # Each returns c(kind, text), an R error as R's own message (_bridge.R says why).
        self._call = ro.globalenv["amp_parity_reply_call"]
        self._trace_call = ro.globalenv["amp_parity_reply_trace_call"]
        self._calibrate = ro.globalenv["amp_parity_reply_calibrate"]
        self._paths: dict[str, str] = {}
        self._modules_reply: Any = None
        self._root = root

    def __call__(self, request: dict[str, Any]) -> Any:
        """Run one cell (or a test script given by path) and return the parsed record (or, for a trace, the points)."""
        if request.get("kind") == FOLLOW_REQUEST:
            self._follow(str(request["root"]))
            return None
        if request.get("kind") == "describe":
            return self._describe(request.get("device", "cpu"), request.get("threads"))
        if request.get("kind") == "module_run":
            return self._module_run(request)
        if request.get("kind") == "calibrate":
            return self._calibration(request)
        path = request.get("script_path") or self._script_path(request["script"])
        if request.get("kind") == "trace":
            return self._trace(path, request)
        kind, text = self._call(path, self._spec_fields(request["run_spec"]), request["mode"])
        if kind != Reply.OK:
            raise RScriptFailed(text, refused=kind == Reply.REFUSED)
        return json.loads(text)

    def _spec_fields(self, run_spec: dict[str, Any]) -> Any:
        """The run spec as R's bridge takes it: a named character vector, each top-level field's JSON text (the bridge's
        ``parse_run_spec()`` parses each text once per worker: most fields are the same for every cell of a run)."""
        fields = self._ro.StrVector([json.dumps(value) for value in run_spec.values()])
        fields.names = self._ro.StrVector(list(run_spec))
        return fields

    def _describe(self, device: str, threads: int | None = None) -> dict[str, Any]:
        from harness.worker_side.installation_facts import installation_facts
        from harness.worker_side.thread_probe import PROBE_CALLS, PROBE_N, probed_counts

        torch_version, libtorch, language, package = (str(v) for v in self._ro.r(_DESCRIBE)())
        # The run's threads before the first backward: R torch runs backward on a pool thread that takes the count the
        # first time it runs a parallel op and keeps it (harness/worker_side/thread_probe.py); set after, a pool thread
        # the first step used would run later backwards on libtorch's default (the cores, whatever OMP_NUM_THREADS says).
        if threads is not None:
            self._ro.r("torch::torch_set_num_threads")(int(threads))
        self._ro.globalenv["amp_parity_first_step"]()  # one-time costs of a first optimizer step, paid at start (_bridge.R)
        probed = self._ro.globalenv["amp_parity_backward_threads"](PROBE_N, probed_counts(threads), PROBE_CALLS)
        counts = {name: [int(v) for v in probed.rx2(name)] for name in ("intra_op_threads", "interop_threads", "backward_threads")}
        facts = installation_facts("r", torch_version=torch_version, libtorch_version=libtorch or None,
                                   language_version=language, cuda=None, device_name=device, torch_package=package,
                                   r_library=os.path.dirname(package), intra_op_threads=counts["intra_op_threads"][0],
                                   interop_threads=counts["interop_threads"][0], backward_threads=counts["backward_threads"])
        # What `Rscript r_scripts/_probe.R` would say of this R: the run reads it from here (the worker is the R it would
        # probe), so it need not start a second R and load R torch twice (2 s here).
        path = script_path("r", "_probe")
        if not path.is_file():  # scripts from elsewhere ($AMP_PARITY_SCRIPTS) without it: the run probes R on its own
            return facts
        return facts | {"r_probe": json.loads(str(self._ro.r(_PROBE)(str(path))[0]))}

    def _module_run(self, request: dict[str, Any]) -> Any:
        """One entry of the module sweep in R (r_scripts/modules.R, loaded byte-compiled on the first such call)."""
        if self._modules_reply is None:
            path = script_path("r", "modules")
            self._ro.r["source_compiled"](str(path), self._ro.globalenv)
            self._modules_reply = self._ro.globalenv["amp_parity_modules_reply"]
        kind, text = self._modules_reply(json.dumps(request))
        if kind != Reply.OK:
            raise RScriptFailed(text)
        return json.loads(text)

    def _calibration(self, request: dict[str, Any]) -> dict[str, Any]:
        """The noise-floor loop in R torch: checked here, with its learning rate from the one place it is kept."""
        from harness.worker_side.calibration import FLOOR_LR, SHAPE_FIELDS, check_calibration

        arguments = check_calibration(request)
        kind, *values = self._calibrate(arguments["device"], arguments["dtype"], arguments["threads"], arguments["iterations"],
                                        *(arguments[name] for name in SHAPE_FIELDS), FLOOR_LR)
        if kind != Reply.OK:
            raise RScriptFailed(values[0])
        return {"seconds": float(values[0]), "iterations": int(float(values[1]))}

    def _trace(self, path: str, request: dict[str, Any]) -> dict[str, Any]:
        import numpy as np
        import rpy2.rinterface as ri

        recorder = TraceRecorder(**recorder_arguments(request["trace"]))

        @ri.rternalize  # type: ignore[untyped-decorator]
        def record_points(steps: Any, names: Any, dtypes: Any, ranks: Any, sizes: Any, lengths: Any, data: Any) -> Any:
            # One step's points at once (amp_parity_trace_call() in _bridge.R), each field one R vector read whole: rpy2
            # wraps every element it is asked for one by one. The names and dtypes come a line per point; the bytes end to
            # end, which np.asarray reads in place (rpy2's array interface), each point a view of them.
            done = False
            parted = recorder.parted
            ends = np.cumsum(np.asarray(ranks, dtype=np.int64)).tolist()
            flat = np.asarray(sizes, dtype=np.int64).tolist() if ends and ends[-1] else []
            starts = [0, *ends[:-1]]
            byte_ends = np.cumsum(np.asarray(lengths, dtype=np.int64)).tolist()
            whole = np.asarray(data).data if byte_ends and byte_ends[-1] else memoryview(b"")
            for step, name, dtype, start, end, byte_start, byte_end in zip(
                    np.asarray(steps).tolist(), str(names[0]).split("\n"), str(dtypes[0]).split("\n"), starts, ends,
                    [0, *byte_ends[:-1]], byte_ends, strict=True):
                done = recorder.record(step, name, dtype, flat[start:end], whole[byte_start:byte_end]) or done
            # What R does next: stop the run (every kept point is in), trace only the points named after "cut" from the
            # next step on (the run parted from the compared one in this step: cut_trace() in tracing.R), or go on.
            if done:
                return ri.StrSexpVector(["done"])
            if parted is None and recorder.parted is not None:
                return ri.StrSexpVector(["cut", *sorted(recorder.kept_after_cut)])
            return ri.StrSexpVector(["go"])

        kind, text = self._trace_call(path, self._spec_fields(request["run_spec"]), request["mode"], record_points)
        if kind != Reply.OK:
            raise RScriptFailed(text, refused=kind == Reply.REFUSED)
        return recorder.reply(json.loads(text))

    def _script_path(self, script: str) -> str:
        # The scripts' folder changes only with a ``scripts_root`` request (which empties this), and resolving it costs a
        # timed round's bridge 0.04 ms.
        if script not in self._paths:
            self._paths[script] = str(script_path("r", script))
        return self._paths[script]


def _no_answer(prompt: str) -> str:
    """What R reads when it asks: nothing (``askYesNo`` then refuses). Its question is logged, never printed to the terminal
    (rpy2's default printed "Do you want to continue? (Yes/no/cancel)" through the parent's output, and waited for input)."""
    r_log.info("R asked, and was given no answer: %s", prompt.strip())
    return ""


def _to_log(level: int) -> Any:
    def write(text: str) -> None:
        text = text.rstrip("\n")
        if text.strip():
            r_log.log(level, "%s", text)

    return write
