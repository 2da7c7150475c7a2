"""The shape a result must have before anything reads it: every field the harness reads, one clear line for the first
that is missing or of the wrong JSON type, never a ``KeyError``, ``TypeError`` or ``unexpected …`` line.

``report``, ``merge`` and ``load_result`` read files a user may have edited, merged or truncated. Every field the
model's ``from_json`` builds from, the judges compute with and the views print is declared here once, as data
(:data:`RESULT`), and checked before any of them runs: a non-list ``traces``, a trace without its two frontends,
``frontends`` given as a string, a baseline no cell ran, installation facts of the wrong type, ``cells: []``.
What a field's *value* must agree with (a final loss with its last loss, a reference as long as the run, a
weights file named by one cell only) is :mod:`harness.store.consistency`'s, which runs next, on the typed result.

Stored verdicts (``pairs``, ``targets``, each cell's ``verdict``) are not checked: they are never read back, only
judged again (:mod:`harness.judge.assess`), and :func:`without_verdicts` drops them before a result is built.

Two checks: :func:`check_result_shape`, the whole current schema (what ``MatrixResult.from_json`` reads), and
:func:`check_upgradable_shape`, the fields every schema version shares, checked before an older file is upgraded
(an upgrade step reads them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from typing import Any, NoReturn

from harness.contract.record import RECORD_FIELDS
from harness.errors import ResultError, SpecError, UsageError
from harness.model.timing import TimingProtocol
from harness.workload.installations import LANGUAGES
from harness.workload.spec import WorkloadSpec

__all__ = ["RESULT", "VERDICT_FIELDS", "check_result_shape", "check_upgradable_shape", "without_verdicts"]

#: The fields of a stored result that are verdicts: judged again on every load, never read back.
VERDICT_FIELDS = ("pairs", "targets")

_FIX = "Re-run `python -m harness run --json` to write a complete one."


class _Refused(Exception):
    """The first field that is wrong: where, what it must be, and what it is (``missing``: absent)."""

    def __init__(self, where: str, expected: str, got: object, missing: bool = False) -> None:
        super().__init__(where)
        self.where, self.expected, self.got, self.missing = where, expected, got, missing


#: A check: raises :class:`_Refused` for a value (at ``where``) that does not have its shape.
Check = Callable[[object, str], None]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar(valid: Callable[[object], bool], expected: str) -> Check:
    def check(value: object, where: str) -> None:
        if not valid(value):
            raise _Refused(where, expected, value)
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _nullable(inner: Check) -> Check:
    expected = f"{_expected(inner)} or null"

    def check(value: object, where: str) -> None:
        if value is None:
            return
        try:
            inner(value, where)
        except _Refused as refused:
            if refused.where == where and not refused.missing:
                raise _Refused(where, expected, value) from refused
            raise
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _one_of(values: Collection[str], what: str) -> Check:
    listed = ", ".join(map(repr, values))
    return _scalar(lambda v: isinstance(v, str) and v in values, f"{what} ({listed})")


def _list(item: Check, expected: str, length: int | None = None, non_empty: bool = False) -> Check:
    def check(value: object, where: str) -> None:
        if not isinstance(value, list) or (length is not None and len(value) != length) or (non_empty and not value):
            raise _Refused(where, expected, value)
        for k, element in enumerate(value):
            item(element, f"{where}[{k}]")
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _values(item: Check, expected: str) -> Check:
    """An object whose keys are any strings and whose every value has ``item``'s shape."""
    def check(value: object, where: str) -> None:
        if not isinstance(value, Mapping):
            raise _Refused(where, expected, value)
        for key, element in value.items():
            item(element, f"{where}.{key}")
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _object(fields: Mapping[str, Check], optional: Collection[str] = (), expected: str = "an object") -> Check:
    """An object holding ``fields`` (those in ``optional`` may be absent, as null), and maybe others, unread."""
    def check(value: object, where: str) -> None:
        if not isinstance(value, Mapping):
            raise _Refused(where, expected, value)
        for name, field_check in fields.items():
            if name not in value:
                if name in optional:
                    continue
                raise _Refused(f"{where}.{name}" if where else name, _expected(field_check), None, missing=True)
            field_check(value[name], f"{where}.{name}" if where else name)
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _expected(check: Check) -> str:
    return str(getattr(check, "expected", "another value"))


