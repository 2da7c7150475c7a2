"""Parity of a pair of cells (same script, mode, optimizer and device; two frontends): findings, then one judgement.

A final loss alone is a weak signal, so everything a run records is compared (:mod:`harness.judge.findings`):
the loss at every step, every final-weights tensor (largest difference, relative L2 error, the worst
element, float32 ULPs), the loss-scale history and skipped steps, the dtypes inside the autocast region,
and each side's distance from the float64 reference (so a difference can be blamed on the side that moved).

Compare first, then judge once (:func:`judge`, from the findings' typed fields and the judging policy),
then say why (:mod:`harness.judge.explain`): every mismatch goes into the explanation; nothing stops at the first.

Every pair is traced from what its two cells store (:func:`harness.judge.divergence.trace_cells`): in the run that made
them and in a ``merge`` of two slices or two machines alike, so a pair's verdict never depends on how the matrix was
run, sliced or ordered. The trace is held against the known differences (:mod:`harness.judge.known_differences`): a
difference whose first point has an entry's signature is ``known_difference`` only once it is *proven*, where identity
is expected: the cells' reconciled runs (each with the switches of the entries that cover it) are bitwise identical for
the whole run. An identical pair whose trace shows an entry's trigger makes the entry stale (``stale_known_difference``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import SpecError
from harness.judge.divergence import plain_traces_identical, read_cell_trace, trace_cells
from harness.judge.expectation import expectation
from harness.judge.explain import Judgement, explain_pair, headline
from harness.judge.findings import PairFindings, StatusFindings, find_pair
from harness.judge.kept_weights import kept_for
from harness.judge.known_differences import KnownDifference, load_known_differences
from harness.judge.tolerances import DEFAULT_JUDGING, Tolerance, check_judging, tolerance_for
from harness.model.pair_trace import PairTrace
from harness.model.record_points import RECORD_PREFIX, has_record_points, records_only
from harness.model.result import CellResult, MatrixResult, Status
from harness.model.verdicts import PairVerdict, Verdict
from harness.workload.features import micro_batches
from harness.workload.optimizers import OPTIMIZERS

__all__ = [
    "FAILING_VERDICTS", "VERDICTS", "compare_cells", "compare_result", "excused_cells", "judge", "judge_statuses", "needs_detail",
    "pair_trace", "reconciled_records_differ", "reconciliation_needed",
]

#: Every pair verdict (:class:`~harness.model.verdicts.Verdict` says what each means).
VERDICTS: tuple[Verdict, ...] = tuple(Verdict)
#: The verdicts that fail a run (exit status 1).
FAILING_VERDICTS = frozenset(v for v in Verdict if v.failing)
#: Which non-ok status decides the verdict when a side did not run: the worst of the two sides first.
_STATUS_RANK: tuple[str, ...] = (Status.ERROR, Status.NUMERICAL_FAILURE, Status.UNSUPPORTED, Status.SKIPPED)
_STATUS_VERDICT: dict[str, Verdict] = {Status.ERROR: Verdict.ERROR, Status.NUMERICAL_FAILURE: Verdict.ERROR,
                                        Status.UNSUPPORTED: Verdict.UNSUPPORTED, Status.SKIPPED: Verdict.SKIPPED}


def compare_result(
    result: MatrixResult, judging: str | None = None, known: Sequence[KnownDifference] | None = None
) -> list[PairVerdict]:
    """A verdict for every pair of ``result``: each frontend against the baseline, on each script × mode × optimizer × device.

    The baseline is ``result.baseline``; where it has no cell of a pair (a merged result whose baseline did not run
    on that device), the first of ``result.frontends`` that has one stands in, and every explanation names its
    baseline. ``judging`` (``strict`` or ``tolerance_only``) defaults to the policy the result was run under
    (its ``judging`` field). ``known``: the known differences (default: the committed list); each pair's trace,
    computed from its cells' stored traces (a run's second pass adds distances: ``result.traces``), is held against
    them. A cell alone in its pair is left out (the report lists it).

    One more pair where the baseline cannot speak for identity: a frontend not expected identical to the baseline
    (another libtorch build) is also paired with the first other frontend that loads its build (R torch on 2.8.0
    with PyTorch 2.8.0), so a libtorch's difference and a binding's are told apart in one result.

    Raises:
        UsageError: an unknown judging policy.
        KnownDifferencesError: the committed list cannot be read.
    """
    judging = check_judging(judging or result.judging or DEFAULT_JUDGING)
    known = load_known_differences() if known is None else known
    stored = {(t.pair, frozenset(t.frontends)): t for t in result.traces}
    #: A merged result's input file of each cell (empty for one run's result).
    inputs = {cell_id: str(source.get("file")) for source in result.sources for cell_id in source.get("cells") or ()}
    verdicts = []
    for cells in _pairs(result).values():
        for base, other in _comparisons(cells):
            tolerance = None
            # The cell's own AMP dtype: a merged result's devices may have run in different ones (bfloat16 on CPU, float16 on CUDA).
            amp_dtype = (base.record.amp_dtype if base.record else None) or result.spec.amp_dtype
            if base.ok and other.ok and amp_dtype:
                tolerance = tolerance_for(
                    base.cell.properties, base.device, amp_dtype, result.steps, expectation(base, other).identical, base.cell.optimizer
                )
            trace = pair_trace(base, other, stored.get((base.pair, frozenset((base.frontend, other.frontend)))))
            args = {**OPTIMIZERS[base.optimizer].args, **result.run_of(base).spec.optimizer_args.get(base.optimizer, {})}
            verdict = compare_cells(base, other, tolerance, judging, trace, known, args)
            files = (inputs.get(base.id), inputs.get(other.id))
            if trace is None and files[0] != files[1] and verdict.verdict in (Verdict.WITHIN_TOLERANCE, Verdict.DIVERGED):
                verdict.explanation.append(f"no trace: the two cells come from different results ({files[0]} and {files[1]}) "
                                           "that stored no traces of their cells (written before schema 8); run them again")
            verdicts.append(verdict)
    return verdicts


def pair_trace(a: CellResult, b: CellResult, stored: PairTrace | None = None) -> PairTrace | None:
    """The trace of the pair ``a``, ``b``: computed from the traces the cells store, with the distance a run's second pass
    measured (``stored``, of this pair in either order) attached as ``detail`` where it found the same first difference
    (shown, never judged); a result from before cells stored traces has only ``stored``.

    Raises:
        ResultError: a cell's stored trace is missing, replaced or malformed.
    """
    if not any(t is not None for c in (a, b) for t in (c.trace, c.reconciled)):
        if stored is not None and tuple(stored.frontends) != (a.frontend, b.frontend):
            return stored.swapped()
        return stored
    trace = trace_cells(a, b)
    shown = stored.detail if stored is not None else None
    if shown is None or trace.first_difference is None:
        return trace
    detail = shown if tuple(stored.frontends) == (a.frontend, b.frontend) else shown.swapped()  # type: ignore[union-attr]
    found = trace.first_difference
    if (detail.step, detail.point, detail.kind) == (found.step, found.point, found.kind):
        return dataclasses.replace(trace, detail=detail, seconds=stored.seconds)  # type: ignore[union-attr]
    return trace


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
    return _grouped(result.cells, result.baseline, result.frontends)


def _grouped(cells: Sequence[CellResult], baseline: str, frontends: Sequence[str]) -> dict[str, list[CellResult]]:
    order = [baseline, *[f for f in frontends if f != baseline]]
    rank = {name: i for i, name in enumerate(order)}
    pairs: dict[str, list[CellResult]] = {}
    for cell in cells:
        pairs.setdefault(cell.pair, []).append(cell)
    return {pair: sorted(group, key=lambda c: (rank.get(c.frontend, len(rank)), c.frontend)) for pair, group in pairs.items()}


def reconciliation_needed(cells: Sequence[CellResult], baseline: str, frontends: Sequence[str]) -> frozenset[str]:
    """The ids of the cells whose reconciled run can bear on a verdict, once their record calls are in: every cell but
    those whose every comparison (:func:`compare_result`'s) is with a cell that ran beside it, both ``ok``, their plain
    traces bitwise identical (:func:`harness.judge.divergence.plain_traces_identical`).

    Such a pair is judged ``identical`` (or its entry stale) from its plain traces alone: :func:`_with_trace` reads the
    reconciled runs only to prove a difference, or a crash. So a run spends reconciled runs only where a pair parts
    (issue 38: 56 of 340 ``tiny`` pairs ran one for nothing), and every verdict stays what it was. A cell whose pair is
    not all here (a slice of the matrix, merged later) keeps its run: whether its pair parts is known only where the two
    meet. A merge that pairs a cell with a partner its own run did not have finds no reconciled run where that pair parts,
    and says so (the pair is not proven): run the two together.
    """
    needed: set[str] = set()
    for group in _grouped(cells, baseline, frontends).values():
        compared: set[str] = set()
        for a, b in _comparisons(group):
            compared |= {a.id, b.id}
            if not (a.ok and b.ok and plain_traces_identical(a, b)):
                needed |= {a.id, b.id}
        needed |= {c.id for c in group if c.id not in compared}
    return frozenset(needed)


def reconciled_records_differ(cells: Sequence[CellResult], baseline: str, frontends: Sequence[str]) -> frozenset[str]:
    """The ids of the cells whose reconciled run ran untraced (its trace holds its record points only:
    :func:`harness.model.record_points.records_only`) where a comparison it is in is not proven by the records: they
    part from the partner's (or cannot be compared). Those are run again traced, so the verdict says where the reconciled
    runs part, as it did when every reconciled run was traced; where the records match, the proof is the same
    (:func:`_reconciled`: everything the runs record, bitwise identical) and no trace is needed (issue 47)."""
    again: set[str] = set()
    for group in _grouped(cells, baseline, frontends).values():
        for a, b in _comparisons(group):
            lean = [c.id for c in (a, b) if c.reconciled is not None and records_only(read_cell_trace(c.reconciled))]
            if lean and trace_cells(a, b).reconciled_identical is not True:
                again |= set(lean)
    return frozenset(again)


def excused_cells(result: MatrixResult) -> frozenset[str]:
    """The cells whose failure a judged pair explains: a crash that is a known R torch bug, or a cell on the side of a
    known R torch bug that its pair's traces part at, each proven by its switch (the pair is ``known_difference``);
    every other failed cell fails the run."""
    return frozenset(result.excused())


def needs_detail(verdict: PairVerdict) -> tuple[int, str] | None:
    """The point a pair's traces first part at, where its distance is not measured yet (two tensors that neither cell
    kept): what a run's second pass keeps whole to measure it, for the explanation; ``None`` where nothing is missing."""
    trace = verdict.details.get("trace") or {}
    first = trace.get("first_difference")
    if not first or first.get("kind") != "bytes" or first.get("max_distance") is not None or trace.get("detail"):
        return None
    if str(first.get("point", "")).startswith(RECORD_PREFIX):  # the harness's record of the run: no worker records it
        return None
    return int(first["step"]), str(first["point"])


