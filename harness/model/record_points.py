"""What a cell's run recorded, as points of its trace: so comparing two traces compares everything the cells record.

A trace's points are the intermediates of the loop (:mod:`harness.model.cell_trace`); what the run recorded is beside
them: the loss and the loss scale at every step, the skipped steps, the dtypes inside autocast and every final-weights
tensor. A change the loop's points cannot see (weights scaled after the loop) shows only there. So the harness appends
these as *record points* (``record.*``) to every trace it writes, the plain run's and the reconciled run's alike: a
proof (the reconciled runs bitwise identical at every point) then covers the records too, and a stored trace is checked
against its cell's record (:func:`record_mismatch`): a trace that is not this cell's run is refused, not believed.

A record point's digest is the first 128 bits of a SHA-256: of the number's IEEE-754 double (a loss, a scale), of the
text (a dtype), or of the tensor's bytes (a final weight: the digest the result keeps, :class:`TensorDigest`), so a
trace's record points can be checked against a lean result that kept only its digests.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Mapping

from harness.model.cell_trace import DIGEST_HEX, CellTrace, Point
from harness.model.record import RunRecord
from harness.model.weights import TensorDigest

__all__ = ["RECORD_PREFIX", "has_record_points", "record_mismatch", "record_points", "records_only", "with_record_points"]

#: The names of record points start with it; no point of a script's loop does.
RECORD_PREFIX = "record."
#: The record's per-step histories, each point ``record.<field>`` at its step.
_HISTORIES = ("losses", "loss_scale", "skipped")
_DTYPES = ("output_dtype", "loss_dtype")


def _number(step: int, name: str, value: float | None) -> Point:
    raw = struct.pack("<d", math.nan if value is None else float(value))
    return (step, name, "float64", (), hashlib.sha256(raw).hexdigest()[:DIGEST_HEX], None if value is None else float(value))


def record_points(record: RunRecord, weights: Mapping[str, TensorDigest] | None) -> tuple[Point, ...]:
    """The record points of ``record`` and its final weights' digests (``None``: not known, left out)."""
    points: list[Point] = []
    last = max(len(record.losses) - 1, 0)
    for field in _HISTORIES:
        values = getattr(record, field)
        for step, value in enumerate(values or ()):
            points.append(_number(step, f"{RECORD_PREFIX}{field}", None if value is None else float(value)))
    for field in _DTYPES:
        text = str(getattr(record, field))
        points.append((last, f"{RECORD_PREFIX}{field}", "str", (), hashlib.sha256(text.encode()).hexdigest()[:DIGEST_HEX], None))
    # by name: each binding's safetensors writer orders a file's tensors its own way (R's put the conv net's conv1.bias
    # where Python's put bn.bias); the MLP's names were in this order in both files already
    for name, digest in sorted((weights or {}).items()):
        points.append((last, f"{RECORD_PREFIX}weights.{name}", digest.dtype, digest.shape, digest.sha256[:DIGEST_HEX], None))
    return tuple(points)


def with_record_points(trace: CellTrace, record: RunRecord, weights: Mapping[str, TensorDigest] | None) -> CellTrace:
    """``trace`` (its loop's points) followed by its run's record points."""
    return CellTrace((*trace.points, *record_points(record, weights)), trace.digest, trace.switches, trace.kept, trace.cut)


def has_record_points(trace: CellTrace) -> bool:
    """Whether the trace carries its run's record (traces written before issue 37 do not)."""
    return any(p[1].startswith(RECORD_PREFIX) for p in trace.points)


def records_only(trace: CellTrace) -> bool:
    """Whether the trace holds its run's record points and nothing else: an untraced run's (a reconciled run the matrix
    did not trace, since its records matched its partner's: issue 47). Compared with another trace, only their record
    points are (:func:`harness.judge.divergence.trace_cells`)."""
    return bool(trace.points) and all(p[1].startswith(RECORD_PREFIX) for p in trace.points)


def record_mismatch(trace: CellTrace, record: RunRecord | None, weights: Mapping[str, TensorDigest] | None) -> str | None:
    """Why ``trace``'s record points are not those of ``record`` (and ``weights``, where the result kept them), or ``None``.

    A trace without record points (written before them) has nothing to check. Final weights are checked where the result
    kept their digests.
    """
    stored = [p for p in trace.points if p[1].startswith(RECORD_PREFIX)]
    if not stored or record is None:
        return None
    expected = record_points(record, weights)
    if weights is None:
        stored = [p for p in stored if not p[1].startswith(f"{RECORD_PREFIX}weights.")]
    keyed = {(p[0], p[1]): p[4] for p in stored}
    mine = {(p[0], p[1]): p[4] for p in expected}
    for key in [*mine, *keyed]:
        if keyed.get(key) != mine.get(key):
            return f"{key[1].removeprefix(RECORD_PREFIX)} at step {key[0]} is not the record's"
    return None


