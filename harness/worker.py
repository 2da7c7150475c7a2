"""A frontend in its own process, living across calls: the same machinery for Python and R.

Why a process: R torch ships its own libtorch, and two libtorch builds in one process crash; a
segfault or hang in native code must end one cell, not the test session. Why long-lived: R's
start-up and ``library(torch)`` are paid once, not per benchmark round, and the Python frontend is
run the same way so both are measured alike.

The child runs :func:`_serve` with a *handler* named ``"module:Class"``; the handler's ``__call__``
takes a request dict and returns plain data. Log records from the child (R's console output among
them) travel back with each reply and are re-emitted by the parent's loggers.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
import tempfile
import time
import traceback
from typing import Any

from harness.errors import ScriptError, WorkerCrashed, WorkerError, WorkerTimeout

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
        self._process = ctx.Process(target=_serve, args=(child, self.handler, self.env), name=f"amp-parity-{self.name}", daemon=True)
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


class _LogCollector(logging.Handler):
    """Keeps the child's log records so they travel back with the reply."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.name, record.levelno, record.getMessage()))

    def drain(self) -> list[tuple[str, int, str]]:
        records, self.records = self.records, []
        return records


def _serve(conn: multiprocessing.connection.Connection, handler_path: str, env: dict[str, str]) -> None:
    """The child's loop: build the handler, then answer requests until ``None`` arrives."""
    os.environ.update(env)
    tempfile.tempdir = None  # read $TMPDIR again: the parent may have given the worker its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    collector = _LogCollector()
    logging.getLogger().addHandler(collector)
    logging.getLogger().setLevel(logging.DEBUG)
    try:
        module_name, class_name = handler_path.split(":")
        handler = getattr(importlib.import_module(module_name), class_name)()
    except BaseException as err:
        _reply(conn, {"status": "error", "message": f"{type(err).__name__}: {err}", "logs": collector.drain()})
        return
    if not _reply(conn, {"status": "ok", "value": None, "logs": collector.drain()}):
        return
    memory = _MemoryProbe()
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        rss_before, scope = memory.start()
        try:
            value = handler(request)
            reply = {"status": "ok", "value": value}
        except Exception as err:
            message = getattr(err, "frontend_message", None) or f"{type(err).__name__}: {err}"
            log.debug("handler error:\n%s", traceback.format_exc())
            reply = {"status": "error", "message": message}
        reply["logs"] = collector.drain()
        reply["memory"] = {"peak_rss_bytes": memory.peak_rss_bytes(scope), "rss_before_bytes": rss_before, "scope": scope}
        if not _reply(conn, reply):
            return


def _reply(conn: multiprocessing.connection.Connection, reply: dict[str, Any]) -> bool:
    """Send ``reply``; ``False`` when the parent is gone (killed): the orphan then exits quietly, no traceback."""
    try:
        conn.send(reply)
    except OSError:  # BrokenPipeError, ConnectionResetError
        return False
    return True


class _MemoryProbe:
    """This process's resident memory around each call, read from files kept open for the process's life.

    Linux resets ``VmHWM`` when "5" is written to ``/proc/self/clear_refs`` (kernel 4.0+), so the peak
    read after a call is that call's own. Where that is refused, the peak is the process's lifetime
    high-water mark (``scope`` "process"), which bounds every call the worker has run. Both files are
    opened once and ``/proc/self/status`` is re-read with ``pread`` at offset 0 (the kernel writes it
    anew on every read): opening, decoding and scanning it line by line twice a call cost a timed
    round's bridge about 0.06 ms.
    """

    def __init__(self) -> None:
        self._status = _open_proc("/proc/self/status", os.O_RDONLY)
        self._clear_refs = _open_proc("/proc/self/clear_refs", os.O_WRONLY)

    def start(self) -> tuple[int | None, str]:
        """Reset the high-water mark; returns (RSS now, the peak's scope)."""
        try:
            if self._clear_refs is None:
                raise OSError("no /proc/self/clear_refs")
            os.write(self._clear_refs, b"5")
        except OSError:
            return self._status_bytes(b"VmRSS"), "process"
        return self._status_bytes(b"VmRSS"), "call"

    def peak_rss_bytes(self, scope: str) -> int | None:
        """The peak since :meth:`start` (``call``), or over the process's life (``process``)."""
        if scope == "call":
            return self._status_bytes(b"VmHWM")
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _status_bytes(self, field: bytes) -> int | None:
        """A ``kB`` field of ``/proc/self/status`` in bytes; ``None`` off Linux."""
        if self._status is None:
            return None
        try:
            status = os.pread(self._status, 16384, 0)
        except OSError:
            return None
        start = status.find(b"\n" + field + b":")
        if start < 0:
            return None
        line = status[start + len(field) + 2 : status.find(b"\n", start + 1)]
        return int(line.split()[0]) * 1024


def _open_proc(path: str, flags: int) -> int | None:
    try:
        return os.open(path, flags | os.O_CLOEXEC)
    except OSError:
        return None