def compare_cells(
    a: CellResult, b: CellResult, tolerance: Tolerance | None = None, judging: str = DEFAULT_JUDGING,
    trace: PairTrace | None = None, known: Sequence[KnownDifference] = (), optimizer_args: Mapping[str, Any] | None = None,
) -> PairVerdict:
    """Judge frontend ``a`` against frontend ``b`` on one cell of the matrix.

    ``tolerance`` defaults to the policy for the cells' mode, device, AMP dtype and step count.
    ``judging``: ``strict`` fails a pair that is not bitwise identical where the tolerance expects
    identity; ``tolerance_only`` lets the tolerance decide (see :mod:`harness.judge.tolerances`). ``trace``: the
    pair's trace, if it was traced: it names the first point that differs, and decides ``known`` matches.
    ``optimizer_args``: the optimizer's arguments the cells ran with (an entry whose mechanism needs one that is 0 is
    inert there: neither matched nor stale).

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
        proven = _proven_crash(a, b, statuses, trace, known, {**OPTIMIZERS[a.optimizer].args, **(optimizer_args or {})})
        return proven if proven is not None else _status_verdict(a, names, statuses)
    ra, rb = a.record, b.record
    assert ra is not None and rb is not None
    expected = expectation(a, b)
    try:
        steps = max(len(ra.losses), len(rb.losses), 1)
        tol = tolerance or tolerance_for(a.cell.properties, a.device, str(ra.amp_dtype), steps, expected.identical, a.cell.optimizer)
    except SpecError as err:
        return _verdict(a, names, Verdict.ERROR, [headline(a.pair, names, Verdict.ERROR, f"no tolerance for this record: {err}")], {})
    found = find_pair(names, a.mode, a.device, ra, rb, tol, (a.reference_distance, b.reference_distance), kept_for(a, b))
    judged = judge(found, judging)
    lines, details = explain_pair(a.pair, found, judged)
    lines.insert(1, f"expected: {expected.why}")
    lines += [f"lifted: {cell.frontend} ran {cell.record.lifted_check}" for cell in (a, b) if cell.record and cell.record.lifted_check]
    details = details | {"languages": list(languages), "identity_expected": expected.identical}
    if trace is None:
        return _verdict(a, names, judged.verdict, lines, details)
    identity_required = judging == "strict" and found.tolerance.expected_identical
    # the row's arguments under those given (a caller may pass only what moved); what neither sets is at its default
    args = {**OPTIMIZERS[a.optimizer].args, **(optimizer_args or {})}
    drafted = _with_trace(PairEvidence(a, b, trace, known, identity_required, args),
                          Draft(judged.verdict, lines, details))
    return _verdict(a, names, drafted.verdict, drafted.lines, drafted.details)


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
        verdict = Verdict.DIVERGED
    elif not found.weights.readable:
        verdict = Verdict.ERROR
    else:
        verdict = Verdict.IDENTICAL if found.identical else Verdict.WITHIN_TOLERANCE
    return Judgement(verdict, judging, identity_required, identity_missed)


def judge_statuses(statuses: StatusFindings) -> Verdict:
    """The verdict of a pair a side of which gave no comparable run: the worse side's status decides."""
    failed = [s for s, f in zip(statuses.statuses, statuses.failed, strict=True) if f]
    worst = min(failed, key=lambda s: _STATUS_RANK.index(s) if s in _STATUS_RANK else 0)
    return _STATUS_VERDICT.get(worst, Verdict.ERROR)


