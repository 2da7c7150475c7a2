"""What this machine's CPU can do that a run's numbers depend on: its usable cores, and whether it has bfloat16 instructions.

Without AVX512-BF16 or AMX-BF16 a CPU runs bfloat16 matrix products emulated, slower than float32: the seeds' AMP speed-ups
cannot appear on it (issue 38: most CI runners), and a reader must not take their absence for the harness's fault. Linux
lists the instructions in ``/proc/cpuinfo``'s ``flags``; elsewhere the answer is ``None`` (not known).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["BF16_FLAGS", "CPUINFO", "cpu_has_bf16", "usable_cpus"]

#: The ``/proc/cpuinfo`` flags of the bfloat16 instructions oneDNN's bfloat16 GEMMs use (x86: AVX512-BF16, AMX-BF16).
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
#: Where Linux lists the CPU's flags.
CPUINFO = Path("/proc/cpuinfo")


def cpu_has_bf16(cpuinfo: Path = CPUINFO) -> bool | None:
    """Whether the CPU has bfloat16 instructions (any of :data:`BF16_FLAGS` in its first ``flags`` line); ``None`` where
    ``cpuinfo`` cannot be read or lists no flags (not Linux, not x86)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return any(flag in value.split() for flag in BF16_FLAGS)
    return None


def usable_cpus() -> int:
    """The cores this process may run on (its affinity where the OS has one, else the CPU count; at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
