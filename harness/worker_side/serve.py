"""The child half of a worker: the loop a worker process runs, serving one request at a time.

:class:`harness.run.worker.Worker` (the parent half) starts a process running :func:`serve` with a
*handler* named ``"module:Class"``; the handler's ``__call__`` takes a request dict and returns plain
data. Log records from the child (R's console output among them) travel back with each reply. This
module imports nothing of the parent's orchestration: a worker's interpreter needs only what its handler needs.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing.connection
import os
import resource
import signal
import tempfile
import traceback
from typing import Any

from harness.contract.replies import Reply

__all__ = ["main", "serve"]

log = logging.getLogger(__name__)

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


def main(argv: list[str]) -> None:
    """The child's entry (``harness.run.worker``): ``argv`` is the inherited socket's descriptor and the handler's name."""
    descriptor, handler_path = argv
    serve(multiprocessing.connection.Connection(int(descriptor)), handler_path, {})


def serve(conn: multiprocessing.connection.Connection, handler_path: str, env: dict[str, str]) -> None:
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
        _reply(conn, {"status": Reply.ERROR.value, "message": f"{type(err).__name__}: {err}", "logs": collector.drain()})
        return
    if not _reply(conn, {"status": Reply.OK.value, "value": None, "logs": collector.drain()}):
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
            reply = {"status": Reply.OK.value, "value": value}
        except Exception as err:
            message = getattr(err, "frontend_message", None) or f"{type(err).__name__}: {err}"
            log.debug("handler error:\n%s", traceback.format_exc())
            reply = {"status": Reply.ERROR.value, "message": message, "refused": bool(getattr(err, "refused", False))}
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