@dataclass(frozen=True)
class PairEvidence:
    """What judges a pair beyond its two records: its cells, its trace, the known differences and what the judging asks."""

    a: CellResult
    b: CellResult
    trace: PairTrace
    known: Sequence[KnownDifference]
    #: ``strict`` judging where the tolerance expects bitwise identity: an unproven match is then ``diverged``.
    identity_required: bool
    #: The optimizer's arguments the cells ran with (an entry whose mechanism needs one that is 0 is inert).
    optimizer_args: Mapping[str, Any]

    @property
    def names(self) -> tuple[str, str]:
        return (self.a.frontend, self.b.frontend)


@dataclass(frozen=True)
class Draft:
    """A pair's judgement as it stands: the verdict, the explanation's lines (a headline first) and the details."""

    verdict: Verdict
    lines: list[str]
    details: dict[str, Any]


def _with_trace(evidence: PairEvidence, draft: Draft) -> Draft:
    """The verdict, lines and details once the pair's trace is known: where it parts, and whether known differences
    explain the whole of it.

    An entry *matches* when the first differing point has its signature; it is *proven* when the pair is bitwise
    identical for the whole run once every applicable entry's switch is on (the cells' reconciled runs). A proven
    difference is ``known_difference`` whatever its size (an R torch bug beyond the tolerance included). An unproven
    match is ``diverged`` where identity is required (the entry does not explain what comes after its first point), and
    ``known_difference`` (matched, not proven) only where identity is not expected and the tolerance accepts the pair.
    """
    a, b, trace, known, identity_required = evidence.a, evidence.b, evidence.trace, evidence.known, evidence.identity_required
    names, optimizer_args = evidence.names, evidence.optimizer_args
    verdict, lines, details = draft.verdict, draft.lines, draft.details
    applicable = [k for k in known if k.applies(a, b)]
    cause = lines[0].partition(" — ")[2]
    first = trace.first_difference
    extra = trace.lines()
    # An entry whose mechanism needs an argument these cells set to 0 cannot act: neither matched nor stale (issue 37).
    inert = {k.id: why for k in applicable if (why := k.inert(optimizer_args, a.feature)) is not None}
    extra += [f"inert: {_label(k)} {k.id} cannot act here: {inert[k.id]}" for k in applicable if k.id in inert]
    active = [k for k in applicable if k.id not in inert]
    matched: list[KnownDifference] = []
    by_proof: list[KnownDifference] = []
    stale: list[KnownDifference] = []
    proven = False
    if verdict == Verdict.IDENTICAL:
        if trace.identical:
            stale = [k for k in active if k.trigger_steps(trace)]
        elif first is not None:  # identical records, yet a traced point differs: it never reached what the runs recorded
            named = [k.id for k in active if k.signature.point_pattern.match(first.point) and not k.trigger_steps(trace)]
            extra.append("trace: the recorded results are bitwise identical: this difference never reached them"
                         + (f" (the mechanism of known difference {named[0]}, whose trigger did not occur)" if named else ""))
    elif trace.error is None:
        every = micro_batches(a.cell.feature)
        matched = [k for k in active if k.mismatch(trace, every) is None]
        by_proof = [] if matched else _matched_by_proof(trace, active, applicable, a, b)
        if by_proof:
            # The proof, not the point's name: the signature says where the mechanism usually shows first, and an argument
            # can move that (SGD's momentum at 0 has no momentum buffer for the weight-decay bug to show in first).
            extra += [f"{_label(k)} {k.id}: its signature is not met ({k.mismatch(trace, every)}), but its switches prove it: "
                      "the reconciled runs are bitwise identical" for k in by_proof]
            matched = by_proof
        else:
            extra += [f"not {_label(k)} {k.id}: {k.mismatch(trace, every)}" for k in active if k not in matched]
    if stale:
        steps = stale[0].trigger_steps(trace)
        verdict = Verdict.STALE_KNOWN_DIFFERENCE
        cause = (f"remove or update entry {stale[0].id} ({stale[0].source}): its trigger {stale[0].trigger} held at {len(steps)} "
                 f"step(s) from step {steps[0]}, and every traced point is bitwise identical")
    elif matched:
        assert first is not None
        ids = ", ".join(k.id for k in matched)
        at = f"first differs at step {first.step}, {first.point}"
        at += f" ({first.max_distance} ULP)" if first.max_distance is not None else ""
        proven, why_not = _reconciled(trace, active, a, b)  # an inert entry's switch is not run (harness/run/runner.py)
        if proven:
            verdict = Verdict.KNOWN_DIFFERENCE
            # A bug the reconciliation switched off (its trigger held) carries its side's cell from float64 too: that cell's
            # own failure is the bug's, not a new one. It need not be the entry the first difference matched (a clip pair
            # first parts at the clip coefficient, and SGD's weight-decay bug follows in the same step).
            bugs = [k for k in active if k.kind == "bug" and k.trigger_steps(trace)]
            details = details | {
                "excused": [c.id for c in (a, b) if any(k.switches_for(c.optimizer, c.language) for k in bugs)],
                "excused_by": [k.id for k in bugs],
            }
            described = "as the entry describes" if len(matched) == 1 else "as the entries describe"
            if by_proof:
                described = f"not where {'its signature says' if len(matched) == 1 else 'their signatures say'}"
            cause = (f"{_label(matched[0])} {ids}: {at}, {described}; proven: with the switches {', '.join(trace.switches)} on, "
                     "the whole run is bitwise identical")
        elif identity_required:
            verdict = Verdict.DIVERGED
            cause = (f"{at}, which {ids} describe{'s' if len(matched) == 1 else ''}, but {'it does' if len(matched) == 1 else 'they do'} "
                     f"not explain the whole difference: {why_not}")
        elif verdict == Verdict.WITHIN_TOLERANCE:
            verdict = Verdict.KNOWN_DIFFERENCE
            cause = (f"{_label(matched[0])} {ids}: {at}; matched, not proven ({why_not}); identity is not expected here and the "
                     "tolerance accepts it")
        else:
            cause += f"; {at}, matched by {ids} but not proven ({why_not})"
        extra += [line for k in matched for line in k.lines()]
    elif first is not None and verdict != Verdict.IDENTICAL:
        cause += f"; first differs at step {first.step}, {first.point}"
    elif trace.error is not None and verdict != Verdict.IDENTICAL:
        cause += f"; not traced ({trace.error})"
    details = details | {
        "trace": trace.to_json(), "known_difference": [k.id for k in matched] if verdict == Verdict.KNOWN_DIFFERENCE else None,
        "known_kinds": sorted({k.kind for k in matched}) if verdict == Verdict.KNOWN_DIFFERENCE else None,
        "proven": proven, "stale_known_difference": stale[0].id if stale else None, "inert": sorted(inert) or None,
    }
    return Draft(verdict, [headline(a.pair, names, verdict, cause), *lines[1:], *extra], details)


