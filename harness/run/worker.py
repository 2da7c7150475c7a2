"""A frontend in its own process, living across calls: the same machinery for Python and R.

Why a process: R torch ships its own libtorch, and two libtorch builds in one process crash; a
segfault or hang in native code must end one cell, not the test session. Why long-lived: R's
start-up and ``library(torch)`` are paid once, not per benchmark round, and the Python frontend is
run the same way so both are measured alike.

The child runs :func:`harness.worker_side.serve.serve` with a *handler* named ``"module:Class"``; the handler's
``__call__`` takes a request dict and returns plain data. Log records from the child (R's console output among
them) travel back with each reply and are re-emitted by the parent's loggers.

Why a plain subprocess, not :mod:`multiprocessing`'s spawn: an installation may be *another* interpreter (a venv
with another torch). Spawn would hand that child this interpreter's ``sys.path``, and it would import this
torch, not its own. The child gets only the harness's import folder on ``PYTHONPATH`` (the checkout, or a folder
linking to the installed package: :func:`harness.files.paths.worker_import_root`) and one end of a socket pair (a
:class:`multiprocessing.connection.Connection` on both sides, so the messages are the same pickles as before).
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import subprocess
import sys
import time
from typing import Any

from harness.contract.replies import Reply
from harness.errors import ScriptError, WorkerCannotStart, WorkerCrashed, WorkerError, WorkerTimeout
from harness.files.paths import worker_import_root
from harness.run.process_group import end_group, running, start_group

__all__ = ["START_ATTEMPTS", "Worker"]

log = logging.getLogger(__name__)

#: How long a new worker may take to import its frontend (R's start-up, ``import torch``), unless told otherwise (a
#: run's ``--timeout`` rules its workers' start as it rules their calls: :class:`harness.run.pool.WorkerPool`).
_START_TIMEOUT_S = 120.0
#: How long a worker asked to stop (or one that died) may take to exit by itself before its process group is killed.
_EXIT_GRACE_S = 5.0
#: A worker whose start failed this many times in a row with the same error is not started again (:class:`WorkerCannotStart`):
#: a frontend whose interpreter lacks a module started its worker for each of its 340 cells, 1.5 s each, to fail the same way.
#: Twice, not once: a start can fail once by chance (a timeout on a loaded machine), and the second one says it was not.
START_ATTEMPTS = 2


class Worker:
    """One frontend process; restarted transparently on the next call after a crash or timeout."""

    def __init__(
        self, name: str, handler: str, env: dict[str, str | None] | None = None, python: str | None = None,
        start_timeout: float | None = None,
    ) -> None:
        """``env``: added to this process's environment for the child (``None``: a variable removed from it). ``python``: the
        child's interpreter (default: this one).
        ``start_timeout``: seconds its start may take (default :data:`_START_TIMEOUT_S`).

        The child runs in a process group of its own (:mod:`harness.run.process_group`): stopping it on a timeout, a crash
        or :meth:`close` ends whatever it started too (a wrapper script's interpreter, R's helpers).
        """
        self.name = name
        self.handler = handler
        self.env = env or {}
        self.python = python or sys.executable
        self.start_timeout = _START_TIMEOUT_S if start_timeout is None else start_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: multiprocessing.connection.Connection | None = None
        self._asked_to_stop = False
        self.starts = 0
        #: The errors of the starts that failed since the last that did not, in order (one line each).
        self._start_errors: list[str] = []
        #: Why it is not started again (:data:`START_ATTEMPTS` starts failed with this error), or ``None``.
        self.cannot_start: str | None = None
        #: Seconds the last start took (interpreter, imports, R's start-up and ``library(torch)``).
        self.startup_seconds: float | None = None
        #: Resident memory of the last call (see :class:`_MemoryProbe`): its peak, what the process held
        #: before it, and whether the peak covers that call alone (``call``) or the process's life.
        self.last_memory: dict[str, Any] | None = None

    @property
    def alive(self) -> bool:
        """Whether the worker process is running."""
        return self._process is not None and running(self._process)

    @property
    def pid(self) -> int | None:
        """The worker's process id, while it runs."""
        return self._process.pid if self.alive and self._process is not None else None

    def start(self) -> None:
        """Start the process and wait until its handler is ready (raises what the handler raised).

        Raises:
            WorkerCannotStart: its last :data:`START_ATTEMPTS` starts failed with one error (that error's message, at once).
            WorkerError: this start failed (the handler's error, a crash, a timeout).
        """
        if self.alive:
            return
        if self.cannot_start is not None:
            raise WorkerCannotStart(self.cannot_start)
        try:
            self._start()
        except WorkerError as err:
            self._start_errors = [*self._start_errors, str(err)][-START_ATTEMPTS:]
            if len(self._start_errors) == START_ATTEMPTS and len(set(self._start_errors)) == 1:
                self.cannot_start = self._start_errors[-1]
                log.info("%s worker: its start failed %d times with the same error; it is not started again: %s",
                         self.name, START_ATTEMPTS, " ".join(self.cannot_start.split()))
            raise
        self._start_errors = []

    def _start(self) -> None:
        # The harness first on the path: the child imports harness.worker_side (and nothing else of the harness)
        # from it, whatever the interpreter; everything else (torch, numpy, safetensors, blake3) is the interpreter's own.
        try:
            root = str(worker_import_root())
        except OSError as err:
            raise WorkerError(f"{self.name} worker: cannot prepare the harness's import folder: {err}. Point AMP_PARITY_CACHE "
                              "at a writable folder.") from err
        path = os.pathsep.join(p for p in (root, self.env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))) if p)
        parent, child = multiprocessing.Pipe(duplex=True)
        command = [self.python, "-c", _CHILD_MAIN, str(child.fileno()), self.handler]
        try:
            environ = {key: value for key, value in {**os.environ, **self.env}.items() if value is not None}
            self._process = start_group(
                command, env={**environ, "PYTHONPATH": path}, pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
            )
        except OSError as err:
            parent.close()
            raise WorkerError(f"{self.name} worker could not start {self.python}: {err.strerror or err}") from err
        finally:
            child.close()
        self._conn = parent
        self.starts += 1
        started = time.perf_counter()
        self._receive(self.start_timeout, what="start")
        self.startup_seconds = time.perf_counter() - started

    def call(self, request: dict[str, Any], timeout: float) -> Any:
        """Send ``request``, return the handler's reply.

        Raises:
            ScriptError: the handler raised (the frontend's own message is kept).
            WorkerCrashed: the process died during the call.
            WorkerTimeout: no reply within ``timeout`` seconds; the process is killed.
        """
        self.start()
        assert self._conn is not None
        try:
            self._conn.send(request)
        except (BrokenPipeError, OSError) as err:
            raise self._crashed("call") from err
        return self._receive(timeout, what="call", request=request)

    def ask_to_stop(self) -> None:
        """Ask the process to exit, without waiting for it (:meth:`close` waits): a pool asks every worker first."""
        if self._conn is not None and self.alive and not self._asked_to_stop:
            self._asked_to_stop = True
            try:
                self._conn.send(None)
            except OSError:
                pass

    def close(self) -> None:
        """Stop the process politely, then firmly; whatever it started goes with it."""
        self.ask_to_stop()
        if self._process is not None:
            end_group(self._process, _EXIT_GRACE_S)
        if self._conn is not None:
            self._conn.close()
        self._process, self._conn = None, None
        self._asked_to_stop = False

    def _receive(self, timeout: float, what: str, request: dict[str, Any] | None = None) -> Any:
        assert self._conn is not None
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                raise WorkerTimeout(f"{self.name} worker gave no answer to its {what} within {timeout:g} s (--timeout); it was "
                                    "stopped, with every process it started.")
            try:
                if self._conn.poll(min(remaining, 0.5)):
                    reply = self._conn.recv()
                    break
            except (EOFError, OSError) as err:
                raise self._crashed(what) from err
            if not self.alive:
                raise self._crashed(what)
        failed = reply["status"] != Reply.OK
        for name, level, message in reply.get("logs", ()):
            # A failed call's error is its message, below: what the child logged of it (R echoes its error to the console)
            # is shown with -v, not as a second WARNING line beside the one error line.
            logging.getLogger(name).log(min(level, logging.INFO) if failed else level, "%s", message)
        self.last_memory = reply.get("memory", self.last_memory)
        if not failed:
            return reply["value"]
        if what == "start":
            self.close()
            raise WorkerError(f"{self.name} worker could not start: {reply['message']}")
        request = request or {}
        if "script" not in request:  # not a cell (``describe``): no script, mode or spec to name
            raise WorkerError(f"{self.name} worker could not answer its {request.get('kind', what)} request: {reply['message']}")
        raise ScriptError(
            self.name, str(request.get("script", "?")), str(request.get("mode", "?")),
            str(request.get("spec_summary", "")), reply["message"], bool(reply.get("refused")),
        )

    def _crashed(self, what: str) -> WorkerCrashed:
        process = self._process
        code = None
        if process is not None:
            exited = _exited_within(process, _EXIT_GRACE_S)
            code = end_group(process)  # the rest of its group too: a wrapper's child, R's helpers
            code = code if exited else None
        self.close()
        if code is not None and code < 0:
            try:
                how = f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exited with status {code}" if code is not None else "its connection closed"
        return WorkerCrashed(f"{self.name} worker died during its {what} ({how}).")

    def _kill(self) -> None:
        if self._process is not None:
            end_group(self._process)  # at once, with everything it started
        self.close()


def _exited_within(process: subprocess.Popen[bytes], seconds: float) -> bool:
    """Whether ``process`` exits within ``seconds`` (a crashed worker's status is read once it has)."""
    deadline = time.monotonic() + seconds
    while running(process):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


#: What the child runs: serve requests on the inherited socket (its descriptor is the first argument).
_CHILD_MAIN = "import sys; from harness.worker_side.serve import main; main(sys.argv[1:])"


