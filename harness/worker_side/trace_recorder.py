"""Runs inside a worker (Python's and R's alike): records the points of a traced call.

A traced call is a script's ``run_workload`` with a sink installed (``set_trace_sink`` in
``py_scripts/tracing.py`` and ``r_scripts/tracing.R``): every ``trace_point(step, name, tensor)`` reaches
:meth:`TraceRecorder.record` as a dtype name, a shape and the tensor's bytes. One recorder for both
languages, so both sides' points are digested by the same code: equality is decided on the bytes
(BLAKE3, :data:`POINT_DIGEST`), and only the points the harness asks to keep travel back whole (the narrow second pass).
Neither torch nor R is imported here; each handler turns its language's tensor into bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from blake3 import blake3

from harness.worker_side.tensor_bytes import decode

__all__ = ["POINT_DIGEST", "TraceComplete", "TraceRecorder", "recorder_arguments"]

#: The hash of each point's bytes, named in every reply and stored with every trace (:mod:`harness.model.cell_trace`), so
#: traces hashed otherwise (results from before it) are never compared as if their digests could be equal. BLAKE3 is a
#: cryptographic hash like SHA-256, which it replaced: two equal digests still mean equal bytes, whatever the bytes. It
#: is 3-4x faster on one core (4.0-5.5 GB/s against SHA-256's 1.3-1.9 GB/s with SHA-NI, on this project's 2-vCPU Xeon),
#: and the digest was most of a trace's cost: at `bench` a clip cell's record call digests about 776 MiB in 1,900
#: points, which took SHA-256 0.41-0.47 s beside a 0.19 s run, and BLAKE3 0.13 s (docs/timing.md, *Measured*).
POINT_DIGEST = "blake3"


class TraceComplete(Exception):
    """Raised into a traced Python call once every kept point is recorded: the rest of the run is not needed."""


class TraceRecorder:
    """The points of one traced call, in the order the script recorded them.

    ``keep``: ``(step, name)`` points whose whole tensor is returned (none in the first pass). Each point
    is ``[step, name, dtype, shape, digest, value]``, ``value`` the number itself for a one-element tensor
    (a loss, a norm, a scale: the trace's facts, such as whether clipping engaged, are read from them).

    ``against``: the loop points of the run this one is compared with (``[step, name, dtype, digest]`` each, the digest
    as its stored trace keeps it, a prefix of this hash's), or ``None``. Where given, the recorder walks them beside its
    own, by :func:`harness.judge.divergence.find_divergence`'s rule (same step and name, dtype and digest, in order), and
    once its run has parted from them at a step (:attr:`parted`), it keeps of every later step only the points named in
    ``kept_after_cut`` (those the verdicts read facts from): the rest cannot move where the two runs first part, and
    each costs R tens of microseconds (issue 38). The reply says where it cut (``cut``), so a comparison with any other
    run is refused past that step rather than believed.
    """

    def __init__(self, keep: Iterable[Iterable[Any]] = (), stop: bool = True, against: Iterable[Sequence[Any]] | None = None,
                 kept_after_cut: Iterable[str] = ()) -> None:
        self.keep = {(int(step), str(name)) for step, name in keep}
        #: Whether the run stops once every kept point is in (the narrow second pass); a record call runs to its end.
        self.stop = stop
        self.points: list[list[Any]] = []
        self.kept: dict[str, dict[str, Any]] = {}
        self.against = None if against is None else [(int(p[0]), str(p[1]), str(p[2]), str(p[3])) for p in against]
        self.kept_after_cut = frozenset(kept_after_cut)
        #: The step at which this run first parted from ``against`` (None: it has not, or nothing to compare with).
        self.parted: int | None = None

    def keeps(self, step: int, name: str) -> bool:
        """Whether a point of ``step`` named ``name`` is recorded: every point up to the end of the step where the run
        parted from ``against``, then only those named in ``kept_after_cut``. A handler asks before it makes the bytes."""
        return self.parted is None or step <= self.parted or name in self.kept_after_cut

    def record(self, step: int, name: str, dtype: str, shape: list[int], data: Any) -> bool:
        """Record one point from its bytes (any buffer); returns True once every kept point is in (stop the run). A point
        the cut drops (:meth:`keeps`) is not recorded."""
        if not self.keeps(step, name):
            return False
        digest = blake3(data).hexdigest()
        sizes = [int(s) for s in shape]
        index = len(self.points)  # this point's, in both runs' order
        parts_here = self.against is not None and self.parted is None and not self._matches(index, step, name, dtype, digest)
        if parts_here:
            self.parted = step
        value = float(decode(dtype, data)[0]) if math.prod(sizes) == 1 else None
        self.points.append([int(step), name, dtype, sizes, digest, value])
        # The tensor a compared run parts at (other bytes of the same point) is kept too: the pair's distance is measured
        # on it, so this side needs no second pass (harness/run/tracer.py). A one-element point's value is in the trace.
        if (step, name) in self.keep or (parts_here and value is None and self._same_point(index, step, name, dtype)):
            self.kept[f"{step}:{name}"] = {"dtype": dtype, "shape": sizes, "data": bytes(data)}
        return self.stop and bool(self.keep) and len(self.kept) == len(self.keep)

    def _matches(self, index: int, step: int, name: str, dtype: str, digest: str) -> bool:
        """Whether this run's point ``index`` is the compared run's: the same point, and a digest that begins with the
        stored one (a missing point, on either side, is a difference)."""
        assert self.against is not None
        return self._same_point(index, step, name, dtype) and digest.startswith(self.against[index][3])

    def _same_point(self, index: int, step: int, name: str, dtype: str) -> bool:
        """Whether the compared run's point ``index`` exists and has this step, name and dtype (its bytes aside)."""
        assert self.against is not None
        return index < len(self.against) and self.against[index][:3] == (step, name, dtype)

    def reply(self, record: dict[str, Any] | None) -> dict[str, Any]:
        """What the worker sends back: the run record (None when the run was stopped early), the points, the kept tensors,
        the hash that digested the points, and the step after which the points were cut (None: none were)."""
        return {"record": record, "points": self.points, "kept": self.kept, "digest": POINT_DIGEST, "cut": self.parted}


def recorder_arguments(trace: Mapping[str, Any]) -> dict[str, Any]:
    """A trace request's ``trace`` field as :class:`TraceRecorder`'s arguments: ``keep`` (``[[step, name], ...]``), ``stop``
    (default True), ``against`` and ``kept_after_cut`` (both absent but where the runner compares the run as it goes)."""
    return {"keep": trace.get("keep") or (), "stop": trace.get("stop", True), "against": trace.get("against"),
            "kept_after_cut": trace.get("kept_after_cut") or ()}
