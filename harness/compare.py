"""Parity of a pair of cells (same script, mode and device; two frontends), from what they recorded.

A final loss alone is a weak signal, so everything a run records is compared: the loss at every step,
every final-weights tensor (largest difference, relative L2 error, the worst element, float32 ULPs),
the loss-scale history and skipped steps, the dtypes inside the autocast region, and each side's
distance from the float64 reference (so a difference can be blamed on the side that moved).

Compare first, then judge once: every mismatch goes into the explanation; nothing stops at the first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from harness.errors import SpecError
from harness.frontends.registry import FRONTENDS
from harness.tolerances import DEFAULT_JUDGING, Tolerance, check_judging, tolerance_for
from harness.verdicts import PairVerdict

__all__ = ["VERDICTS", "compare_cells", "compare_result", "ulp_distance"]

#: ``identical``: losses, weights and scales bitwise equal. ``within_tolerance``: not identical, every
#: difference inside the :mod:`harness.tolerances` policy, and identity not required. ``diverged``: a
#: real difference (the first step and the worst tensor are named): beyond tolerance, or, under the
#: ``strict`` policy, not bitwise identical where identity is expected (one libtorch, CPU).
#: ``unsupported`` / ``error`` / ``skipped``: a side did not give
#: a comparable run (its reason is carried); ``error`` also covers a numerical failure and unreadable weights.
VERDICTS = ("identical", "within_tolerance", "diverged", "unsupported", "error", "skipped")
#: Which non-ok status decides the verdict when both sides failed differently: the worst first.
_STATUS_VERDICT = {"error": "error", "numerical_failure": "error", "unsupported": "unsupported", "skipped": "skipped"}
_STATUS_RANK = ("error", "numerical_failure", "unsupported", "skipped")
_DTYPE_FIELDS = ("output_dtype", "loss_dtype")


class _Findings:
    """What a comparison found: mismatches decide ``diverged``, problems ``error``; notes only inform."""

    def __init__(self) -> None:
        self.mismatches: list[str] = []
        self.problems: list[str] = []
        self.lines: list[str] = []
        self.identical = True
        self.details: dict[str, Any] = {}


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise distance in float32 ULPs (units in the last place): 0 for equal, 1 for neighbours.

    The float32 bit patterns are mapped to integers in the order of the values they encode (negative
    numbers reflected below zero, so -0.0 and +0.0 both map to 0), and the distance is the difference
    of those integers. NaN on one side only counts as the largest distance; NaN on both as 0.
    """
    ia, ib = _ordered_bits(a), _ordered_bits(b)
    dist = np.abs(ia - ib)
    nan_a, nan_b = np.isnan(np.asarray(a, np.float32)), np.isnan(np.asarray(b, np.float32))
    dist = np.where(nan_a & nan_b, 0, dist)
    return np.where(nan_a ^ nan_b, np.iinfo(np.int64).max, dist)


