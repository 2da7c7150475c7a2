"""Processes the harness starts, each in a process group of its own, ended as a group: nothing it started outlives it.

A worker's interpreter may be a wrapper script that does not ``exec`` (``#!/bin/sh`` then ``python "$@"``), and an
activation script may start a ``sleep`` or a helper: killing the process the harness started left those running (a
wrapper's Python kept training at 70 % CPU after its cell timed out; a hanging activation script left its ``sleep``). So
every such process starts a new session (:func:`start_group`), and is ended with everything it started that stayed in
it (:func:`end_group`).

The group's id is its leader's pid. It is signalled before the leader is reaped where the harness can wait without
reaping (a running or zombie leader holds that pid, so the signal reaches no other process). A leader already reaped (an
activation script, read to its end) leaves the id held by whatever it left in the group; the group is signalled at once,
long before the pid could come round again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any

__all__ = ["end_group", "running", "start_group"]

#: How often :func:`end_group` looks whether the leader has exited, while it waits for it to.
_POLL_S = 0.02


def start_group(args: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **popen)`` in a new session: the process and everything it starts form one group."""
    return subprocess.Popen(args, start_new_session=True, **popen)


def end_group(process: subprocess.Popen[Any], grace: float = 0.0) -> int:
    """Wait up to ``grace`` seconds for ``process`` to exit by itself, then kill its whole group and reap it; its exit status.

    Whatever the leader left in its group (a wrapper's interpreter, an activation script's ``sleep``) is killed too, even
    when the leader exited on its own.
    """
    if process.returncode is None:
        _exited(process.pid, grace)  # without reaping it: its pid stays the group's until the kill below
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return process.wait()


def running(process: subprocess.Popen[Any]) -> bool:
    """Whether ``process`` still runs; unlike ``Popen.poll``, an exited leader is not reaped (see :func:`end_group`)."""
    return process.returncode is None and not _exited(process.pid, 0.0)


def _exited(pid: int, timeout: float) -> bool:
    """Whether the child ``pid`` exits within ``timeout`` seconds (it is left unreaped, a zombie, for the caller)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
                return True
        except ChildProcessError:  # reaped already
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))
