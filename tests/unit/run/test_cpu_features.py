"""What the CPU can do (harness.run.cpu_features): its bfloat16 instructions read from /proc/cpuinfo's flags. This machine
has avx512_bf16; a CPU without (most CI runners) is planted as a cpuinfo file of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.run.cpu_features import cpu_has_bf16, usable_cpus

_EPYC_AVX2 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512_vnni\n\nprocessor\t: 1\n"


@pytest.mark.parametrize(("flags", "expected"), [
    ("fpu sse2 avx avx2 fma avx512f avx512_vnni", False),  # AVX2 and AVX-512 without its bfloat16 part: emulated bf16
    ("fpu avx2 avx512f avx512_bf16", True),  # Zen 4, Cooper Lake
    ("fpu avx2 amx_tile amx_bf16 amx_int8", True),  # Sapphire Rapids (AMX)
    ("fpu avx2 avx512_bf16x", False),  # a flag is a whole word
])
def test_bf16_instructions_are_read_from_the_flags(tmp_path: Path, flags: str, expected: bool) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert cpu_has_bf16(cpuinfo, environ={}) is expected


@pytest.mark.parametrize(("environ", "expected"), [
    ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, False),  # what a CPU without the instructions runs: emulated bfloat16
    ({"ONEDNN_MAX_CPU_ISA": " avx512_core "}, False),  # oneDNN reads the name in any case
    ({"DNNL_MAX_CPU_ISA": "AVX512_CORE_VNNI"}, False),  # the older name
    ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, True),  # at the instructions: they are used
    ({"ONEDNN_MAX_CPU_ISA": "ALL"}, True),
    ({"ONEDNN_MAX_CPU_ISA": "NOT_AN_ISA"}, True),  # a cap this does not know leaves the flags to decide
    ({"ONEDNN_MAX_CPU_ISA": ""}, True),
])
def test_a_onednn_cap_below_the_bf16_instructions_means_they_are_not_used(
        tmp_path: Path, environ: dict[str, str], expected: bool) -> None:
    """Issue 38: a CPU with the instructions stands in for one without (the header's note, bench's float32-only modes)."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    assert cpu_has_bf16(cpuinfo, environ=environ) is expected
    # a cap cannot add what the CPU lacks, nor make a flagless CPU known
    (tmp_path / "epyc").write_text(_EPYC_AVX2)
    assert cpu_has_bf16(tmp_path / "epyc", environ=environ) is False
    (tmp_path / "arm").write_text("processor\t: 0\nFeatures\t: fp asimd\n")
    assert cpu_has_bf16(tmp_path / "arm", environ=environ) is None


def test_an_unreadable_or_flagless_cpuinfo_is_not_known(tmp_path: Path) -> None:
    """Not Linux, or not x86 (no flags line): ``None``, so no note claims what was not seen."""
    assert cpu_has_bf16(tmp_path / "missing") is None
    (tmp_path / "arm").write_text("processor\t: 0\nFeatures\t: fp asimd\n")
    assert cpu_has_bf16(tmp_path / "arm") is None
    (tmp_path / "epyc").write_text(_EPYC_AVX2)
    assert cpu_has_bf16(tmp_path / "epyc") is False


def test_this_machine_is_read() -> None:
    """The real /proc/cpuinfo gives an answer here (Linux, x86), and at least one usable core."""
    assert cpu_has_bf16() in (True, False) and usable_cpus() >= 1