def _anything(value: object, where: str) -> None:
    """Any JSON value: kept and shown as it is, never computed with."""


_INT = _scalar(_is_int, "a whole number")
_NUMBER = _scalar(_is_number, "a number")
_STR = _scalar(lambda v: isinstance(v, str), "a string")
_BOOL = _scalar(lambda v: isinstance(v, bool), "true or false")
_OBJECT = _values(_anything, "an object")
_NUMBERS = _list(_nullable(_NUMBER), "a list of numbers")
_STRINGS = _list(_STR, "a list of strings")
_INTS = _list(_INT, "a list of whole numbers")


def _spec(value: object, where: str) -> None:
    """The spec validates itself (:class:`harness.workload.spec.WorkloadSpec`), naming the field it refuses."""
    if not isinstance(value, Mapping):
        raise _Refused(where, "an object with the run's spec fields", value)
    for name, (valid, expected) in _SPEC_FIELDS.items():
        if name not in value or not valid(value[name]):
            raise _Refused(f"{where}.{name}", expected, value.get(name), missing=name not in value)
    try:
        WorkloadSpec.from_json(value)
    except SpecError as err:
        raise _Refused(f"{where}.{err.field}", err.allowed, err.value) from err
    except (TypeError, ValueError) as err:  # an unknown field: the spec's constructor names it
        raise _Refused(where, "an object of the spec's fields only", _Said(str(err))) from err


_spec.expected = "an object with the run's spec fields"  # type: ignore[attr-defined]


def _protocol(value: object, where: str) -> None:
    _object({"warmup_rounds": _INT, "rounds": _INT, "max_seconds": _NUMBER, "interleave": _BOOL})(value, where)
    assert isinstance(value, Mapping)
    try:
        TimingProtocol.from_json(value)
    except UsageError as err:
        raise _Refused(f"{where}.{err.option}", err.allowed, err.value) from err


_protocol.expected = "an object (the timing protocol)"  # type: ignore[attr-defined]


class _Said(str):
    """A description shown as it is, not as a value's repr."""


#: The spec fields the report prints or computes with, and what each must be (checked before the spec's own checks,
#: so a missing one is named as missing).
_SPEC_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "preset": (lambda v: isinstance(v, str), "a string"), "device": (lambda v: isinstance(v, str), "a string"),
    "amp_dtype": (lambda v: isinstance(v, str), "a string"),
    "batch_size": (_is_int, "a whole number"), "in_size": (_is_int, "a whole number"),
    "out_size": (_is_int, "a whole number"), "num_layers": (_is_int, "a whole number"),
    "num_batches": (_is_int, "a whole number"), "epochs": (_is_int, "a whole number"),
    "seed": (_is_int, "a whole number"), "threads": (_is_int, "a whole number"), "lr": (_is_number, "a number"),
}

_PEAK_FIELDS = _object({"tflops": _NUMBER, "n": _INT, "samples_tflops": _NUMBERS, "layout": _nullable(_STR),
                        "layouts_tflops": _nullable(_OBJECT)}, optional={"layout", "layouts_tflops"},
                       expected="an object (a measured peak)")


def _peak(value: object, where: str) -> None:
    """A measured peak; one that names its fastest layout lists every layout's rate (the report prints them)."""
    _PEAK_FIELDS(value, where)
    assert isinstance(value, Mapping)
    if value.get("layout") and not isinstance(value.get("layouts_tflops"), Mapping):
        raise _Refused(f"{where}.layouts_tflops", "an object of each layout's TFLOP/s (the peak names its layout)",
                       value.get("layouts_tflops"), missing="layouts_tflops" not in value)


_peak.expected = "an object (a measured peak)"  # type: ignore[attr-defined]
_PEAK = _peak
_PEAKS = _object({"device": _STR, "threads": _INT, "by_dtype": _values(_nullable(_PEAK), "an object of peaks by dtype"),
                  "reason": _nullable(_STR)}, optional={"reason"}, expected="an object (the measured matmul peaks)")

