"""A frontend in its own process, living across calls: the same machinery for Python and R.

Why a process: R torch ships its own libtorch, and two libtorch builds in one process crash; a
segfault or hang in native code must end one cell, not the test session. Why long-lived: R's
start-up and ``library(torch)`` are paid once, not per benchmark round, and the Python frontend is
run the same way so both are measured alike.

The child runs :func:`serve` with a *handler* named ``"module:Class"``; the handler's ``__call__``
takes a request dict and returns plain data. Log records from the child (R's console output among
them) travel back with each reply and are re-emitted by the parent's loggers.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import signal
import time
from typing import Any

from harness.errors import ScriptError, WorkerCrashed, WorkerError, WorkerTimeout
from harness.frontends.serve import serve

__all__ = ["Worker"]

log = logging.getLogger(__name__)

#: How long a new worker may take to import its frontend (R's start-up, ``import torch``).
_START_TIMEOUT_S = 120.0


class Worker:
    """One frontend process; restarted transparently on the next call after a crash or timeout."""

    def __init__(self, name: str, handler: str, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.handler = handler
        self.env = env or {}
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: multiprocessing.connection.Connection | None = None
        self.starts = 0
        #: Seconds the last start took (interpreter, imports, R's start-up and ``library(torch)``).
        self.startup_seconds: float | None = None
        #: Resident memory of the last call (see :class:`_MemoryProbe`): its peak, what the process held
        #: before it, and whether the peak covers that call alone (``call``) or the process's life.
        self.last_memory: dict[str, Any] | None = None

    @property
    def alive(self) -> bool:
        """Whether the worker process is running."""
        return self._process is not None and self._process.is_alive()

    @property
    def pid(self) -> int | None:
        """The worker's process id, while it runs."""
        return self._process.pid if self.alive and self._process is not None else None

    def start(self) -> None:
        """Start the process and wait until its handler is ready (raises what the handler raised)."""
        if self.alive:
            return
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._process = ctx.Process(target=serve, args=(child, self.handler, self.env), name=f"amp-parity-{self.name}", daemon=True)
        try:
            self._process.start()
        except BaseException:
            child.close()
            parent.close()
            self._process = None
            raise
        child.close()
        self._conn = parent
        self.starts += 1
        started = time.perf_counter()
        self._receive(_START_TIMEOUT_S, what="start")
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

    def close(self) -> None:
        """Stop the process politely, then firmly."""
        if self._conn is not None and self.alive:
            try:
                self._conn.send(None)
            except OSError:
                pass
        if self._process is not None and self._process.pid is not None:  # only a started process can be joined
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(timeout=5)
        if self._conn is not None:
            self._conn.close()
        self._process, self._conn = None, None

    def _receive(self, timeout: float, what: str, request: dict[str, Any] | None = None) -> Any:
        assert self._conn is not None
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                raise WorkerTimeout(f"{self.name} worker gave no answer to its {what} within {timeout:g} s; it was stopped.")
            try:
                if self._conn.poll(min(remaining, 0.5)):
                    reply = self._conn.recv()
                    break
            except (EOFError, OSError) as err:
                raise self._crashed(what) from err
            if not self.alive:
                raise self._crashed(what)
        for name, level, message in reply.get("logs", ()):
            logging.getLogger(name).log(level, "%s", message)
        self.last_memory = reply.get("memory", self.last_memory)
        if reply["status"] == "ok":
            return reply["value"]
        if what == "start":
            self.close()
            raise WorkerError(f"{self.name} worker could not start: {reply['message']}")
        request = request or {}
        raise ScriptError(
            self.name, str(request.get("script", "?")), str(request.get("mode", "?")),
            str(request.get("spec_summary", "")), reply["message"],
        )

    def _crashed(self, what: str) -> WorkerCrashed:
        process = self._process
        if process is not None:
            process.join(timeout=5)
        code = process.exitcode if process is not None else None
        self.close()
        if code is not None and code < 0:
            try:
                how = f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        return WorkerCrashed(f"{self.name} worker died during its {what} ({how}); it will be restarted for the next call.")

    def _kill(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._process.kill()
        self.close()


