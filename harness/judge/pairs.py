"""Parity of a pair of cells (same script, mode and device; two frontends): findings, then one judgement.

A final loss alone is a weak signal, so everything a run records is compared (:mod:`harness.judge.findings`):
the loss at every step, every final-weights tensor (largest difference, relative L2 error, the worst
element, float32 ULPs), the loss-scale history and skipped steps, the dtypes inside the autocast region,
and each side's distance from the float64 reference (so a difference can be blamed on the side that moved).

Compare first, then judge once (:func:`judge`, from the findings' typed fields and the judging policy),
then say why (:mod:`harness.judge.explain`): every mismatch goes into the explanation; nothing stops at the first.
A pair the result traced (:class:`harness.model.trace.PairTrace`) also says where its two runs part, and is
held against the known differences (:mod:`harness.judge.known_differences`): a divergence whose trace matches an
entry is ``known_difference``; an identical pair whose trace shows an entry's trigger makes the entry
stale (``stale_known_difference``, which fails the run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.errors import SpecError
from harness.judge.expectation import expectation
from harness.judge.explain import Judgement, explain_pair, headline
from harness.judge.findings import PairFindings, StatusFindings, find_pair
from harness.judge.kept_weights import kept_for
from harness.judge.known_differences import KnownDifference, load_known_differences
from harness.judge.tolerances import DEFAULT_JUDGING, Tolerance, check_judging, tolerance_for
from harness.model.result import CellResult, MatrixResult
from harness.model.trace import PairTrace
from harness.model.verdicts import PairVerdict

__all__ = [
    "FAILING_VERDICTS", "VERDICTS", "compare_cells", "compare_result", "judge", "judge_statuses", "needs_trace",
]

#: ``identical``: losses, weights and scales bitwise equal. ``within_tolerance``: not identical, every
#: difference inside the :mod:`harness.judge.tolerances` policy, and identity not required. ``diverged``: a
#: real difference (the first step and the worst tensor are named): beyond tolerance, or, under the
#: ``strict`` policy, not bitwise identical where identity is expected (one libtorch, CPU).
#: ``known_difference``: not identical, and the trace matches an entry of the known differences (exit 0, the
#: entry is shown). ``stale_known_difference``: identical, but the trace shows the trigger of an entry that
#: covers this pair, so the entry no longer describes the bindings ("remove or update entry X").
#: ``unsupported`` / ``error`` / ``skipped``: a side did not give
#: a comparable run (its reason is carried); ``error`` also covers a numerical failure and unreadable weights.
VERDICTS = (
    "identical", "within_tolerance", "known_difference", "diverged", "stale_known_difference", "unsupported", "error", "skipped",
)
#: The verdicts that fail a run (exit status 1).
FAILING_VERDICTS = frozenset({"diverged", "stale_known_difference"})
#: Which non-ok status decides the verdict when a side did not run: the worst of the two sides first.
_STATUS_RANK = ("error", "numerical_failure", "unsupported", "skipped")
_STATUS_VERDICT = {"error": "error", "numerical_failure": "error", "unsupported": "unsupported", "skipped": "skipped"}


def compare_result(
    result: MatrixResult, judging: str | None = None, known: Sequence[KnownDifference] | None = None
) -> list[PairVerdict]:
    """A verdict for every pair of ``result``: each frontend against the baseline, on each script × mode × device.

    The baseline is ``result.baseline``; where it has no cell of a pair (a merged result whose baseline did not run
    on that device), the first of ``result.frontends`` that has one stands in, and every explanation names its
    baseline. ``judging`` (``strict`` or ``tolerance_only``) defaults to the policy the result was run under
    (its ``judging`` field). ``known``: the known differences (default: the committed list); each pair's stored
    trace (``result.traces``) is held against them. A cell alone in its pair is left out (the report lists it).

    One more pair where the baseline cannot speak for identity: a frontend not expected identical to the baseline
    (another libtorch build) is also paired with the first other frontend that loads its build (R torch on 2.8.0
    with PyTorch 2.8.0), so a libtorch's difference and a binding's are told apart in one result.

    Raises:
        UsageError: an unknown judging policy.
        KnownDifferencesError: the committed list cannot be read.
    """
    judging = check_judging(judging or result.judging or DEFAULT_JUDGING)
    known = load_known_differences() if known is None else known
    traces = {(t.pair, tuple(t.frontends)): t for t in result.traces}
    #: A merged result's input file of each cell (empty for one run's result).
    inputs = {cell_id: str(source.get("file")) for source in result.sources for cell_id in source.get("cells") or ()}
    verdicts = []
    for cells in _pairs(result).values():
        for base, other in _comparisons(cells):
            tolerance = None
            # The cell's own AMP dtype: a merged result's devices may have run in different ones (bfloat16 on CPU, float16 on CUDA).
            amp_dtype = (base.record.amp_dtype if base.record else None) or result.spec.amp_dtype
            if base.ok and other.ok and amp_dtype:
                tolerance = tolerance_for(base.mode, base.device, amp_dtype, result.steps, expectation(base, other).identical)
            trace = traces.get((base.pair, (base.frontend, other.frontend)))
            verdict = compare_cells(base, other, tolerance, judging, trace, known)
            files = (inputs.get(base.id), inputs.get(other.id))
            if trace is None and files[0] != files[1] and verdict.verdict in ("within_tolerance", "diverged"):
                verdict.explanation.append(f"no trace: the two cells come from different results ({files[0]} and {files[1]}); run "
                                           "both installations in one `harness run` to see where they part")
            verdicts.append(verdict)
    return verdicts


def _comparisons(cells: list[CellResult]) -> list[tuple[CellResult, CellResult]]:
    """The pairs judged among one script × mode × device's cells (baseline first): each with the baseline, then each
    frontend that the baseline cannot be identical to with the first other frontend that shares its libtorch build."""
    base, others = cells[0], cells[1:]
    out = [(base, other) for other in others]
    done = {frozenset((base.frontend, other.frontend)) for other in others}
    for x in others:
        if not x.ok or (base.ok and expectation(base, x).identical):
            continue
        partner = next((y for y in others if y is not x and y.ok and frozenset((x.frontend, y.frontend)) not in done
                        and expectation(x, y).identical), None)
        if partner is not None:
            done.add(frozenset((x.frontend, partner.frontend)))
            out.append((x, partner) if cells.index(x) < cells.index(partner) else (partner, x))
    return out


def _pairs(result: MatrixResult) -> dict[str, list[CellResult]]:
    """Each pair id's cells, the baseline (or its stand-in) first, then in ``result.frontends``' order."""
    order = [result.baseline, *[f for f in result.frontends if f != result.baseline]]
    rank = {name: i for i, name in enumerate(order)}
    pairs: dict[str, list[CellResult]] = {}
    for cell in result.cells:
        pairs.setdefault(cell.pair, []).append(cell)
    return {pair: sorted(cells, key=lambda c: (rank.get(c.frontend, len(rank)), c.frontend)) for pair, cells in pairs.items()}


def needs_trace(verdict: PairVerdict, known: Sequence[KnownDifference]) -> bool:
    """Whether a pair judged ``verdict`` (without a trace) is traced: every pair of two runs that is not identical
    (to say where it parts), and an identical one that a known difference covers (to see whether its trigger held)."""
    if verdict.verdict in ("diverged", "within_tolerance"):
        return not verdict.details.get("statuses") and not verdict.details.get("problems")
    languages = tuple(verdict.details.get("languages") or verdict.frontends)
    return verdict.verdict == "identical" and any(k.applies(verdict.pair, verdict.device, languages) for k in known)


def compare_cells(
    a: CellResult, b: CellResult, tolerance: Tolerance | None = None, judging: str = DEFAULT_JUDGING,
    trace: PairTrace | None = None, known: Sequence[KnownDifference] = (),
) -> PairVerdict:
    """Judge frontend ``a`` against frontend ``b`` on one cell of the matrix.

    ``tolerance`` defaults to the policy for the cells' mode, device, AMP dtype and step count.
    ``judging``: ``strict`` fails a pair that is not bitwise identical where the tolerance expects
    identity; ``tolerance_only`` lets the tolerance decide (see :mod:`harness.judge.tolerances`). ``trace``: the
    pair's trace, if it was traced: it names the first point that differs, and decides ``known`` matches.

    Raises:
        ValueError: ``a`` and ``b`` are not two frontends of one pair.
        UsageError: an unknown judging policy.
    """
    check_judging(judging)
    if a.pair != b.pair or a.frontend == b.frontend:
        raise ValueError(f"cells {a.id!r} and {b.id!r} are not two frontends of one pair")
    names = (a.frontend, b.frontend)
    languages = (a.language, b.language)
    statuses = StatusFindings(
        (str(a.status), str(b.status)), (a.reason, b.reason), (not a.ok or a.record is None, not b.ok or b.record is None),
    )
    if any(statuses.failed):
        return _status_verdict(a, names, statuses)
    ra, rb = a.record, b.record
    assert ra is not None and rb is not None
    expected = expectation(a, b)
    try:
        steps = max(len(ra.losses), len(rb.losses), 1)
        tol = tolerance or tolerance_for(a.mode, a.device, str(ra.amp_dtype), steps, expected.identical)
    except SpecError as err:
        return _verdict(a, names, "error", [headline(a.pair, names, "error", f"no tolerance for this record: {err}")], {})
    found = find_pair(names, a.mode, a.device, ra, rb, tol, (a.reference_distance, b.reference_distance), kept_for(a, b))
    judged = judge(found, judging)
    lines, details = explain_pair(a.pair, found, judged)
    lines.insert(1, f"expected: {expected.why}")
    lines += [f"lifted: {cell.frontend} ran {cell.record.lifted_check}" for cell in (a, b) if cell.record and cell.record.lifted_check]
    details = details | {"languages": list(languages), "identity_expected": expected.identical}
    if trace is None:
        return _verdict(a, names, judged.verdict, lines, details)
    return _verdict(a, names, *_with_trace(a, names, languages, judged.verdict, found, trace, known, lines, details))


def judge(found: PairFindings, judging: str) -> Judgement:
    """The verdict on two ok runs, from the findings' typed fields and the judging policy.

    ``diverged``: a check failed outright (beyond tolerance, or a history, dtype or shape that must be
    equal is not), or ``strict`` requires bitwise identity here and the weights could be read and are
    not identical. ``error``: a weights file could not be read. ``identical`` / ``within_tolerance``
    otherwise.
    """
    identity_required = judging == "strict" and found.tolerance.expected_identical
    identity_missed = identity_required and not found.identical and found.weights.readable
    if found.beyond or identity_missed:
        verdict = "diverged"
    elif not found.weights.readable:
        verdict = "error"
    else:
        verdict = "identical" if found.identical else "within_tolerance"
    return Judgement(verdict, judging, identity_required, identity_missed)


def judge_statuses(statuses: StatusFindings) -> str:
    """The verdict of a pair a side of which gave no comparable run: the worse side's status decides."""
    failed = [s for s, f in zip(statuses.statuses, statuses.failed, strict=True) if f]
    worst = min(failed, key=lambda s: _STATUS_RANK.index(s) if s in _STATUS_RANK else 0)
    return _STATUS_VERDICT.get(worst, "error")


