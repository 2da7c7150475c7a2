"""A worker names the libtorch build it loaded by the library's GNU build ID: read here from real and planted ELF files."""

from __future__ import annotations

import struct
from pathlib import Path

import torch

from harness.worker_side.installation_facts import LIBTORCH_CPU, cpu_model, elf_build_id


def _elf_with_note(path: Path, build_id: bytes) -> None:
    """A minimal 64-bit little-endian ELF file with one PT_NOTE holding a GNU build ID."""
    note = struct.pack("<III", 4, len(build_id), 3) + b"GNU\0" + build_id
    phoff, phentsize = 64, 56
    offset = phoff + phentsize
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, phoff)
    struct.pack_into("<HH", header, 0x36, phentsize, 1)
    program = struct.pack("<IIQQQQQQ", 4, 4, offset, 0, 0, len(note), len(note), 4)
    path.write_bytes(bytes(header) + program + note)


def test_the_build_id_of_a_planted_elf_is_read(tmp_path: Path) -> None:
    _elf_with_note(tmp_path / "lib.so", bytes.fromhex("00112233445566778899aabbccddeeff01234567"))
    assert elf_build_id(str(tmp_path / "lib.so")) == "00112233445566778899aabbccddeeff01234567"


def test_a_file_that_is_not_elf_has_no_build_id(tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"not an ELF file at all" * 4)
    assert elf_build_id(str(tmp_path / "x")) is None
    assert elf_build_id(str(tmp_path / "missing")) is None


def test_this_torch_s_libtorch_has_a_build_id() -> None:
    """PyTorch's wheels are linked with --build-id: the fact that tells two installations' kernels apart."""
    library = Path(torch.__file__).parent / "lib" / LIBTORCH_CPU
    found = elf_build_id(str(library))
    assert found is not None and len(found) == 40 and int(found, 16) > 0


def test_the_cpu_model_is_named() -> None:
    assert cpu_model().strip() != ""
