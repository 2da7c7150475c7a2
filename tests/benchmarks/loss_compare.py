"""Comparing a benchmarked cell's losses and weights with a saved run's, beside pytest-benchmark's timings.

pytest-benchmark's ``--benchmark-compare`` compares timings only; a faster run that trains differently is
no improvement. Each cell's ``extra_info`` (``tests/benchmarks/test_cells.py``) keeps its per-step
``losses``, ``final_loss``, ``weights_digest`` (:func:`harness.judge.weight_findings.weights_digest`),
``loss_scale`` history (scaler modes), ``spec_digest``, versions and ``scripts`` (the digest of every script and
shared file that ran: :class:`harness.model.provenance.Provenance`); :func:`compare_losses` compares two
such dicts and says what changed, in one line (naming the scripts that differ from the saved run's), with whether
that fails the session under a :class:`LossPolicy` (``--benchmark-compare-losses``, parsed by :func:`parse_policy`).

Plain functions on plain dicts: ``tests/benchmarks/conftest.py`` hands them the runs, and unit tests call
them without a process.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness.model.provenance import Provenance

__all__ = ["OPTION", "POLICY_CHOICES", "LossComparison", "LossPolicy", "compare_losses", "compare_saved", "parse_policy", "same_build",
           "saved_problem", "scripts_note"]

#: How ``--benchmark-compare-losses`` is written, for its help and its error.
#: The option (declared in tests/conftest.py, so ``pytest tests`` knows it as well as ``pytest tests/benchmarks``).
OPTION = "--benchmark-compare-losses"
POLICY_CHOICES = "auto, identity, tolerance:REL (e.g. tolerance:1e-6) or off"

PolicyKind = Literal["auto", "identity", "tolerance", "off"]
Verdict = Literal["identical", "within tolerance", "changed", "not comparable", "different workload", "new"]


@dataclass(frozen=True)
class LossPolicy:
    """What a changed loss does to the session.

    ``auto`` (the default): a change fails where the saved run ran on the same libtorch build (there, CPU
    runs repeat bitwise, so any change is the code's), and is reported only where the build differs
    (another libtorch may round differently). ``identity``: any change fails, whatever the build.
    ``tolerance``: a per-step relative loss change beyond ``rel`` fails; the weights digest and the loss
    scale are then reported, never failed (a digest cannot say how far). ``off``: nothing is compared.
    """

    kind: PolicyKind = "auto"
    rel: float = 0.0

    def __str__(self) -> str:
        return f"tolerance:{self.rel:g}" if self.kind == "tolerance" else self.kind


def parse_policy(text: str) -> LossPolicy:
    """The policy ``--benchmark-compare-losses`` names.

    Raises:
        ValueError: a word other than the four, or a tolerance that is not a finite number ≥ 0.
    """
    word, _, rel = text.strip().partition(":")
    if word in ("auto", "identity", "off") and not rel:
        return LossPolicy(word)  # type: ignore[arg-type]  # one of the Literal's words, checked just above
    if word == "tolerance":
        try:
            value = float(rel)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return LossPolicy("tolerance", value)
        raise ValueError(f"--benchmark-compare-losses=tolerance:REL needs REL a finite number ≥ 0 (e.g. tolerance:1e-6), got {rel!r}")
    raise ValueError(f"--benchmark-compare-losses must be one of {POLICY_CHOICES}, got {text!r}")


@dataclass(frozen=True)
class LossComparison:
    """One benchmark's losses and weights now against the saved run's: the verdict, whether it fails, the line printed."""

    name: str
    verdict: Verdict
    fails: bool
    line: str


def same_build(now: Mapping[str, Any], saved: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether both runs ran on the same libtorch build, and how that was told (for the printed line).

    Compared by ``torch_version`` and ``libtorch_version``, and by ``libtorch_build`` where both runs
    recorded one. Where either lacks it (saves older than that field), the build is unknown and the
    versions alone decide, which the line says. A run without versions is not on a known same build.
    """
    keys = ["torch_version", "libtorch_version"]
    build_known = bool(now.get("libtorch_build")) and bool(saved.get("libtorch_build"))
    if build_known:
        keys.append("libtorch_build")
    differing = [k for k in keys if now.get(k) is None or now.get(k) != saved.get(k)]
    if differing:
        changes = ", ".join(f"{k} {saved.get(k)} → {now.get(k)}" for k in differing)
        return False, f"libtorch build differs ({changes})"
    versions = f"torch {now['torch_version']}, libtorch {now['libtorch_version']}"
    build = f", build {now['libtorch_build']}" if build_known else "; build id unknown, compared by version"
    return True, f"same libtorch build ({versions}{build})"


def _same(x: float, y: float) -> bool:
    """Equal, where NaN equals NaN: a step whose loss was NaN in both runs did not change."""
    return x == y or (math.isnan(x) and math.isnan(y))


def _first_difference(a: Sequence[float], b: Sequence[float]) -> int | None:
    """The first step (from 0) where two histories differ, their common length if one is a prefix, or None: equal."""
    for step, (x, y) in enumerate(zip(a, b, strict=False)):
        if not _same(x, y):
            return step
    return None if len(a) == len(b) else min(len(a), len(b))


def _rel(x: float, y: float) -> float:
    """How far ``x`` moved from ``y``, relatively: 0 when the same (NaN and NaN too), infinite for a NaN on one side only
    (a NaN compared as a number made every change 0) or a change from 0."""
    if _same(x, y):
        return 0.0
    if math.isnan(x) or math.isnan(y) or y == 0 or math.isinf(y) or math.isinf(x):
        return math.inf
    return abs(x - y) / abs(y)


def _max_rel(now: Sequence[float], saved: Sequence[float]) -> float:
    """The largest per-step relative change of the losses, over the steps both runs have."""
    return max((_rel(x, y) for x, y in zip(now, saved, strict=False)), default=0.0)


class _Malformed(ValueError):
    """A saved history that is there but is not a list of numbers (a corrupted save): said as such, never as missing."""


def _history(info: Mapping[str, Any], key: str) -> list[float] | None:
    """A per-step history from ``extra_info`` as floats, or None where the run did not record one.

    Raises:
        _Malformed: it is there but not a list of numbers (the message names what it is).
    """
    values = info.get(key)
    if values is None:
        return None
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        shown = repr(values)
        raise _Malformed(f"its {key} are not a list of numbers ({shown if len(shown) <= 60 else shown[:57] + '...'})")
    return [float(v) for v in values]


#: The fields of a saved benchmark's ``extra_info`` the comparison reads beside the histories, and what each must be where
#: it is there: text (``None`` too, for the build facts a save may lack), or the scripts' digests by file.
_TEXT_FIELDS = ("spec_digest", "weights_digest")
_OPTIONAL_TEXT_FIELDS = ("torch_version", "libtorch_version", "libtorch_build")


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def saved_problem(saved: object) -> str | None:
    """What is wrong with a saved benchmark's ``extra_info`` (one phrase), or ``None`` where every field the comparison
    reads is of its kind: a save that is there but holds another kind is corrupted, never "nothing to compare"."""
    if not isinstance(saved, Mapping):
        return f"its extra_info is not a mapping ({_shown(saved)})"
    for key in _TEXT_FIELDS:
        if key in saved and not isinstance(saved[key], str):
            return f"its {key} is not a text ({_shown(saved[key])})"
    for key in _OPTIONAL_TEXT_FIELDS:
        if saved.get(key) is not None and not isinstance(saved[key], str):
            return f"its {key} is not a text ({_shown(saved[key])})"
    scripts = saved.get("scripts")
    digests = isinstance(scripts, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in scripts.items())
    if scripts is not None and not digests:
        return f"its scripts are not a mapping of file → digest ({_shown(scripts)})"
    try:
        _history(saved, "losses"), _history(saved, "loss_scale")
    except _Malformed as err:
        return str(err)
    return None


#: A saved benchmark without an ``extra_info`` at all (pytest-benchmark always writes one).
_ABSENT = object()


def compare_saved(name: str, now: Mapping[str, Any], saved_benchmark: Mapping[str, Any] | None, policy: LossPolicy) -> LossComparison:
    """:func:`compare_losses` of the saved run's benchmark of that name (``None``: it has none), as pytest-benchmark loaded it:
    its ``extra_info`` missing, ``null`` or of another kind is a corrupted save, which fails the session."""
    if saved_benchmark is None:
        return compare_losses(name, now, None, policy)
    saved = saved_benchmark.get("extra_info", _ABSENT)
    if saved is _ABSENT:
        return _corrupted(name, "it has no extra_info")
    if not isinstance(saved, Mapping):  # null included: a save that says nothing is not one with nothing to compare
        return _corrupted(name, str(saved_problem(saved)))
    return compare_losses(name, now, saved, policy)


def _corrupted(name: str, why: str) -> LossComparison:
    return LossComparison(name, "not comparable", True, f"{name}: not comparable: the saved run is corrupted: {why}; re-save it")


def scripts_note(now: Mapping[str, Any], saved: Mapping[str, Any]) -> str:
    """``""`` where both runs ran the same scripts (or neither recorded them); else what is known: the files that differ, or
    that the saved run recorded none."""
    if not isinstance(now.get("scripts"), dict):
        return ""
    if not isinstance(saved.get("scripts"), dict):
        return "; whether the scripts changed is unknown (the saved run recorded none)"
    differing = Provenance(None, "saved", files=saved["scripts"]).differing_files(Provenance(None, "now", files=now["scripts"]))
    return f"; ran different scripts than the saved run: {', '.join(differing)}" if differing else ""


def compare_losses(name: str, now: Mapping[str, Any], saved: Mapping[str, Any] | None, policy: LossPolicy) -> LossComparison:
    """As :func:`_compare_losses`, its line ending with the scripts that differ from the saved run's (:func:`scripts_note`);
    a saved ``extra_info`` any field of which is of another kind than the comparison reads (:func:`saved_problem`) is one
    "the saved run is corrupted" line that fails the session, whatever the field."""
    if saved is not None:
        problem = saved_problem(saved)
        if problem is not None:
            return _corrupted(name, problem)
    compared = _compare_losses(name, now, saved, policy)
    note = scripts_note(now, saved) if saved is not None else ""
    return dataclasses.replace(compared, line=compared.line + note) if note else compared


def _compare_losses(name: str, now: Mapping[str, Any], saved: Mapping[str, Any] | None, policy: LossPolicy) -> LossComparison:
    """Compare one benchmark's ``extra_info`` now with the saved run's, under ``policy``.

    ``saved`` is None where the saved run has no benchmark of that name. The line names what changed:
    the final loss (both values, exactly), the first differing step, the weights digest and the loss
    scale history, then why it fails or is only reported. ``off`` is the caller's to honour (it compares
    nothing); handed here, it judges as ``auto``.
    """
    if saved is None:
        return LossComparison(name, "new", False, f"{name}: not in the saved run; nothing to compare")
    if now.get("spec_digest") != saved.get("spec_digest") and "spec_digest" in saved:
        return LossComparison(name, "different workload", False,
                              f"{name}: different workload (spec digest {saved['spec_digest']} → {now.get('spec_digest')}); "
                              "losses not compared")
    saved_losses, scale_saved = _history(saved, "losses"), _history(saved, "loss_scale")  # checked: saved_problem
    try:
        now_losses, scale_now = _history(now, "losses"), _history(now, "loss_scale")
    except _Malformed as err:
        return LossComparison(name, "not comparable", True, f"{name}: not comparable: this run's record is corrupted: {err}")
    if not saved_losses:
        return LossComparison(name, "not comparable", False, f"{name}: not comparable: saved run has no per-step losses (re-save it)")
    if not now_losses:
        return LossComparison(name, "not comparable", False, f"{name}: not comparable: this run recorded no per-step losses")

    changes: list[str] = []
    loss_step = _first_difference(now_losses, saved_losses)
    if loss_step is not None:
        span = f"of steps 0–{len(saved_losses) - 1}"
        if len(now_losses) != len(saved_losses):
            span = f"step count {len(saved_losses)} → {len(now_losses)}"
        at_step = ""
        if loss_step < min(len(now_losses), len(saved_losses)):
            at_step = f": {saved_losses[loss_step]!r} → {now_losses[loss_step]!r}"
        final = (f"final loss changed from {saved_losses[-1]!r} to {now_losses[-1]!r}" if not _same(now_losses[-1], saved_losses[-1])
                 else f"final loss unchanged at {now_losses[-1]!r}")
        changes.append(f"losses changed at step {loss_step} ({span}{at_step}; largest relative change "
                       f"{_max_rel(now_losses, saved_losses):.2g}), {final}")
    weights_changed = False
    if "weights_digest" not in saved:
        weights_note = "weights digest not in the saved run"
    elif now.get("weights_digest") != saved["weights_digest"]:
        weights_changed = True
        changes.append(f"weights digest changed ({str(saved['weights_digest'])[:12]} → {str(now.get('weights_digest'))[:12]})")
        weights_note = ""
    else:
        weights_note = "weights digest identical"
    scale_changed = False
    if scale_now is not None or scale_saved is not None:
        scale_step = _first_difference(scale_now or [], scale_saved or [])
        if scale_step is not None:
            scale_changed = True
            changes.append(f"loss scale history changed (first differing step {scale_step})")

    if not changes:
        notes = ", ".join(n for n in (weights_note, "loss scale identical" if scale_now is not None else "") if n)
        return LossComparison(name, "identical", False, f"{name}: losses identical ({len(now_losses)} steps), {notes}")

    what = "; ".join(changes + ([weights_note] if "weights_digest" not in saved else []))
    if policy.kind == "tolerance":
        rel = _max_rel(now_losses, saved_losses) if len(now_losses) == len(saved_losses) else math.inf
        if rel <= policy.rel:
            judged = [w for w, changed in (("weights digest", weights_changed), ("loss scale", scale_changed)) if changed]
            extra = f"; {' and '.join(judged)} reported, not judged by a tolerance" if judged else ""
            return LossComparison(name, "within tolerance", False,
                                  f"{name}: {what}: within tolerance {policy.rel:g} (largest relative change {rel:.2g}){extra}")
        beyond = (f"relative change {rel:.2g} beyond tolerance {policy.rel:g}" if math.isfinite(rel)
                  else "step count changed, beyond any tolerance")
        return LossComparison(name, "changed", True, f"{name}: {what}: FAILED: {beyond}")
    if policy.kind == "identity":
        return LossComparison(name, "changed", True, f"{name}: {what}: FAILED: identity required (--benchmark-compare-losses=identity)")
    same, build = same_build(now, saved)
    if same:
        return LossComparison(name, "changed", True, f"{name}: {what}: FAILED: {build}, where identity is required")
    return LossComparison(name, "changed", False, f"{name}: {what}: reported, not failed: {build}, which may round differently")