def _ordered_bits(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def compare_result(result: Mapping[str, Any], judging: str | None = None) -> list[PairVerdict]:
    """A verdict for every pair of ``result`` (frontends in registry order: python, then r).

    ``judging`` (``strict`` or ``tolerance_only``) defaults to the policy the result was run under
    (its ``judging`` field), so a report judges a result as its run did; ``strict`` if it has none.
    A pair with one cell (one frontend was not asked for) is left out: there is nothing to compare.

    Raises:
        SpecError: an unknown judging policy.
    """
    judging = check_judging(judging or str(result.get("judging") or DEFAULT_JUDGING))
    pairs: dict[str, list[dict[str, Any]]] = {}
    for cell in result["cells"]:
        pairs.setdefault(cell["pair"], []).append(cell)
    spec = result.get("spec") or {}
    verdicts = []
    for cells in pairs.values():
        cells = sorted(cells, key=_frontend_rank)
        for other in cells[1:]:
            tolerance = None
            if cells[0]["status"] == other["status"] == "ok" and spec.get("amp_dtype"):
                steps = int(spec["epochs"]) * int(spec["num_batches"])
                tolerance = tolerance_for(cells[0]["mode"], cells[0]["device"], spec["amp_dtype"], steps, _same_libtorch(cells[0], other))
            verdicts.append(compare_cells(cells[0], other, tolerance, judging))
    return verdicts


def compare_cells(
    a: Mapping[str, Any], b: Mapping[str, Any], tolerance: Tolerance | None = None, judging: str = DEFAULT_JUDGING
) -> PairVerdict:
    """Judge frontend ``a`` against frontend ``b`` on one cell of the matrix.

    ``tolerance`` defaults to the policy for the cells' mode, device, AMP dtype and step count.
    ``judging``: ``strict`` fails a pair that is not bitwise identical where the tolerance expects
    identity; ``tolerance_only`` lets the tolerance decide (see :mod:`harness.tolerances`).

    Raises:
        ValueError: ``a`` and ``b`` are not two frontends of one pair.
        SpecError: an unknown judging policy.
    """
    check_judging(judging)
    if a["pair"] != b["pair"] or a["frontend"] == b["frontend"]:
        raise ValueError(f"cells {a['id']!r} and {b['id']!r} are not two frontends of one pair")
    names = (str(a["frontend"]), str(b["frontend"]))
    failed = [c for c in (a, b) if c["status"] != "ok" or not c.get("record")]
    if failed:
        worst = min(failed, key=lambda c: _STATUS_RANK.index(c["status"]) if c["status"] in _STATUS_RANK else 0)
        verdict = _STATUS_VERDICT.get(worst["status"], "error")
        lines = [f"{c['frontend']} {c['status']}: {c.get('reason') or 'no run record'}" for c in failed]
        details = {
            "statuses": {str(c["frontend"]): c["status"] for c in (a, b)},
            "reasons": {str(c["frontend"]): c.get("reason") for c in failed},
        }
        return _verdict(a, names, verdict, [_headline(a, names, verdict, lines[0]), *lines[1:]], details)
    ra, rb = a["record"], b["record"]
    try:
        steps = max(len(ra["losses"]), len(rb["losses"]), 1)
        tol = tolerance or tolerance_for(str(a["mode"]), str(a["device"]), str(ra.get("amp_dtype")), steps, _same_libtorch(a, b))
    except SpecError as err:
        return _verdict(a, names, "error", [_headline(a, names, "error", f"no tolerance for this record: {err}")], {})
    found = _Findings()
    found.details["tolerance"] = tol.to_dict()
    found.details["judging"] = judging
    _compare_losses(ra, rb, names, tol, found)
    _compare_weights(ra, rb, names, tol, found)
    _compare_scaler(ra, rb, names, found)
    _compare_dtypes(ra, rb, names, found)
    _compare_reference(a, b, names, found)
    return _verdict(a, names, *_judge(a, b, names, tol, found, identity_required=judging == "strict" and tol.expected_identical))


def _verdict(a: Mapping[str, Any], names: tuple[str, str], verdict: str, explanation: list[str], details: dict[str, Any]) -> PairVerdict:
    return PairVerdict(str(a["pair"]), str(a["script"]), str(a["mode"]), str(a["device"]), names, verdict, explanation, details)


def _headline(a: Mapping[str, Any], names: tuple[str, str], verdict: str, cause: str) -> str:
    return f"{a['pair']} ({names[0]} vs {names[1]}): {verdict} — {cause}"


def _judge(
    a: Mapping[str, Any], b: Mapping[str, Any], names: tuple[str, str], tol: Tolerance, found: _Findings, identity_required: bool
) -> tuple[str, list[str], dict[str, Any]]:
    losses, weights = found.details.get("losses", {}), found.details.get("weights", {})
    worst = weights.get("worst_tensor")
    versions = (a["record"].get("libtorch_version"), b["record"].get("libtorch_version"))
    not_identical = identity_required and not found.identical and not found.problems
    if found.mismatches or not_identical:
        verdict = "diverged"
        step = losses.get("first_beyond_tolerance_step")
        if found.mismatches:
            head = f"losses split at step {step}" if step is not None else found.mismatches[0].split(";")[0]
        else:
            head = f"not bitwise identical where identity is expected ({a['mode']} on {a['device']}, both on libtorch {versions[0]})"
        if step is None and losses.get("first_difference_step") is not None:
            head += f"; losses first differ at step {losses['first_difference_step']}"
        if worst:
            t = weights["tensors"][worst]
            head += f"; worst tensor {worst} (rel L2 {t['rel_l2']:.2e}, {_ulps(t['max_ulps'])})"
        elif weights.get("tensors"):
            head += "; final weights bitwise equal"
    elif found.problems:
        verdict, head = "error", found.problems[0]
    elif found.identical:
        verdict, head = "identical", "losses, weights, loss scales and dtypes bitwise equal"
    else:
        verdict = "within_tolerance"
        head = f"max loss |Δ| {losses.get('max_abs', 0.0):.2e}"
        if worst:
            t = weights["tensors"][worst]
            head += f"; worst tensor {worst} (rel L2 {t['rel_l2']:.2e}, {_ulps(t['max_ulps'])})"
    lines = [_headline(a, names, verdict, head)]
    lines += [f"MISMATCH {m}" for m in found.mismatches] + [f"PROBLEM {p}" for p in found.problems] + found.lines
    if not_identical:
        lines.append(
            f"strict: {a['mode']} on {a['device']} with libtorch {versions[0]} on both sides runs the same kernels in the same "
            "order, so any difference is a difference in the scripts or the bindings"
            + ("" if found.mismatches else ", even though every difference is inside the tolerance")
            + "; --tolerance-only judges by the tolerance instead"
        )
    elif tol.expected_identical and not found.identical:
        lines.append(
            f"note: expected bitwise identical ({a['mode']} on {a['device']}, both frontends on libtorch {versions[0]}) but it is not; "
            "judged by the tolerance instead (--tolerance-only)"
        )
    elif versions[0] != versions[1]:
        lines.append(f"note: libtorch differs ({names[0]} {versions[0]}, {names[1]} {versions[1]}): bitwise identity is not expected")
    lines.append(f"tolerance: {tol.describe()} — {tol.reason}")
    found.details.update(
        identical=found.identical, expected_identical=tol.expected_identical, identity_required=identity_required,
        mismatches=found.mismatches, problems=found.problems,
    )
    return verdict, lines, found.details


def _losses(record: Mapping[str, Any]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in record.get("losses") or []], dtype=np.float64)


