"""Decisions are made by declared types and properties, never by names written out again (issue 36)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.judge.pairs import FAILING_VERDICTS, VERDICTS
from harness.model.verdicts import PairVerdict, Verdict

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
