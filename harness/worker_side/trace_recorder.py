"""Runs inside a worker (Python's and R's alike): records the points of a traced call.

A traced call is a script's ``run_workload`` with a sink installed (``set_trace_sink`` in
``py_scripts/common.py`` and ``r_scripts/common.R``): every ``trace_point(step, name, tensor)`` reaches
:meth:`TraceRecorder.record` as a dtype name, a shape and the tensor's bytes. One recorder for both
languages, so both sides' points are digested by the same code: equality is decided on the bytes
(BLAKE3, :data:`POINT_DIGEST`), and only the points the harness asks to keep travel back whole (the narrow second pass).
Neither torch nor R is imported here; each handler turns its language's tensor into bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from blake3 import blake3

from harness.worker_side.tensor_bytes import decode

__all__ = ["POINT_DIGEST", "TraceComplete", "TraceRecorder"]

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
    """

    def __init__(self, keep: Iterable[Iterable[Any]] = (), stop: bool = True) -> None:
        self.keep = {(int(step), str(name)) for step, name in keep}
        #: Whether the run stops once every kept point is in (the narrow second pass); a record call runs to its end.
        self.stop = stop
        self.points: list[list[Any]] = []
        self.kept: dict[str, dict[str, Any]] = {}

    def record(self, step: int, name: str, dtype: str, shape: list[int], data: Any) -> bool:
        """Record one point from its bytes (any buffer); returns True once every kept point is in (stop the run)."""
        digest = blake3(data).hexdigest()
        sizes = [int(s) for s in shape]
        value = float(decode(dtype, data)[0]) if math.prod(sizes) == 1 else None
        self.points.append([int(step), name, dtype, sizes, digest, value])
        if (step, name) in self.keep:
            self.kept[f"{step}:{name}"] = {"dtype": dtype, "shape": sizes, "data": bytes(data)}
        return self.stop and bool(self.keep) and len(self.kept) == len(self.keep)

    def reply(self, record: dict[str, Any] | None) -> dict[str, Any]:
        """What the worker sends back: the run record (None when the run was stopped early), the points, the kept tensors
        and the hash that digested the points."""
        return {"record": record, "points": self.points, "kept": self.kept, "digest": POINT_DIGEST}