def _compare_losses(ra: Mapping[str, Any], rb: Mapping[str, Any], names: tuple[str, str], tol: Tolerance, found: _Findings) -> None:
    la, lb = _losses(ra), _losses(rb)
    if la.size != lb.size:
        found.mismatches.append(
            f"step count differs: {names[0]} recorded {la.size} losses, {names[1]} {lb.size}; compared the first {min(la.size, lb.size)}"
        )
    n = min(la.size, lb.size)
    la, lb = la[:n], lb[:n]
    both_nan, one_nan = np.isnan(la) & np.isnan(lb), np.isnan(la) ^ np.isnan(lb)
    diff = np.where(both_nan, 0.0, np.where(one_nan, np.inf, np.abs(la - lb)))
    scale = np.fmax(np.abs(la), np.abs(lb))
    rel = np.where(diff == 0, 0.0, diff / np.where(scale > 0, scale, np.inf))
    beyond = diff > tol.loss_atol + tol.loss_rtol * np.nan_to_num(scale)
    differ = diff > 0
    worst = int(np.argmax(diff)) if n else 0
    info: dict[str, Any] = {
        "steps": n, "max_abs": float(diff.max()) if n else 0.0, "max_rel": float(rel.max()) if n else 0.0, "worst_step": worst,
        "first_difference_step": int(np.argmax(differ)) if differ.any() else None,
        "first_beyond_tolerance_step": int(np.argmax(beyond)) if beyond.any() else None,
        "steps_beyond_tolerance": int(beyond.sum()), "final": [_num(la[-1]) if n else None, _num(lb[-1]) if n else None],
    }
    found.details["losses"] = info
    if not differ.any():
        found.lines.append(f"losses: bitwise equal at all {n} steps (final {info['final'][0]:.7g})" if n else "losses: none recorded")
        return
    found.identical = False
    k = info["first_beyond_tolerance_step"]
    summary = f"max |Δ| {info['max_abs']:.2e} (rel {info['max_rel']:.2e}) at step {worst}"
    summary += f"; first differ at step {info['first_difference_step']}"
    if k is None:
        found.lines.append(f"losses: {summary}; within tolerance at every step")
        return
    allowed = tol.loss_atol + tol.loss_rtol * scale[k]
    found.mismatches.append(
        f"losses diverge from step {k}: {names[0]} {la[k]:.7g} vs {names[1]} {lb[k]:.7g} (|Δ| {diff[k]:.2e} > {allowed:.2e} allowed); "
        f"{info['steps_beyond_tolerance']} of {n} steps beyond tolerance; {summary}"
    )


