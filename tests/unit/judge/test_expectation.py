"""Identity is expected from what each side reported (libtorch build, CPU), and every pair says why."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from harness.judge.expectation import expectation
from harness.judge.pairs import compare_result
from harness.model.result import CellResult, MatrixResult
from tests.twins import by_mode, golden, nudge_one_ulp, twin_cell

BUILD_213, BUILD_28 = "b7066ed94f422786bd205cd2743c2722b5f366fd", "dc83b47a91081e7cbc7a1754a3d162fdffa6f000"
EPYC = "AMD EPYC"


def facts(language: str, version: str, build: str | None, cpu: str = EPYC) -> dict[str, Any]:
    return {"language": language, "libtorch_version": version, "libtorch_build": build, "cpu": cpu}


def installed(cell: CellResult, **fact: Any) -> CellResult:
    return dataclasses.replace(cell, installation=facts(**fact))


@pytest.fixture
def default_cell() -> CellResult:
    return by_mode(golden())["default"]


@pytest.mark.parametrize(("a", "b", "identical", "says"), [
    (("python", "2.13.0", BUILD_213), ("r", "2.13.0", BUILD_213), True, "load one libtorch build (2.13.0, build b7066ed94f42) on one CPU"),
    (("python", "2.13.0", BUILD_213), ("r", "2.8.0", BUILD_28), False, "load different libtorch builds (libtorch 2.13.0 vs 2.8.0)"),
    (("python", "2.13.0", BUILD_213), ("python", "2.13.0", BUILD_28), False, "libtorch 2.13.0 in two builds"),
    (("python", "2.13.0", None), ("r", "2.13.0", None), True, "report libtorch 2.13.0 on CPU (no build ID recorded)"),
])
def test_identity_is_expected_for_one_build_on_one_cpu(
    default_cell: CellResult, tmp_path: Path, a: tuple[str, str, str | None], b: tuple[str, str, str | None], identical: bool, says: str,
) -> None:
    left = installed(default_cell, language=a[0], version=a[1], build=a[2])
    right = installed(twin_cell(default_cell, tmp_path, "other"), language=b[0], version=b[1], build=b[2])
    got = expectation(left, right)
    assert got.identical is identical and says in got.why


def test_one_build_on_two_cpus_is_not_expected_identical(default_cell: CellResult, tmp_path: Path) -> None:
    """A merged result's two CPU boxes may pick other kernels (AVX512, AMX) from one build."""
    left = installed(default_cell, language="python", version="2.13.0", build=BUILD_213, cpu=EPYC)
    right = installed(twin_cell(default_cell, tmp_path, "xeon"), language="python", version="2.13.0", build=BUILD_213, cpu="Intel Xeon")
    got = expectation(left, right)
    assert not got.identical and got.why == "python and xeon ran on different CPUs (AMD EPYC vs Intel Xeon), so identity is not expected"


@pytest.mark.parametrize(("features", "hosts", "identical", "says"), [
    ((["avx2", "avx512f", "avx512_bf16"], ["avx2", "avx512f", "avx512_bf16"]), ("a", "b"), True, "on one CPU kind (AMD EPYC, avx2"),
    ((["avx2", "avx512f", "avx512_bf16"], ["avx2"]), ("a", "b"), False, "other instruction sets (avx512_bf16, avx512f on one side only)"),
    ((["avx2"], None), ("a", "b"), False, "other instruction sets (avx2 on one side only)"),
    ((None, None), ("a", "b"), False, "ran on two hosts (a, b) whose CPUs' instruction sets were not recorded"),
    ((None, None), ("a", "a"), True, "load one libtorch build"),
], ids=["same-features", "one-lacks-avx512", "one-not-recorded", "two-hosts-unrecorded", "one-host-unrecorded"])
def test_identity_across_machines_needs_the_same_kernel_features(
    default_cell: CellResult, tmp_path: Path, features: tuple[list[str] | None, list[str] | None], hosts: tuple[str, str],
    identical: bool, says: str,
) -> None:
    """Two "AMD EPYC" boxes (a VM's model name) with one build pick their kernels by instruction set (AVX2 vs AVX512-BF16):
    identity is expected where both sides recorded the same features, or on one host; else not, saying which facts differ."""
    def with_cpu(cell: CellResult, cpu_features: list[str] | None, host: str) -> CellResult:
        extra = {"host": host} | ({"cpu_features": cpu_features} if cpu_features is not None else {})
        return dataclasses.replace(cell, installation=facts("python", "2.13.0", BUILD_213) | extra)

    left = with_cpu(default_cell, features[0], hosts[0])
    right = with_cpu(twin_cell(default_cell, tmp_path, "other"), features[1], hosts[1])
    got = expectation(left, right)
    assert got.identical is identical and says in got.why, got.why


def four_installations(tmp_path: Path, planted: bool = False) -> MatrixResult:
    """The golden default cell as python (2.13), py28 and r28 (2.8.0, one build) and r (2.13): r28's weights nudged if ``planted``."""
    base = by_mode(golden())["default"]
    python = installed(base, language="python", version="2.13.0", build=BUILD_213)
    others = [
        installed(twin_cell(base, tmp_path, "py28"), language="python", version="2.8.0", build=BUILD_28),
        installed(twin_cell(base, tmp_path, "r", edit=None), language="r", version="2.13.0", build=BUILD_213),
        installed(twin_cell(base, tmp_path, "r28", edit=nudge_one_ulp("layer0.weight", (1, 1)) if planted else None),
                  language="r", version="2.8.0", build=BUILD_28),
    ]
    return dataclasses.replace(golden(), cells=(python, *others), frontends=("python", "py28", "r", "r28"), baseline="python", traces=())


def test_every_frontend_meets_the_baseline_and_another_build_meets_its_own(tmp_path: Path) -> None:
    """py28 and r28 (libtorch 2.8.0) are paired with python (2.13.0) and with each other: only that pair must be identical."""
    pairs = compare_result(four_installations(tmp_path))
    assert [(p.frontends, p.verdict, p.details["identity_expected"]) for p in pairs] == [
        (("python", "py28"), "identical", False), (("python", "r"), "identical", True), (("python", "r28"), "identical", False),
        (("py28", "r28"), "identical", True),
    ]
    assert pairs[0].explanation[1] == (
        "expected: python and py28 load different libtorch builds (libtorch 2.13.0 vs 2.8.0), so identity is not expected"
    )


def test_a_planted_difference_in_one_build_s_binding_is_caught_by_its_partner(tmp_path: Path) -> None:
    """One ULP in r28's weights: within tolerance against python (another build), diverged against py28 (its own build)."""
    pairs = {p.frontends: p for p in compare_result(four_installations(tmp_path, planted=True))}
    assert pairs[("python", "r28")].verdict == "within_tolerance"
    assert pairs[("py28", "r28")].verdict == "diverged" and "identity is expected" in pairs[("py28", "r28")].explanation[1]
    assert pairs[("python", "r")].verdict == "identical"


def test_a_baseline_without_a_cell_on_a_device_gives_way_to_the_next(tmp_path: Path) -> None:
    """A merged result whose baseline did not run on a device: the first frontend there stands in, and is named."""
    result = four_installations(tmp_path)
    without = dataclasses.replace(result, cells=result.cells[1:])
    assert [p.frontends for p in compare_result(without)] == [("py28", "r"), ("py28", "r28")]