def _matched_by_proof(trace: PairTrace, active: Sequence[KnownDifference], applicable: Sequence[KnownDifference], a: CellResult,
                      b: CellResult) -> list[KnownDifference]:
    """The entries a pair whose first difference has no entry's signature is explained by all the same: where the reconciled
    runs, with exactly the applicable entries' switches on, are bitwise identical for the whole run, the entries whose
    switches acted on the pair and whose trigger held (their mechanisms, and nothing else, were switched off); none
    where that is not proven. A signature is where a mechanism usually shows first; the proof is what explains a pair."""
    languages = frozenset((a.language, b.language))
    acting = [k for k in active if k.expected_switches(a.optimizer, languages) and k.trigger_steps(trace)]
    if not acting or trace.first_difference is None:
        return []
    proven, _ = _reconciled(trace, active, a, b)
    return acting if proven else []


def _reconciled(trace: PairTrace, applicable: Sequence[KnownDifference], a: CellResult, b: CellResult) -> tuple[bool, str]:
    """Whether the reconciled runs prove the applicable entries (each one's switches for the cells' optimizer and
    languages were on, and the two runs are bitwise identical at every point), and if not, why not."""
    names = (a.frontend, b.frontend)
    if trace.reconciled_identical is None:
        return False, "the cells have no reconciled runs (run with the known differences' switches) to prove it"
    languages = frozenset((a.language, b.language))
    named = [s for k in applicable for s in k.expected_switches(a.optimizer, languages)]
    off = [s for s in named if s not in trace.switches]
    if off:
        return False, f"the reconciled runs did not apply the switch {off[0]}"
    # A proof holds for the entries that apply here and nothing else: a switch none of them names (a run made under
    # another list, judged again under this one) changed something no applicable entry explains.
    unnamed = [s for s in trace.switches if s not in named]
    if unnamed:
        return False, f"the reconciled runs applied the switch {unnamed[0]}, which no entry that applies here names"
    if not trace.reconciled_identical:
        where = trace.reconciled.describe(names) if trace.reconciled is not None else "some point"
        return False, f"with the switches {', '.join(trace.switches)} on, the runs still differ at {where}"
    # The reconciled runs must be compared on everything they record (losses, scales, skipped steps, dtypes, final
    # weights: their traces' record points), not only where the loop is traced: a change after the loop shows only there.
    # A lean result whose trace files are gone is judged from the pair traces its run stored (computed with them).
    for cell in (a, b) if any(t is not None for c in (a, b) for t in (c.trace, c.reconciled)) else ():
        stored = cell.reconciled or cell.trace
        if stored is None or not has_record_points(read_cell_trace(stored)):
            return False, (f"{cell.frontend}'s {'reconciled ' if cell.reconciled else ''}trace holds no record of its run (losses, "
                           "final weights: a result from before they were traced), so the runs' records were never compared; re-run")
    return True, ""