def _compare_weights(ra: Mapping[str, Any], rb: Mapping[str, Any], names: tuple[str, str], tol: Tolerance, found: _Findings) -> None:
    loaded = []
    for name, record in zip(names, (ra, rb), strict=True):
        path = record.get("weights_path")
        try:
            loaded.append(load_file(str(path)))
        except Exception as err:
            found.problems.append(f"cannot read {name}'s final weights {path}: {type(err).__name__}: {err}")
    if len(loaded) < 2:
        found.identical = False
        return
    wa, wb = loaded
    for missing, side in ((sorted(set(wb) - set(wa)), names[0]), (sorted(set(wa) - set(wb)), names[1])):
        if missing:
            found.mismatches.append(f"final weights: {side} has no tensor {', '.join(missing)}")
    tensors: dict[str, dict[str, Any]] = {}
    for key in sorted(set(wa) & set(wb), key=_tensor_order):
        tensors[key] = _compare_tensor(key, wa[key], wb[key], names, tol, found)
    num = sum(t["diff_sq"] for t in tensors.values())
    den = sum(t["norm_sq"] for t in tensors.values())
    for t in tensors.values():
        del t["diff_sq"], t["norm_sq"]
    worst = max(tensors, key=lambda k: (not tensors[k]["within"], tensors[k]["rel_l2"], tensors[k]["max_ulps"]), default=None)
    differing = [k for k, t in tensors.items() if not t["identical"]]
    found.details["weights"] = {
        "tensors": tensors, "worst_tensor": worst if differing else None,
        "rel_l2_all": math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf),
    }
    if not differing and tensors:
        found.lines.append(f"final weights: all {len(tensors)} tensors bitwise equal")
    elif differing and len(differing) < len(tensors):
        found.lines.append(f"final weights: {len(tensors) - len(differing)} other tensors bitwise equal")


def _compare_tensor(key: str, a: np.ndarray, b: np.ndarray, names: tuple[str, str], tol: Tolerance, found: _Findings) -> dict[str, Any]:
    info: dict[str, Any] = {"shape": list(b.shape), "dtypes": [str(a.dtype), str(b.dtype)], "identical": False, "within": False}
    if a.shape != b.shape:
        found.identical = False
        found.mismatches.append(f"{key}: shape {names[0]} {list(a.shape)} vs {names[1]} {list(b.shape)}")
        return info | {"max_abs": math.inf, "rel_l2": math.inf, "max_ulps": -1, "worst_index": None, "diff_sq": 0.0, "norm_sq": 0.0}
    if a.dtype != b.dtype:
        found.mismatches.append(f"{key}: dtype {names[0]} {a.dtype} vs {names[1]} {b.dtype} (the contract says float32)")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    diff = np.where(nan_a & nan_b, 0.0, np.where(nan_a ^ nan_b, np.inf, np.abs(a64 - b64)))
    ulps = ulp_distance(a, b)
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
    # relative to the larger norm: symmetric, so swapping the frontends never changes a verdict
    diff_sq = float(np.sum(np.square(diff)))
    norm_sq = max(float(np.sum(np.square(np.nan_to_num(a64)))), float(np.sum(np.square(np.nan_to_num(b64)))))
    rel = math.sqrt(diff_sq / norm_sq) if norm_sq > 0 else (0.0 if diff_sq == 0 else math.inf)
    max_abs, max_ulps = (float(diff.max()), int(ulps.max())) if diff.size else (0.0, 0)
    identical = a.dtype == b.dtype and bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))
    within = rel <= tol.weight_rtol or max_abs <= tol.weight_atol or max_ulps <= tol.max_ulps
    index = tuple(int(i) for i in worst)
    info |= {
        "max_abs": max_abs, "rel_l2": rel, "max_ulps": max_ulps, "worst_index": list(index), "identical": identical, "within": within,
        "values": [_num(a64[index]), _num(b64[index])] if diff.size else None, "diff_sq": diff_sq, "norm_sq": norm_sq,
    }
    if identical:
        return info
    found.identical = False
    line = (
        f"{key}: max |Δ| {max_abs:.2e} at {index} ({names[0]} {a64[index]:.9g}, {names[1]} {b64[index]:.9g}), "
        f"rel L2 {rel:.2e}, max {_ulps(max_ulps)}"
    )
    if within:
        found.lines.append(f"{line} — within tolerance")
    else:
        found.mismatches.append(f"{line} — beyond tolerance (rel L2 > {tol.weight_rtol:.2e} and > {tol.max_ulps} ULPs)")
    return info


