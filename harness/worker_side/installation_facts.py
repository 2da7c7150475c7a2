"""What a worker says about its installation: the libtorch it loaded (version and build), and the machine.

Whether two installations are expected to be bitwise identical is decided from these facts, not from names: two
frontends on one CPU that load the same libtorch build run the same kernels. The build is the loaded
``libtorch_cpu.so``'s GNU build ID (an ELF note the linker writes: the same bytes, the same ID), read from the
library the process really mapped (``/proc/self/maps``), so a venv's torch, an R torch bundle linked to a Python
wheel's libtorch, and ``install_torch()``'s own download are told apart or found to be one. Read in Python for
both languages: the R worker is a Python process embedding R, and its maps show R torch's libtorch.
"""

from __future__ import annotations

import os
import platform
import socket
import struct
import sys
from typing import Any

__all__ = ["KERNEL_FEATURES", "cpu_features", "elf_build_id", "installation_facts", "loaded_library"]

#: The library that holds libtorch's CPU kernels, in every build (CPU and CUDA wheels, R torch's download).
LIBTORCH_CPU = "libtorch_cpu.so"
#: The CPU flags (``/proc/cpuinfo``) that decide which kernels a libtorch build dispatches to (ATen's CPU capability,
#: oneDNN's and MKL's ISA choice: AVX2, AVX512, their bf16/fp16/VNNI forms, AMX). Two machines whose CPUs share a
#: model name may differ here (a VM reports "AMD EPYC" with or without AVX512); two that agree run the same kernels.
KERNEL_FEATURES = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
)
_PT_NOTE = 4
_NT_GNU_BUILD_ID = 3


def installation_facts(language: str, **language_facts: Any) -> dict[str, Any]:
    """The facts of this worker's installation: ``language_facts`` (versions the language reports) and what is loaded."""
    library = loaded_library(LIBTORCH_CPU)
    return {
        "language": language, **language_facts,
        "libtorch_path": library, "libtorch_build": elf_build_id(library) if library else None,
        "interpreter": sys.executable, "host": socket.gethostname(), "cpu": cpu_model(), "cpu_features": cpu_features(),
        "machine": platform.machine(),
    }


def loaded_library(name: str) -> str | None:
    """The real path of the mapped library whose file name starts with ``name``, or ``None`` (not loaded, or no ``/proc``)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.split(maxsplit=5)[-1].strip() if line.count(" ") >= 5 else ""
                if os.path.basename(path).startswith(name):
                    return os.path.realpath(path)
    except OSError:
        return None
    return None


def elf_build_id(path: str) -> str | None:
    """The GNU build ID of a 64-bit little-endian ELF file (hex), or ``None`` when it has none or is not one."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(64)
            if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
                return None
            phoff, = struct.unpack_from("<Q", header, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
            handle.seek(phoff)
            table = handle.read(phentsize * phnum)
            for i in range(phnum):
                kind, _, offset, _, _, size = struct.unpack_from("<IIQQQQ", table, i * phentsize)
                if kind == _PT_NOTE:
                    handle.seek(offset)
                    found = _build_id_note(handle.read(size))
                    if found:
                        return found
    except (OSError, struct.error):
        return None
    return None


def _build_id_note(notes: bytes) -> str | None:
    position = 0
    while position + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, position)
        name_start = position + 12
        desc_start = name_start + (namesz + 3) // 4 * 4
        if kind == _NT_GNU_BUILD_ID and notes[name_start:name_start + namesz].rstrip(b"\0") == b"GNU":
            return notes[desc_start:desc_start + descsz].hex()
        position = desc_start + (descsz + 3) // 4 * 4
    return None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), which decides the kernels a CPU build picks (AVX512, AMX)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_features() -> list[str] | None:
    """The :data:`KERNEL_FEATURES` this CPU has (``/proc/cpuinfo``'s flags), in that order; ``None`` where none are read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    return [f for f in KERNEL_FEATURES if f in flags]
    except OSError:
        pass
    return None
