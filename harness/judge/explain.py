"""How a pair's verdict reads: the explanation lines and the stored details, from the findings and the verdict.

Nothing here decides anything (that is :func:`harness.judge.pairs.judge`); it says what each check found,
in the order the checks ran, so every test a verdict applies appears in its message: an ``identical``
pair names what was compared bitwise, a ``within_tolerance`` pair the tolerance and how much of it was
used, a ``diverged`` pair the first failing check, the first step and the worst tensor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.judge.findings import DTYPE_FIELDS, HistoryFindings, LossFindings, PairFindings
from harness.judge.tolerances import Tolerance
from harness.judge.weight_findings import TensorFindings, WeightFindings
from harness.model.verdicts import Verdict, finite_or_none

__all__ = ["Judgement", "Mismatch", "explain_pair", "headline", "mismatches"]

#: How the histories read in a mismatch line.
_HISTORY_LABEL = {"loss_scale": "loss scale differs", "skipped": "skipped steps differ"}


@dataclass(frozen=True)
class Judgement:
    """A verdict on findings, and which judging rule decided it."""

    verdict: Verdict
    judging: str
    #: The policy asked for bitwise identity here (``strict`` where the tolerance expects it).
    identity_required: bool
    #: Diverged because identity was required and missed (nothing beyond the tolerance needs to be).
    identity_missed: bool


@dataclass(frozen=True)
class Mismatch:
    """A failed check: its one-line cause (what a headline shows) and the rest of what it found."""

    cause: str
    more: str = ""

    def __str__(self) -> str:
        return f"{self.cause}; {self.more}" if self.more else self.cause


def headline(pair: str, names: tuple[str, str], verdict: Verdict, cause: str) -> str:
    """The first explanation line: the pair, the frontends, the verdict and its main cause."""
    return f"{pair} ({names[0]} vs {names[1]}): {verdict} — {cause}"


def explain_pair(pair: str, found: PairFindings, judged: Judgement) -> tuple[list[str], dict[str, Any]]:
    """The explanation lines and the details (plain data) of a pair judged ``judged`` on ``found``."""
    names, tol = found.names, found.tolerance
    failed = [str(m) for m in mismatches(found)]
    problems = [f"cannot read {names[u.side]}'s final weights" + (f" {u.path}" if u.path not in (None, "None") else "") + f": {u.error}"
                for u in found.weights.unreadable]
    lines = [headline(pair, names, judged.verdict, _cause(found, judged, failed, problems))]
    lines += [f"MISMATCH {m}" for m in failed] + [f"PROBLEM {p}" for p in problems] + _notes(found)
    versions = found.libtorch
    if judged.identity_missed:
        lines.append(
            f"strict: {found.mode} on {found.device} with libtorch {versions[0]} on both sides runs the same kernels in the same "
            "order, so any difference is a difference in the scripts or the bindings"
            + ("" if failed else ", even though every difference is inside the tolerance")
            + "; --tolerance-only judges by the tolerance instead"
        )
    elif tol.expected_identical and not found.identical:
        lines.append(
            f"note: expected bitwise identical ({found.mode} on {found.device}, both frontends on libtorch {versions[0]}) but it is "
            "not; judged by the tolerance instead (--tolerance-only)"
        )
    elif versions[0] != versions[1]:
        lines.append(f"note: libtorch differs ({names[0]} {versions[0]}, {names[1]} {versions[1]}): bitwise identity is not expected")
    lines.append(f"tolerance: {tol.describe()} — {tol.reason}")
    return lines, _details(found, judged, failed, problems)


def mismatches(found: PairFindings) -> list[Mismatch]:
    """Every failed check, in the order the checks ran: losses, weights, scaler histories, dtypes."""
    names, losses = found.names, found.losses
    out = []
    if losses.count_differs:
        out.append(Mismatch(
            f"step count differs: {names[0]} recorded {losses.counts[0]} losses, {names[1]} {losses.counts[1]}",
            f"compared the first {losses.steps}",
        ))
    if losses.first_beyond is not None:
        va, vb, gap, allowed = losses.first_beyond
        out.append(Mismatch(
            f"losses diverge from step {losses.first_beyond_tolerance_step}: {names[0]} {va:.7g} vs {names[1]} {vb:.7g} "
            f"(|Δ| {gap:.2e} > {allowed:.2e} allowed)",
            f"{losses.steps_beyond_tolerance} of {losses.steps} steps beyond tolerance; {_loss_summary(losses)}",
        ))
    for side, missing in ((0, found.weights.missing[0]), (1, found.weights.missing[1])):
        if missing:
            out.append(Mismatch(f"final weights: {names[side]} has no tensor {', '.join(missing)}"))
    for t in found.weights.tensors:
        out += _tensor_mismatches(t, names, found.tolerance)
    out += [m for m in (_history_mismatch(h, names) for h in (found.loss_scale, found.skipped)) if m]
    for name in found.dtypes.differing():
        a, b = getattr(found.dtypes, name)
        where = " inside autocast" if name in DTYPE_FIELDS else ""
        out.append(Mismatch(f"{name}{where} differs: {names[0]} {a}, {names[1]} {b}"))
    return out


def _cause(found: PairFindings, judged: Judgement, failed: list[str], problems: list[str]) -> str:
    losses, worst = found.losses, found.weights.worst
    if judged.verdict == Verdict.DIVERGED:
        step = losses.first_beyond_tolerance_step
        if failed:
            cause = f"losses split at step {step}" if step is not None else mismatches(found)[0].cause
        else:
            cause = (f"not bitwise identical where identity is expected ({found.mode} on {found.device}, both on libtorch "
                     f"{found.libtorch[0]})")
        if step is None and losses.first_difference_step is not None:
            cause += f"; losses first differ at step {losses.first_difference_step}"
        if worst:
            cause += f"; worst tensor {worst.name} ({_distance(worst)})"
        elif found.weights.tensors:
            cause += "; final weights bitwise equal"
        return cause
    if judged.verdict == Verdict.ERROR:
        return problems[0]
    if judged.verdict == Verdict.IDENTICAL:
        return _identical_cause(found)
    return _within_cause(found)


def _identical_cause(found: PairFindings) -> str:
    """What was compared bitwise (a history neither side recorded is not claimed)."""
    parts = [f"losses at all {found.losses.steps} steps", f"all {len(found.weights.tensors)} final-weights tensors"]
    parts += ["the loss scale and skipped steps at every step"] if found.loss_scale.recorded or found.skipped.recorded else []
    return "bitwise equal: " + ", ".join(parts) + " and the dtypes inside autocast"


def _within_cause(found: PairFindings) -> str:
    """How far apart the sides are, against the tolerance each check held them to, and how much of it they used."""
    losses, worst, tol = found.losses, found.weights.worst, found.tolerance
    if losses.identical:
        parts = ["losses bitwise equal"]
    else:
        parts = [f"max loss |Δ| {losses.max_abs:.2e}, {_percent(losses.tolerance_used)} of the loss tolerance "
                 f"(rtol {tol.loss_rtol:.2e}) at step {losses.tolerance_used_step}"]
    if worst:
        parts.append(f"worst tensor {worst.name} ({_distance(worst)}), "
                     f"{_percent(worst.tolerance_used)} of its tolerance ({_weight_criterion(worst, tol)})")
    else:
        parts.append("final weights bitwise equal")
    return "; ".join(parts)


def _weight_criterion(t: TensorFindings, tol: Tolerance) -> str:
    """The weight criterion that admits ``t`` most easily (the one whose share is ``t.tolerance_used``)."""
    return {
        "rel_l2": f"rel L2 <= {tol.weight_rtol:.2e}", "max_abs": f"max |Δ| <= {tol.weight_atol:.1e}", "ulps": f"<= {tol.max_ulps} ULPs",
    }[t.admitted_by]


def _notes(found: PairFindings) -> list[str]:
    """What each check found when it passed (or only informs): one line per check."""
    names, losses = found.names, found.losses
    lines = []
    if losses.first_difference_step is None:
        final = losses.final[0]
        lines.append(f"losses: bitwise equal at all {losses.steps} steps (final {final:.7g})" if losses.steps and final is not None
                     else f"losses: bitwise equal at all {losses.steps} steps" if losses.steps else "losses: none recorded")
    elif losses.first_beyond_tolerance_step is None:
        lines.append(f"losses: {_loss_summary(losses)}; within tolerance at every step")
    lines += _weight_notes(found.weights, names)
    recorded = [h for h in (found.loss_scale, found.skipped) if h.recorded]
    if recorded and all(h.identical for h in recorded):
        span = found.loss_scale.span
        shown = f" ({_fmt_scale(span[0], 'loss_scale')} → {_fmt_scale(span[1], 'loss_scale')})" if span else ""
        skipped = len(found.skipped.skipped_at[0]) if found.skipped.recorded else None
        lines.append(f"loss scale equal at every step{shown}; skipped steps equal ({skipped})")
    if found.dtypes.autocast_equal:
        lines.append(f"dtypes inside autocast equal: output {found.dtypes.output_dtype[0]}, loss {found.dtypes.loss_dtype[0]}")
    lines.append(_float64_note(found))
    return lines


def _weight_notes(weights: WeightFindings, names: tuple[str, str]) -> list[str]:
    if not weights.readable:
        return []
    lines = [f"{_tensor_line(t, names)} — within tolerance" for t in weights.tensors if not t.identical and t.within]
    differing = len(weights.differing)
    if not differing and weights.tensors:
        lines.append(f"final weights: all {len(weights.tensors)} tensors bitwise equal")
    elif differing and differing < len(weights.tensors):
        lines.append(f"final weights: {len(weights.tensors) - differing} other tensors bitwise equal")
    if weights.kept:
        lines.append(f"final weights: {weights.kept}")
    return lines


def _float64_note(found: PairFindings) -> str:
    names, f64 = found.names, found.float64
    if not f64.recorded:
        missing = [n for n, d in zip(names, f64.distances, strict=True) if not d]
        return f"float64 distance not recorded for {' and '.join(missing)}: the difference cannot be blamed on one side"
    da, db = f64.distances
    assert da and db
    wa, wb = f64.weight_errors
    line = (
        f"distance from float64: {names[0]} loss {_e(da.max_rel_loss_error)} / weights {wa:.2e}; "
        f"{names[1]} loss {_e(db.max_rel_loss_error)} / weights {wb:.2e}"
    )
    if f64.further is not None:
        line += f"; {names[f64.further]} is further from float64 ({f64.further_ratio:.3g}x {names[1 - f64.further]}'s weight error)"
    else:
        line += "; equally far"
    if f64.weight_gap:
        side = "within" if f64.weight_gap <= wa + wb else "beyond"
        line += f"; the weight gap between them ({f64.weight_gap:.2e}) is {side} the sum of those distances ({wa + wb:.2e})"
    return line


def _tensor_mismatches(t: TensorFindings, names: tuple[str, str], tol: Tolerance) -> list[Mismatch]:
    if t.shape_differs:
        return [Mismatch(f"{t.name}: shape {names[0]} {list(t.shapes[0])} vs {names[1]} {list(t.shapes[1])}")]
    out = []
    if t.dtype_differs:
        out.append(Mismatch(f"{t.name}: dtype {names[0]} {t.dtypes[0]} vs {names[1]} {t.dtypes[1]} (the contract says float32)"))
    if not t.identical and not t.within:
        out.append(Mismatch(f"{_tensor_line(t, names)} — beyond tolerance (rel L2 > {tol.weight_rtol:.2e} and > {tol.max_ulps} ULPs)"))
    return out


def _tensor_line(t: TensorFindings, names: tuple[str, str]) -> str:
    va, vb = t.worst_values or (float("nan"), float("nan"))
    return (
        f"{t.name}: max |Δ| {t.max_abs:.2e} at {t.worst_index} ({names[0]} {va:.9g}, {names[1]} {vb:.9g}), "
        f"rel L2 {t.rel_l2:.2e}, max {_ulps(t.max_ulps)}"
    )


def _history_mismatch(h: HistoryFindings, names: tuple[str, str]) -> Mismatch | None:
    label = _HISTORY_LABEL[h.field]
    if h.present[0] != h.present[1]:
        has, lacks = (names[0], names[1]) if h.present[0] else (names[1], names[0])
        return Mismatch(f"{label.rsplit(' ', 1)[0]}: {has} recorded a history, {lacks} none")
    if not h.differing_steps or h.first_values is None:
        return None
    va, vb = ("missing" if v is None else _fmt_scale(v, h.field) for v in h.first_values)
    cause = (f"{label} first at step {h.first_difference_step}: {names[0]} {va} vs {names[1]} {vb} "
             f"({len(h.differing_steps)} of {h.length} steps differ)")
    if h.field == "skipped":
        return Mismatch(cause, f"{names[0]} skipped {list(h.skipped_at[0])}, {names[1]} skipped {list(h.skipped_at[1])}")
    return Mismatch(cause)


def _loss_summary(losses: LossFindings) -> str:
    return (f"max |Δ| {losses.max_abs:.2e} (rel {losses.max_rel:.2e}) at step {losses.worst_step}; "
            f"first differ at step {losses.first_difference_step}")


def _details(found: PairFindings, judged: Judgement, failed: list[str], problems: list[str]) -> dict[str, Any]:
    """The verdict's plain-data details (stored in the result's ``pairs``), keys in the order they were always written."""
    names, losses = found.names, found.losses
    details: dict[str, Any] = {"tolerance": found.tolerance.to_json(), "judging": judged.judging, "losses": {
        "steps": losses.steps, "max_abs": losses.max_abs, "max_rel": losses.max_rel, "worst_step": losses.worst_step,
        "first_difference_step": losses.first_difference_step, "first_beyond_tolerance_step": losses.first_beyond_tolerance_step,
        "steps_beyond_tolerance": losses.steps_beyond_tolerance, "final": list(losses.final),
    }}
    if found.weights.readable:
        worst = found.weights.worst
        details["weights"] = {
            "tensors": {t.name: _tensor_details(t) for t in found.weights.tensors},
            "worst_tensor": worst.name if worst else None, "rel_l2_all": found.weights.rel_l2_all,
        }
    scaler = {
        h.field: {
            "equal": not h.differing_steps, "first_difference_step": h.first_difference_step,
            "steps_differing": len(h.differing_steps),
        }
        for h in (found.loss_scale, found.skipped) if h.recorded
    }
    if scaler:
        details["scaler"] = scaler
    details["dtypes"] = {name: list(getattr(found.dtypes, name)) for name in (*DTYPE_FIELDS, "amp_dtype")}
    details["reference_distance"] = {name: d.to_json() if d else None for name, d in zip(names, found.float64.distances, strict=True)}
    if found.float64.further is not None:
        details["further_from_float64"] = names[found.float64.further]
    details.update(
        identical=found.identical, expected_identical=found.tolerance.expected_identical, identity_required=judged.identity_required,
        mismatches=failed, problems=problems,
    )
    return details


def _tensor_details(t: TensorFindings) -> dict[str, Any]:
    info: dict[str, Any] = {"shape": list(t.shapes[1]), "dtypes": list(t.dtypes), "identical": t.identical, "within": t.within,
                            "max_abs": t.max_abs, "rel_l2": t.rel_l2, "max_ulps": t.max_ulps,
                            "worst_index": list(t.worst_index) if t.worst_index is not None else None}
    if not t.shape_differs:
        info["values"] = [finite_or_none(v) for v in t.worst_values] if t.worst_values else None
    return info


def _e(value: float | None) -> str:
    """A distance in the explanation's format; a non-finite one (stored as None) as inf."""
    return f"{math.inf if value is None else value:.2e}"


def _percent(share: float) -> str:
    return f"{share * 100:.3g}%"


def _fmt_scale(value: Any, name: str) -> str:
    if name == "skipped":
        return "skipped" if value else "not skipped"
    return f"{value:.9g}" if isinstance(value, (int, float)) else repr(value)


def _distance(tensor: TensorFindings) -> str:
    """How far apart one tensor's sides are: rel L2 and ULPs, or its two shapes (no distance exists then: not "-1 ULPs")."""
    if tensor.shape_differs:
        return f"shapes {list(tensor.shapes[0])} vs {list(tensor.shapes[1])}, no distance"
    return f"rel L2 {tensor.rel_l2:.2e}, {_ulps(tensor.max_ulps)}"


def _ulps(count: int) -> str:
    return "1 ULP" if count == 1 else f"{count} ULPs"