_STATS = _object({"n": _INT, "median": _NUMBER, "q1": _NUMBER, "q3": _NUMBER, "iqr": _nullable(_NUMBER), "min": _NUMBER,
                  "max": _NUMBER, "mean": _NUMBER, "cv": _nullable(_NUMBER)}, expected="an object (a clock's statistics)")
_SAMPLES = _object({"call_seconds": _NUMBERS, "loop_seconds": _NUMBERS, "workload_seconds": _NUMBERS, "gc_seconds": _NUMBERS,
                    "peak_rss_bytes": _list(_nullable(_NUMBER), "a list of byte counts"), "floor_seconds": _NUMBERS,
                    "other_cpu_seconds": _list(_nullable(_NUMBER), "a list of CPU seconds"),
                    "page_faults": _list(_nullable(_NUMBER), "a list of page-fault counts")},
                   optional={"floor_seconds", "other_cpu_seconds", "page_faults"}, expected="an object (each round's clocks)")
_TIMING = _object({
    "rounds": _INT, "warmup_calls": _INT, "call": _STATS, "loop": _STATS, "workload": _STATS,
    "overhead_seconds": _nullable(_NUMBER), "overhead_share": _nullable(_NUMBER), "setup_seconds": _nullable(_NUMBER),
    "setup_share": _nullable(_NUMBER), "bridge_seconds": _nullable(_NUMBER), "gc_seconds": _nullable(_NUMBER),
    "reproducible": _BOOL, "differing_rounds": _INT, "samples": _SAMPLES, "floor": _nullable(_STATS),
}, optional={"floor"}, expected="an object (the cell's timed rounds)")
_EFFICIENCY = _object({
    "flops": _NUMBER, "step_flops": _NUMBER, "seconds": _NUMBER, "tflops": _nullable(_NUMBER), "gemm_dtype": _STR,
    "peak_tflops": _nullable(_NUMBER), "share_of_peak": _nullable(_NUMBER), "share_note": _nullable(_STR),
}, optional={"share_note"}, expected="an object (the cell's efficiency)")
_MEMORY = _object({"peak_rss_bytes": _nullable(_NUMBER), "rss_before_bytes": _nullable(_NUMBER), "scope": _nullable(_STR),
                   "cuda_peak_bytes": _nullable(_NUMBER)},
                  optional={"peak_rss_bytes", "rss_before_bytes", "scope", "cuda_peak_bytes"}, expected="an object (the cell's memory)")
_DISTANCE = _object({"max_rel_loss_error": _nullable(_NUMBER), "final_weights_rel_error": _nullable(_NUMBER),
                     "worst_tensor": _nullable(_STR), "worst_tensor_rel_error": _nullable(_NUMBER)},
                    optional={"worst_tensor", "worst_tensor_rel_error"}, expected="an object (the cell's distance from float64)")
_GEMM_PROFILE = _object({"half_share": _nullable(_NUMBER), "gemm_seconds": _nullable(_NUMBER)},
                        optional={"half_share", "gemm_seconds"}, expected="an object (a GEMM profile)")
#: A record field's check, by its kind (:data:`harness.contract.record.KINDS`).
_KIND_CHECK: dict[str, Check] = {
    "int": _INT, "number": _NUMBER, "string": _STR, "list of numbers": _NUMBERS, "list of ints": _INTS,
    "list of flags": _list(_BOOL, "a list of true or false"), "list of strings": _STRINGS,
}
#: Every record field (:mod:`harness.contract.record`): a record is stored as its script wrote it, and read by the record
#: check, the judges and the views. A stored record may lack, or hold null in, any field but those every version has.
_RECORD_FIELDS: dict[str, Check] = {
    f.name: _KIND_CHECK[f.kind] if f.always else _nullable(_KIND_CHECK[f.kind]) for f in RECORD_FIELDS
}
_RECORD = _object(_RECORD_FIELDS, optional={f.name for f in RECORD_FIELDS if not f.always},
                  expected="an object (the cell's run record)")