def _compare_scaler(ra: Mapping[str, Any], rb: Mapping[str, Any], names: tuple[str, str], found: _Findings) -> None:
    info: dict[str, Any] = {}
    for name, label in (("loss_scale", "loss scale differs"), ("skipped", "skipped steps differ")):
        sa, sb = ra.get(name), rb.get(name)
        if sa is None and sb is None:
            continue
        if sa is None or sb is None:
            found.identical = False
            has, lacks = (names[0], names[1]) if sb is None else (names[1], names[0])
            found.mismatches.append(f"{label.rsplit(' ', 1)[0]}: {has} recorded a history, {lacks} none")
            continue
        steps = [i for i in range(max(len(sa), len(sb))) if i >= len(sa) or i >= len(sb) or sa[i] != sb[i]]
        info[name] = {"equal": not steps, "first_difference_step": steps[0] if steps else None, "steps_differing": len(steps)}
        if not steps:
            continue
        found.identical = False
        k = steps[0]
        va, vb = (_fmt_scale(s[k], name) if k < len(s) else "missing" for s in (sa, sb))
        line = f"{label} first at step {k}: {names[0]} {va} vs {names[1]} {vb} ({len(steps)} of {max(len(sa), len(sb))} steps differ)"
        if name == "skipped":
            where = [[i for i, v in enumerate(s) if v] for s in (sa, sb)]
            line += f"; {names[0]} skipped {where[0]}, {names[1]} skipped {where[1]}"
        found.mismatches.append(line)
    if info:
        found.details["scaler"] = info
        if all(v["equal"] for v in info.values()):
            scales = ra.get("loss_scale") or []
            span = f" ({_fmt_scale(scales[0], 'loss_scale')} → {_fmt_scale(scales[-1], 'loss_scale')})" if scales else ""
            found.lines.append(f"loss scale equal at every step{span}; skipped steps equal ({ra.get('skipped_steps')})")


def _compare_dtypes(ra: Mapping[str, Any], rb: Mapping[str, Any], names: tuple[str, str], found: _Findings) -> None:
    found.details["dtypes"] = {f: [ra.get(f), rb.get(f)] for f in (*_DTYPE_FIELDS, "amp_dtype")}
    for name in _DTYPE_FIELDS:
        if ra.get(name) != rb.get(name):
            found.identical = False
            found.mismatches.append(f"{name} inside autocast differs: {names[0]} {ra.get(name)}, {names[1]} {rb.get(name)}")
    if ra.get("amp_dtype") != rb.get("amp_dtype"):
        found.identical = False
        found.mismatches.append(f"amp_dtype differs: {names[0]} {ra.get('amp_dtype')}, {names[1]} {rb.get('amp_dtype')}")
    if all(ra.get(f) == rb.get(f) for f in _DTYPE_FIELDS):
        found.lines.append(f"dtypes inside autocast equal: output {ra.get('output_dtype')}, loss {ra.get('loss_dtype')}")


def _compare_reference(a: Mapping[str, Any], b: Mapping[str, Any], names: tuple[str, str], found: _Findings) -> None:
    da, db = a.get("reference_distance"), b.get("reference_distance")
    found.details["reference_distance"] = {names[0]: da, names[1]: db}
    if not da or not db:
        missing = [n for n, d in zip(names, (da, db), strict=True) if not d]
        found.lines.append(f"float64 distance not recorded for {' and '.join(missing)}: the difference cannot be blamed on one side")
        return
    wa, wb = da["final_weights_rel_error"], db["final_weights_rel_error"]
    line = (
        f"distance from float64: {names[0]} loss {da['max_rel_loss_error']:.2e} / weights {wa:.2e}; "
        f"{names[1]} loss {db['max_rel_loss_error']:.2e} / weights {wb:.2e}"
    )
    if wa != wb:
        far, near, ratio = (names[0], names[1], wa / wb) if wa > wb else (names[1], names[0], wb / wa if wa else math.inf)
        line += f"; {far} is further from float64 ({ratio:.3g}x {near}'s weight error)"
        found.details["further_from_float64"] = far
    else:
        line += "; equally far"
    gap = found.details.get("weights", {}).get("rel_l2_all")
    if gap:
        verdict = "within" if gap <= wa + wb else "beyond"
        line += f"; the weight gap between them ({gap:.2e}) is {verdict} the sum of those distances ({wa + wb:.2e})"
    found.lines.append(line)


def _same_libtorch(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    va, vb = ((c.get("record") or {}).get("libtorch_version") for c in (a, b))
    return va is not None and va == vb


def _frontend_rank(cell: Mapping[str, Any]) -> tuple[int, str]:
    order = list(FRONTENDS)
    name = str(cell["frontend"])
    return (order.index(name) if name in order else len(order), name)


def _tensor_order(key: str) -> tuple[int, str]:
    layer, _, kind = key.partition(".")
    digits = layer.removeprefix("layer")
    return (int(digits) if digits.isdigit() else 1 << 30, kind or key)


def _fmt_scale(value: Any, name: str) -> str:
    if name == "skipped":
        return "skipped" if value else "not skipped"
    return f"{value:.9g}" if isinstance(value, (int, float)) else repr(value)


def _ulps(count: int) -> str:
    return "1 ULP" if count == 1 else f"{count} ULPs"


def _num(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None
