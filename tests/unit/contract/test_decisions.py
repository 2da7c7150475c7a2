"""Decisions are made by declared types and properties, never by names written out again (issue 36)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.contract.modes import FOUR_MODE_MATRIX, Mode, modes_in
from harness.contract.optimizers import DEFAULT_OPTIMIZER
from harness.judge.gemm_precision import amp_gemm_problem
from harness.judge.pairs import FAILING_VERDICTS, VERDICTS
from harness.model.efficiency import gemm_dtype
from harness.model.verdicts import PairVerdict, Verdict
from harness.workload.optimizers import OPTIMIZERS, PRESET_OPTIMIZERS
from harness.workload.spec import WorkloadSpec

_HARNESS = Path(__file__).resolve().parents[3] / "harness"
_VERDICT_LITERAL = re.compile(r'verdict\s*(?:==|!=|=)\s*"|verdict(?:\.verdict)? in \(\s*"')


def test_pair_verdicts_are_one_type() -> None:
    assert VERDICTS == tuple(Verdict)
    assert FAILING_VERDICTS == {Verdict.DIVERGED, Verdict.STALE_KNOWN_DIFFERENCE}
    assert [v for v in Verdict if v.ok] == [Verdict.IDENTICAL, Verdict.WITHIN_TOLERANCE, Verdict.KNOWN_DIFFERENCE]
    pair = PairVerdict("p", "with_autocast", "default", "cpu", ("python", "r"), "identical")  # type: ignore[arg-type]
    assert pair.verdict is Verdict.IDENTICAL  # a stored string becomes the enum
    with pytest.raises(ValueError, match="divergd"):
        PairVerdict("p", "with_autocast", "default", "cpu", ("python", "r"), "divergd")  # type: ignore[arg-type]


def test_no_module_compares_a_verdict_with_a_string() -> None:
    found = [f"{path.relative_to(_HARNESS.parent)}:{n}" for path in _HARNESS.rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1) if _VERDICT_LITERAL.search(line)]
    assert not found, f"compare verdicts with harness.model.verdicts.Verdict, not strings: {found}"


def test_a_mode_is_judged_by_its_properties_not_its_name() -> None:
    """A float32 mode under another name gets the float32 peak and no "claims AMP" warning; an AMP mode named
    ``default`` would get both."""
    spec = WorkloadSpec.from_preset("tiny")
    profile = {"gemm_seconds": 1.0, "seconds_by_dtype": {"float32": 1.0}, "ops": [{"name": "aten::mm", "dtype": "float32", "count": 2}]}
    plain, amp = Mode("float32_again", autocast=False), Mode("default", autocast=True)
    assert (gemm_dtype(plain, spec), amp_gemm_problem(plain, profile)) == ("float32", None)
    assert gemm_dtype(amp, spec) == "bfloat16" and "claims AMP (default)" in str(amp_gemm_problem(amp, profile))


def test_target_sets_and_the_default_optimizer_are_declared_once() -> None:
    assert modes_in(FOUR_MODE_MATRIX) == ("default", "autocast", "autocast_scaler", "autocast_scaler_clip")
    assert DEFAULT_OPTIMIZER in OPTIMIZERS and PRESET_OPTIMIZERS["bench"] == (DEFAULT_OPTIMIZER,)
    assert {row.kind for row in OPTIMIZERS.values()} == {"proportional", "normalising"}


def test_no_decision_tests_a_mode_by_its_name() -> None:
    found = [f"{path.relative_to(_HARNESS.parent)}:{n}" for path in _HARNESS.rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(r'mode\s*[!=]=\s*"', line)]
    assert not found, f"decide by a Mode's declared properties (harness/contract/modes.py), not its name: {found}"