#: What a cell's installation holds: how the user named it (:class:`harness.workload.installations.Installation`) and what
#: its worker reported (:func:`harness.worker_side.installation_facts.installation_facts`); pairs are judged by these facts.
_INSTALLATION_TEXT = ("python", "r_libs", "activate", "torch_version", "libtorch_version", "libtorch_path", "libtorch_build",
                      "interpreter", "host", "cpu", "machine", "language_version", "device_name", "cuda", "r_library",
                      "torch_package")
_INSTALLATION = _object(
    {"name": _STR, "language": _one_of(LANGUAGES, "a language"), "env": _values(_STR, "an object of strings"),
     **{name: _nullable(_STR) for name in _INSTALLATION_TEXT}},
    optional={"env", *_INSTALLATION_TEXT}, expected="an object (the installation that ran the cell)",
)
#: A cell's trace file (:class:`harness.model.cell_trace.TraceFile`), beside its weights.
_TRACE_FILE = _object({"path": _STR, "sha256": _STR, "points": _INT, "switches": _STRINGS}, optional={"switches"},
                      expected="an object (a cell's trace file)")
_PAIR = _list(_INTS, "a list of two shapes", length=2)
#: What a cell keeps of its final weights (:class:`harness.model.weights.FinalWeights`).
_COMPARISON = _object({
    "name": _STR, "shapes": _PAIR, "dtypes": _list(_STR, "a list of two dtypes", length=2), "identical": _BOOL,
    "max_abs": _NUMBER, "rel_l2": _NUMBER, "max_ulps": _INT, "worst_index": _nullable(_INTS),
    "worst_values": _nullable(_list(_NUMBER, "a list of two numbers", length=2)), "diff_sq": _NUMBER, "norm_sq": _NUMBER,
}, expected="an object (a tensor measured against its pair)")
_WEIGHTS = _object({
    "tensors": _values(_object({"dtype": _STR, "shape": _INTS, "sha256": _STR}, expected="an object (a tensor's digest)"),
                       "an object of tensor digests"),
    "compared": _values(_list(_COMPARISON, "a list of measured tensors"), "an object of measured tensors by cell"),
}, expected="an object (what the cell keeps of its final weights)")
_STATUSES = ("ok", "unsupported", "skipped", "numerical_failure", "error")
_CELL_FIELDS: dict[str, Check] = {
    "id": _STR, "pair": _STR, "script": _STR, "mode": _STR, "frontend": _STR, "device": _STR,
    "status": _one_of(_STATUSES, "a cell status"), "reason": _nullable(_STR), "record": _nullable(_RECORD),
    "reference_distance": _nullable(_DISTANCE), "wall_seconds": _nullable(_NUMBER), "memory": _nullable(_MEMORY),
    "timing": _nullable(_TIMING), "efficiency": _nullable(_EFFICIENCY), "gemm_profile": _nullable(_GEMM_PROFILE),
    "gemm_problem": _nullable(_STR), "time_vs_default": _nullable(_NUMBER), "time_vs_default_note": _nullable(_STR),
    "installation": _nullable(_INSTALLATION), "optimizer": _STR, "trace": _nullable(_TRACE_FILE),
    "reconciled": _nullable(_TRACE_FILE), "weights": _nullable(_WEIGHTS), "feature": _STR,
}
_CELL = _object(_CELL_FIELDS, optional=set(_CELL_FIELDS) - {"id", "pair", "script", "mode", "optimizer", "frontend", "device",
                                                            "status"},
                expected="an object (a cell)")
_TRAJECTORY = _object({"optimizer": _STR, "clip": _BOOL, "skipped_steps": _INTS, "losses": _list(_nullable(_NUMBER), "a list of losses"),
                       "feature": _STR}, optional={"feature"}, expected="an object (a float64 trajectory)")
_REFERENCE = _object({"available": _BOOL, "reason": _nullable(_STR), "trajectories": _list(_TRAJECTORY, "a list of float64 trajectories")},
                     optional={"reason", "trajectories"}, expected="an object (the float64 reference)")