def _with_trace(
    a: CellResult, names: tuple[str, str], languages: tuple[str, str], verdict: str, found: PairFindings, trace: PairTrace,
    known: Sequence[KnownDifference], lines: list[str], details: dict[str, Any],
) -> tuple[str, list[str], dict[str, Any]]:
    """The verdict, lines and details once the pair's trace is known: where it parts, and which known difference it is.

    Only a difference that stays inside what the tolerance accepts can be a known one (a history that must
    be equal and is not, or a step beyond the tolerance, stays ``diverged`` whatever the trace shows).
    """
    applicable = [k for k in known if k.applies(a.pair, a.device, languages)]
    cause = lines[0].partition(" — ")[2]
    first = trace.first_difference
    extra = trace.lines()
    entry = stale = None
    if verdict == "within_tolerance" or (verdict == "diverged" and not found.beyond):
        entry = next((k for k in applicable if k.matches(trace)), None)
        extra += [f"not known difference {k.id}: {k.mismatch(trace)}" for k in applicable if k is not entry]
    if verdict == "identical" and trace.identical:
        stale = next((k for k in applicable if k.trigger_steps(trace)), None)
    if entry is not None and first is not None:
        verdict = "known_difference"
        cause = (f"known difference {entry.id}: first differs at step {first.step}, {first.point} ({first.max_distance} ULP), "
                 f"as the entry describes; {cause}")
        extra += entry.lines()
    elif stale is not None:
        verdict = "stale_known_difference"
        steps = stale.trigger_steps(trace)
        cause = (f"remove or update entry {stale.id} (harness/judge/known_differences.toml): its trigger {stale.trigger} held at "
                 f"{len(steps)} step(s) from step {steps[0]}, and every traced point is bitwise identical")
    elif first is not None and verdict != "identical":
        cause += f"; first differs at step {first.step}, {first.point}"
    elif first is not None:  # identical records, yet a traced point differs: it never reached what the runs recorded
        same = [k.id for k in applicable if k.signature.first_point == first.point and not k.trigger_steps(trace)]
        extra.append("trace: the recorded results are bitwise identical: this difference never reached them"
                     + (f" (the mechanism of known difference {same[0]}, whose trigger did not occur)" if same else ""))
    details = details | {
        "trace": trace.to_json(), "known_difference": entry.id if entry else None, "stale_known_difference": stale.id if stale else None,
    }
    return verdict, [headline(a.pair, names, verdict, cause), *lines[1:], *extra], details


def _status_verdict(a: CellResult, names: tuple[str, str], statuses: StatusFindings) -> PairVerdict:
    verdict = judge_statuses(statuses)
    sides = [i for i in (0, 1) if statuses.failed[i]]
    lines = [f"{names[i]} {statuses.statuses[i]}: {statuses.reasons[i] or 'no run record'}" for i in sides]
    details = {
        "statuses": dict(zip(names, statuses.statuses, strict=True)),
        "reasons": {names[i]: statuses.reasons[i] for i in sides},
    }
    return _verdict(a, names, verdict, [headline(a.pair, names, verdict, lines[0]), *lines[1:]], details)


def _verdict(a: CellResult, names: tuple[str, str], verdict: str, explanation: list[str], details: dict[str, Any]) -> PairVerdict:
    return PairVerdict(a.pair, a.script, a.mode, a.device, names, verdict, explanation, details)
