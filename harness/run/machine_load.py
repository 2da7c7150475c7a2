"""What else the machine did while a timed round ran: other processes' CPU time and the worker's page faults.

A round that runs slow may be the cell's own doing or the machine's. The noise floor (:mod:`harness.worker_side.calibration`)
is timed in the moments after a round, so a single slow round escapes it. Two things the guest can see *during* the round
tell the causes apart: the CPU time every other process took (system-wide busy time from ``/proc/stat``, less the worker's
and this harness's own), and the page faults the worker took (the allocator handing memory back to the system and taking
it again). A slow round with neither is one the guest cannot explain: the host's (a neighbour VM, the CPU's frequency).
The spread target's reason names them, and sets aside a round they show the machine slowed (:mod:`harness.judge.spread`).

Linux only (``/proc``); elsewhere, or for a worker that has gone, every reading is ``None`` and the round keeps no load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.model.timing import RoundLoad

__all__ = ["LoadReading", "read_load", "round_load"]

#: The kernel's clock ticks per second, the unit of ``/proc``'s CPU times (100 on Linux: 10 ms a tick, so a round's other
#: CPU time is known to about two ticks).
_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

#: ``/proc/stat``'s ``cpu`` line: user, nice, system, idle, iowait, irq, softirq, steal. Busy is all but idle and iowait
#: (steal, time the host gave this VM's CPUs to another, is the machine's too).
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


@dataclass(frozen=True)
class LoadReading:
    """One moment's counters (ticks since boot, faults since the worker started)."""

    busy_ticks: int
    worker_ticks: int
    own_ticks: int
    worker_faults: int


def read_load(worker_pid: int | None) -> LoadReading | None:
    """The counters now, or ``None`` where they cannot be read (no ``/proc``, the worker gone)."""
    if worker_pid is None:
        return None
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        worker = _process_counters(worker_pid)
        own = _process_counters(os.getpid())
    except (OSError, ValueError, IndexError):
        return None
    return LoadReading(sum(fields[i] for i in _BUSY_FIELDS if i < len(fields)), worker[0], own[0], worker[1])


def round_load(before: LoadReading | None, after: LoadReading | None) -> RoundLoad | None:
    """What else ran between two readings (``None`` if either is missing)."""
    if before is None or after is None:
        return None
    other = (after.busy_ticks - before.busy_ticks) - (after.worker_ticks - before.worker_ticks) - (after.own_ticks - before.own_ticks)
    return RoundLoad(max(0, other) / _TICKS_PER_SECOND, after.worker_faults - before.worker_faults)


def _process_counters(pid: int) -> tuple[int, int]:
    """(user + system ticks of every thread, minor + major faults) from ``/proc/PID/stat``."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        after_name = f.read().rsplit(")", 1)[1].split()  # the name may hold spaces and parentheses
    # after the name: state(0) ppid pgrp session tty tpgid flags minflt(7) cminflt majflt(9) cmajflt utime(11) stime(12)
    return int(after_name[11]) + int(after_name[12]), int(after_name[7]) + int(after_name[9])