_POINT_DIFFERENCE = _object({
    "step": _INT, "point": _STR, "kind": _STR, "dtypes": _list(_nullable(_STR), "a list of two dtypes", length=2),
    "shapes": _list(_nullable(_INTS), "a list of two shapes", length=2), "elements": _nullable(_INT),
    "differing": _nullable(_INT), "max_distance": _nullable(_INT), "worst_index": _nullable(_INTS),
    "worst_values": _nullable(_list(_NUMBER, "a list of two numbers", length=2)),
    "other": _nullable(_list(_anything, "a step and a point name", length=2)), "max_abs_difference": _nullable(_NUMBER),
    "magnitude": _nullable(_NUMBER),
}, optional={"elements", "differing", "max_distance", "worst_index", "worst_values", "other", "max_abs_difference", "magnitude"},
    expected="an object (the first differing point)")
_STEP_AND_POINT = _list(_anything, "a step and a point name ([step, name])", length=2)
_TRACE = _object({
    "pair": _STR, "frontends": _list(_STR, "a list of the pair's two frontends", length=2),
    "points": _list(_INT, "a list of two point counts", length=2), "identical_points": _INT,
    "first_difference": _nullable(_POINT_DIFFERENCE), "last_identical": _nullable(_STEP_AND_POINT),
    "triggers": _nullable(_values(_INTS, "an object of step lists")), "reproduced": _BOOL, "seconds": _NUMBER, "error": _nullable(_STR),
    "switches": _STRINGS, "reconciled_identical": _nullable(_BOOL), "reconciled": _nullable(_POINT_DIFFERENCE),
    "detail": _nullable(_POINT_DIFFERENCE),
}, optional={"first_difference", "last_identical", "triggers", "reproduced", "seconds", "error", "switches", "reconciled_identical",
             "reconciled", "detail"}, expected="an object (a traced pair)")
_WORKER = _object({"startup_seconds": _nullable(_NUMBER), "starts": _nullable(_INT), "ready_seconds": _NUMBER},
                  optional={"startup_seconds", "starts", "ready_seconds"},
                  expected="an object (a worker's start-ups)")
#: What the run found of this machine (:meth:`harness.run.availability.Availability.to_json`); the report prints it.
_ENVIRONMENT = _object({
    **{name: _nullable(_STR) for name in ("python_version", "platform", "torch_version", "rscript", "rpy2_version",
                                           "python_unavailable", "r_unavailable")},
    "r": _nullable(_values(_anything, "an object (what the probe of R found)")),
}, optional={"python_version", "platform", "torch_version", "rscript", "rpy2_version", "python_unavailable", "r_unavailable", "r"},
    expected="an object (the machine the run found)")
#: Where a result came from (:class:`harness.model.provenance.Provenance`).
_PROVENANCE = _object({
    "harness_version": _nullable(_STR), "source": _one_of(("checkout", "installed", "unknown"), "a provenance source"),
    "commit": _nullable(_STR), "dirty": _nullable(_BOOL), "note": _nullable(_STR), "scripts_root": _nullable(_STR),
    "files": _values(_STR, "an object of file digests"),
}, optional={"harness_version", "commit", "dirty", "note", "scripts_root", "files"}, expected="an object (the result's provenance)")
_SOURCE = _object({
    "file": _STR, "created": _STR, "host": _STR, "frontends": _STRINGS, "devices": _STRINGS, "cells": _STRINGS,
    "environment": _ENVIRONMENT, "spec": _spec, "peaks": _PEAKS, "protocol": _protocol, "provenance": _PROVENANCE,
    "reference": _REFERENCE,
}, optional={"spec", "peaks", "protocol", "environment", "host", "created", "provenance", "reference"},
   expected="an object (a merged input)")
_FIXTURE = _object({"digest": _nullable(_STR), "sha256": _nullable(_STR), "path": _nullable(_STR)},
                   optional={"digest", "sha256", "path"}, expected="an object (the fixture file)")