def _proven_crash(
    a: CellResult, b: CellResult, statuses: StatusFindings, trace: PairTrace | None, known: Sequence[KnownDifference],
    args: Mapping[str, Any],
) -> PairVerdict | None:
    """The verdict of a pair one side of which crashed the way a known R torch bug does, and which the bug's switch
    reconciles: ``known_difference`` (proven), with the crashed cell excused; ``None`` where that is not so. ``args``: the
    optimizer's arguments (an entry that cannot act on them is not applicable: its switch is not run)."""
    failed = [c for c, f in zip((a, b), statuses.failed, strict=True) if f]
    if len(failed) != 1 or failed[0].status is not Status.ERROR or trace is None:
        return None
    applicable = [k for k in known if k.applies(a, b) and k.inert(args, a.feature) is None]
    matched = [k for k in applicable if k.error_mismatch(failed[0].reason) is None]
    if not matched:
        return None
    names = (a.frontend, b.frontend)
    proven, why_not = _reconciled(trace, applicable, a, b)
    ids = ", ".join(k.id for k in matched)
    if not proven:
        cause = f"{failed[0].frontend} {failed[0].status}: {failed[0].reason}; it fails as {ids} describes, but {why_not}"
        return _verdict(a, names, Verdict.ERROR, [headline(a.pair, names, Verdict.ERROR, cause), *trace.lines()],
                        {"statuses": dict(zip(names, statuses.statuses, strict=True)), "known_difference": None, "proven": False})
    cause = (f"{_label(matched[0])} {ids}: {failed[0].frontend} fails as the entry describes ({failed[0].reason}); proven: with the "
             f"switches {', '.join(trace.switches)} on it runs, and the whole run is bitwise identical")
    lines = [headline(a.pair, names, Verdict.KNOWN_DIFFERENCE, cause), *trace.lines(), *[line for k in matched for line in k.lines()]]
    return _verdict(a, names, Verdict.KNOWN_DIFFERENCE, lines, {
        "statuses": dict(zip(names, statuses.statuses, strict=True)), "known_difference": [k.id for k in matched], "proven": True,
        "known_kinds": sorted({k.kind for k in matched}), "excused": [failed[0].id], "excused_by": [k.id for k in matched],
        "trace": trace.to_json(),
    })


def _label(entry: KnownDifference) -> str:
    return "R torch bug" if entry.kind == "bug" else "known difference"


def _status_verdict(a: CellResult, names: tuple[str, str], statuses: StatusFindings) -> PairVerdict:
    verdict = judge_statuses(statuses)
    sides = [i for i in (0, 1) if statuses.failed[i]]
    lines = [f"{names[i]} {statuses.statuses[i]}: {statuses.reasons[i] or 'no run record'}" for i in sides]
    details = {
        "statuses": dict(zip(names, statuses.statuses, strict=True)),
        "reasons": {names[i]: statuses.reasons[i] for i in sides},
    }
    return _verdict(a, names, verdict, [headline(a.pair, names, verdict, lines[0]), *lines[1:]], details)


def _verdict(a: CellResult, names: tuple[str, str], verdict: Verdict, explanation: list[str], details: dict[str, Any]) -> PairVerdict:
    return PairVerdict(a.pair, a.script, a.mode, a.device, names, verdict, explanation, details, optimizer=a.optimizer,
                       feature=a.cell.feature, model=a.cell.model)
