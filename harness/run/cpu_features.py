"""What this machine's CPU can do that a run's numbers depend on: its usable cores, and whether it has bfloat16 instructions.

Without AVX512-BF16 or AMX-BF16 a CPU runs bfloat16 matrix products emulated, slower than float32: the seeds' AMP speed-ups
cannot appear on it (issue 38: most CI runners), and a reader must not take their absence for the harness's fault. Linux
lists the instructions in ``/proc/cpuinfo``'s ``flags``; elsewhere the answer is ``None`` (not known). oneDNN, which runs
those products, can be told to use fewer instructions than the CPU has (``ONEDNN_MAX_CPU_ISA``): then they are not used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["BF16_FLAGS", "CPUINFO", "ISA_CAP_VARIABLES", "NO_BF16_ISA_CAPS", "cpu_has_bf16", "usable_cpus"]

#: The ``/proc/cpuinfo`` flags of the bfloat16 instructions oneDNN's bfloat16 GEMMs use (x86: AVX512-BF16, AMX-BF16).
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
#: Where Linux lists the CPU's flags.
CPUINFO = Path("/proc/cpuinfo")
#: oneDNN's cap on the instructions it uses (``ONEDNN_MAX_CPU_ISA``; ``DNNL_MAX_CPU_ISA`` is its older name), which
#: PyTorch's and R torch's bfloat16 matrix products obey (R torch runs PyTorch's libtorch): the workers inherit it.
ISA_CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
#: oneDNN's ISA levels below ``AVX512_CORE_BF16`` (its ``dnnl_cpu_isa_t``, in order): capped at one of them, oneDNN uses
#: none of :data:`BF16_FLAGS`, and bfloat16 products are emulated as on a CPU without them. Measured here (2-vCPU EPYC
#: with AVX512-BF16, one thread, a 256x512 by 512x512 product): float32 1.8 ms; bfloat16 0.6 ms uncapped, 52 ms at
#: ``AVX2``, 3.9 ms at ``AVX512_CORE``. So a CPU with the instructions can stand in for one without them (issue 38).
NO_BF16_ISA_CAPS = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"})


def cpu_has_bf16(cpuinfo: Path = CPUINFO, environ: Mapping[str, str] | None = None) -> bool | None:
    """Whether the CPU's bfloat16 instructions are used: any of :data:`BF16_FLAGS` in ``cpuinfo``'s first ``flags`` line,
    and oneDNN not capped below them (:data:`NO_BF16_ISA_CAPS`, read from ``environ``, default this process's: an
    unknown cap leaves the flags to decide); ``None`` where ``cpuinfo`` cannot be read or lists no flags (not Linux, not x86)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    environ = os.environ if environ is None else environ
    cap = next((environ[name].strip().upper() for name in ISA_CAP_VARIABLES if environ.get(name, "").strip()), None)
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return any(flag in value.split() for flag in BF16_FLAGS) and cap not in NO_BF16_ISA_CAPS
    return None


def usable_cpus() -> int:
    """The cores this process may run on (its affinity where the OS has one, else the CPU count; at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
