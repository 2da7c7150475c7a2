"""An example judged as the matrix judges a pair: identical, or proven by the known differences that cover it (their
reconciled runs bitwise identical), and each cell's own float64 check. Anything else is a finding.

The kinds of finding: ``pair`` (neither identical nor proven: a new difference, or a known one whose switch does not
reconcile this example, or whose signature does not reach it), ``crash`` (a cell failed in one language and not in the
other, and no known bug excuses it) and ``own_check`` (a cell off its float64 bound or GradScaler's rule where its
partner passes: the difference moved it). Not findings: both languages refusing or failing alike (the drawn point is
outside what both run), a side unsupported, a pair identical where a known difference's trigger held (the matrix's
``stale_known_difference``: a mechanism need not show at every point the search draws), and a cell off the float64
bound whose partner is off it too or excused (a ``bound`` note: the bound, calibrated on the presets' sizes, does not
reach the drawn ones; the two bindings agree, or a proven difference explains them).

A finding's ``signature`` is what Hypothesis keeps one finding apart from another by while it shrinks: the kind and the
first differing point's name (steps and layer numbers left out), or the failing side and its error's first words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.judge.pairs import excused_cells
from harness.model.pair_trace import PairTrace
from harness.model.result import MatrixResult, Status
from harness.model.verdicts import Verdict

__all__ = ["FINDING_KINDS", "Judged", "judge_example"]

FINDING_KINDS: tuple[str, ...] = ("pair", "crash", "own_check")
_FAILED = (Status.ERROR, Status.NUMERICAL_FAILURE)


@dataclass(frozen=True)
class Judged:
    """What one example came to: ``outcome`` (for the coverage: identical, known_difference, both_failed, unsupported,
    skipped, bound, or a finding's kind), and for a finding its ``signature``, one-line ``summary``, the first differing
    tensor the trace names (``first_difference``: ``step N, point``) and the explanation's lines."""

    outcome: str
    signature: str = ""
    summary: str = ""
    first_difference: str | None = None
    lines: tuple[str, ...] = field(default_factory=tuple)

    @property
    def finding(self) -> bool:
        """Whether the example is a finding."""
        return self.outcome in FINDING_KINDS


def _generic(text: str) -> str:
    """A name or message with its numbers left out (steps, layers, sizes): what stays the same as an example shrinks."""
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", text)


def _point(trace: PairTrace) -> tuple[str | None, str]:
    """The first differing tensor (``step N, name``), plain or after reconciliation, and its generic name."""
    plain, diff = trace.first_difference, trace.reconciled or trace.first_difference
    if diff is None:
        return None, ""
    again = trace.reconciled is not None and (plain is None or (plain.step, plain.point) != (diff.step, diff.point))
    return f"step {diff.step}, {diff.point}", _generic(diff.point) + (" (after reconciliation)" if again else "")


def judge_example(result: MatrixResult) -> Judged:
    """The verdict of one example's result (one pair, python and r, judged by the matrix's rules)."""
    cells = list(result.cells)
    pair = result.pairs[0] if result.pairs else None
    if any(c.status is Status.SKIPPED for c in cells):
        return Judged("skipped", lines=tuple(c.reason or "" for c in cells))
    excused = excused_cells(result)
    failed = [c for c in cells if c.status in _FAILED and c.id not in excused]
    if len(failed) == len(cells):
        return Judged("both_failed", lines=tuple(c.reason or "" for c in cells))
    if failed and not any(c.status is Status.UNSUPPORTED for c in cells):
        cell = failed[0]
        said = (cell.reason or "").partition(") failed: ")[2] or cell.reason or ""  # the error, not the script's header
        words = " ".join(_generic(said).split()[:12])
        return Judged("crash", f"crash in {cell.frontend}: {words}", f"{cell.frontend} failed, its partner ran: {cell.reason}",
                      lines=tuple(c.reason or "" for c in cells))
    if pair is not None and pair.verdict == Verdict.DIVERGED:
        trace = PairTrace.from_json(pair.details["trace"]) if pair.details.get("trace") else None
        first, name = _point(trace) if trace is not None else (None, "")
        return Judged("pair", f"pair: {name or _generic(pair.cause)}", pair.summary, first, tuple(pair.explanation))
    own = [c for c in cells if c.verdict is not None and c.verdict.failed]
    if own:
        partners = [c for c in cells if c not in own]
        if not partners or any(c.verdict is None or c.verdict.outcome != "pass" for c in partners):
            return Judged("bound", lines=tuple(c.verdict.reason for c in own if c.verdict))
        cell = own[0]
        assert cell.verdict is not None
        what = "float64" if cell.verdict.float64 is not None and not cell.verdict.float64.passed else "scaler"
        return Judged("own_check", f"own check ({what}) fails in {cell.frontend}", f"{cell.id}: {cell.verdict.reason}",
                      lines=(cell.verdict.reason, *(pair.explanation if pair else ())))
    if any(c.status is Status.UNSUPPORTED for c in cells) or pair is None:
        return Judged("unsupported", lines=tuple(c.reason or "" for c in cells if c.reason))
    if pair.verdict == Verdict.STALE_KNOWN_DIFFERENCE:  # identical here: a mechanism need not show at every point
        return Judged("identical", lines=tuple(pair.explanation))
    return Judged(str(pair.verdict))