#: The current schema, field by field (what ``MatrixResult.from_json`` reads; ``pairs`` and ``targets`` are verdicts).
RESULT: dict[str, Check] = {
    "schema_version": _INT, "created": _STR, "wall_seconds": _NUMBER, "spec": _spec, "spec_digest": _STR, "fixture": _FIXTURE,
    "environment": _ENVIRONMENT, "protocol": _protocol, "workers": _values(_WORKER, "an object of workers"), "peaks": _PEAKS,
    "reference": _REFERENCE, "reference_seconds": _NUMBER, "warnings": _STRINGS,
    "cells": _list(_CELL, "a non-empty list of cells (a run has one cell at least)", non_empty=True),
    "judging": _STR, "traces": _list(_TRACE, "a list of traced pairs"),
    "frontends": _list(_STR, "a non-empty list of frontend names", non_empty=True), "baseline": _STR,
    "sources": _list(_SOURCE, "a list of merged inputs"), "provenance": _PROVENANCE,
    "phases": _list(_object({"name": _STR, "seconds": _NUMBER}, expected="an object (a phase: name and seconds)"), "a list of phases"),
}

#: The fields every schema version holds, checked before an older file is upgraded (the upgrade steps read them).
_UPGRADABLE: dict[str, Check] = {
    "spec": _spec, "cells": _list(_object({"id": _STR, "pair": _STR, "script": _STR, "mode": _STR, "frontend": _STR,
                                           "device": _STR, "status": _CELL_FIELDS["status"], "record": _nullable(_OBJECT),
                                           "timing": _nullable(_OBJECT)}, optional={"record", "timing"}, expected="an object (a cell)"),
                                  _expected(RESULT["cells"])),
    "reference": _nullable(_OBJECT), "protocol": _nullable(_OBJECT), "peaks": _nullable(_OBJECT),
    "environment": _nullable(_OBJECT), "fixture": _nullable(_OBJECT), "warnings": _nullable(_STRINGS),
}


def check_result_shape(result: object, source: str) -> None:
    """Refuse a result of the current schema that anything would trip over, naming the first field that is missing or wrong.

    Besides each field's type: every cell's frontend is one of ``frontends``, ``baseline`` is one of them, and no
    frontend is named twice.

    Raises:
        ResultError: one line: where in ``source`` the problem is, what was expected, what it is, and what to do.
    """
    try:
        _object(RESULT, expected="a JSON object")(result, "")
        assert isinstance(result, Mapping)
        frontends = result["frontends"]
        twice = next((f for k, f in enumerate(frontends) if f in frontends[:k]), None)
        if twice is not None:
            raise _Refused("frontends", "a list naming each frontend once", frontends)
        for k, cell in enumerate(result["cells"]):
            if cell["frontend"] not in frontends:
                raise _Refused(f"cells[{k}].frontend", f"one of the result's frontends ({', '.join(frontends)})", cell["frontend"])
        if result["baseline"] not in frontends:
            raise _Refused("baseline", f"one of the result's frontends ({', '.join(frontends)})", result["baseline"])
    except _Refused as refused:
        _refuse(source, refused)


def check_upgradable_shape(result: object, source: str) -> None:
    """Refuse a result of any schema version whose shared fields an upgrade step would trip over.

    Raises:
        ResultError: one line naming the field, as :func:`check_result_shape`.
    """
    try:
        _object(_UPGRADABLE, optional={"reference", "protocol", "peaks", "environment", "fixture", "warnings"},
                expected="a JSON object")(result, "")
    except _Refused as refused:
        _refuse(source, refused)


def without_verdicts(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without its stored verdicts (pairs, performance targets, each cell's verdict): they are judged again on load,
    never read back, so a hand edit there cannot stop a result from loading, nor count."""
    cells = data.get("cells")
    stripped = {k: v for k, v in data.items() if k not in VERDICT_FIELDS}
    if isinstance(cells, list):
        stripped["cells"] = [{k: v for k, v in c.items() if k != "verdict"} if isinstance(c, Mapping) else c for c in cells]
    return stripped


def _refuse(source: str, refused: _Refused) -> NoReturn:
    shown = "it is missing" if refused.missing else f"got {_short(refused.got)}"
    raise ResultError(
        f"{source} is not a result a report can be drawn from: {refused.where or 'the result'} must be {refused.expected}, "
        f"but {shown}. {_FIX}"
    )


def _short(value: object, limit: int = 60) -> str:
    if isinstance(value, _Said):
        text = str(value)
    elif isinstance(value, float) and not math.isfinite(value):
        text = str(value)
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
