"""One cell's trace as a result stores it: every named point of its record call, digested, in a file beside its weights.

A traced call hands every ``trace_point`` to a recorder (:mod:`harness.worker_side.trace_recorder`) as
``[step, name, dtype, shape, digest, value]`` (``value`` for a one-element tensor). Recording them with each cell, not
with each pair, is what lets a pair be traced wherever its two cells meet: in the run that made them, or in a
``harness merge`` of two CI slices or two machines, without their workers. The same cell may also carry a *reconciled*
trace: its run again with the switches of the known differences that cover it on its side (docs/known-differences.md).

The file is safetensors (NumPy), a few tens of kilobytes at ``tiny``: per point its step, its name, dtype and shape (as
indices into lists in the metadata), the first 16 bytes of its digest (128 bits of a cryptographic hash: two equal
digests mean equal bytes for any purpose here) and, for one-element points, its value; ``kept`` tensors (whole, for the points a known
difference measures a distance at) travel in it too. :class:`TraceFile` is what the result itself holds: where the
file is and its SHA-256, so a file swapped or edited after the run is refused, not believed.

Each trace names the hash of its points (:data:`DIGESTS`): BLAKE3 since it replaced SHA-256 to make traces cheaper
(format 2); a format-1 file is SHA-256's. Two traces hashed differently cannot be compared point by point (equal
bytes give unequal digests), so :meth:`CellTrace.comparable` says so, and a pair they meet in is left untraced with
that reason rather than judged on digests that could never agree.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from harness.errors import ResultError
from harness.model.codec import Stored

__all__ = ["DIGESTS", "DIGEST_HEX", "MAX_POINTS", "TRACE_SUFFIX", "CellTrace", "Point", "TraceFile", "file_sha256"]

#: A traced point: ``(step, name, dtype, shape, digest, value)``, ``value`` the number of a one-element tensor, else None.
Point = tuple[int, str, str, tuple[int, ...], str, float | None]
#: Digests are kept to 128 bits (32 hex digits): ample to tell two tensors apart, half the file.
DIGEST_HEX = 32
#: A cell's trace file is ``<cell id>.trace.safetensors`` (``.reconciled.trace.safetensors`` for its reconciled run).
TRACE_SUFFIX = ".trace.safetensors"
_FORMAT = "amp-parity cell trace 2"
#: The format before the hash was named in the file: every point SHA-256's.
_FORMAT_SHA256 = "amp-parity cell trace 1"
#: The hashes a stored trace's points may be digested with: the one workers use now
#: (``harness.worker_side.trace_recorder.POINT_DIGEST``, which tests/unit/worker_side/test_trace_recorder.py holds among
#: these) and the older one a reader still accepts.
DIGESTS = ("blake3", "sha256")
#: A trace holds a few thousand points at any preset (their number grows with steps, not sizes): this bounds what a
#: reader believes before it reads a file (a hundred bytes a point, with room for kept tensors). The writer holds to it
#: too (:meth:`CellTrace.too_long`): a run of 100,000 steps records more, and keeps no trace rather than one no reader takes.
MAX_POINTS = 2_000_000


@dataclass(frozen=True)
class CellTrace:
    """Every point of one traced call, in the order the script recorded them, and the switches it ran with."""

    points: tuple[Point, ...]
    #: The hash the points' digests are of (one of :data:`DIGESTS`).
    digest: str
    switches: tuple[str, ...] = ()
    #: Whole tensors of a few points (``"step:name"`` → ``{"dtype", "shape", "data"}``), for distances measured offline.
    kept: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Where the recorder cut the trace: the step in which the run parted from the run it was compared with as it went
    #: (:class:`harness.worker_side.trace_recorder.TraceRecorder`'s ``against``), after which only the points the
    #: verdicts read facts from were kept. ``None``: every point is here. A cut trace tells where it parts from that run,
    #: and from any other only up to this step (:func:`harness.judge.divergence.trace_cells` refuses the rest).
    cut: int | None = None

    def __post_init__(self) -> None:
        if self.digest not in DIGESTS:
            raise ValueError(f"its points' hash is {self.digest!r}, not one of {', '.join(DIGESTS)}")

    @classmethod
    def from_reply(cls, reply: Mapping[str, Any], switches: Sequence[str] = ()) -> CellTrace:
        """From a traced call's reply (``points``: ``[step, name, dtype, shape, digest, value]`` lists, ``digest``: their
        hash, ``kept``, ``cut``): digests cut to 128 bits."""
        return cls(
            tuple((int(p[0]), str(p[1]), str(p[2]), tuple(int(s) for s in p[3]), str(p[4])[:DIGEST_HEX],
                   None if p[5] is None else float(p[5])) for p in reply["points"]),
            str(reply["digest"]), tuple(switches), dict(reply.get("kept") or {}),
            None if reply.get("cut") is None else int(reply["cut"]),
        )

    @staticmethod
    def comparable(*traces: CellTrace) -> str | None:
        """None where every trace's points are digested with one hash, else why they cannot be compared point by point."""
        hashes = sorted({t.digest for t in traces})
        if len(hashes) < 2:
            return None
        return (f"the traces' points were digested with different hashes ({' and '.join(hashes)}: one cell was run by a "
                "harness from before BLAKE3 replaced SHA-256); re-run the older cells to trace the pair")

    def too_long(self) -> str | None:
        """Why no reader would take this trace (more than :data:`MAX_POINTS` points), or ``None``."""
        if len(self.points) <= MAX_POINTS:
            return None
        return f"it holds {len(self.points)} points, over the {MAX_POINTS} a trace may hold"

    def write(self, path: Path) -> TraceFile:
        """Write the trace to ``path`` (a safetensors file) and say where it is and what it holds.

        Raises:
            ValueError: :meth:`too_long` (nothing is written: a trace its reader refuses is never written).
        """
        too_long = self.too_long()
        if too_long is not None:
            raise ValueError(f"cannot write the trace {path}: {too_long}")
        names = list(dict.fromkeys(p[1] for p in self.points))
        dtypes = list(dict.fromkeys(p[2] for p in self.points))
        shapes = list(dict.fromkeys(p[3] for p in self.points))
        n = len(self.points)
        index = {name: k for k, name in enumerate(names)}, {d: k for k, d in enumerate(dtypes)}, {s: k for k, s in enumerate(shapes)}
        tensors: dict[str, np.ndarray] = {
            "step": np.array([p[0] for p in self.points], dtype=np.int64).reshape(n),
            "point": np.array([index[0][p[1]] for p in self.points], dtype=np.int32).reshape(n),
            "dtype": np.array([index[1][p[2]] for p in self.points], dtype=np.int32).reshape(n),
            "shape": np.array([index[2][p[3]] for p in self.points], dtype=np.int32).reshape(n),
            "digest": np.frombuffer(bytes.fromhex("".join(p[4] for p in self.points)), dtype=np.uint8).reshape(n, DIGEST_HEX // 2),
            "value": np.array([math.nan if p[5] is None else p[5] for p in self.points], dtype=np.float64).reshape(n),
            "has_value": np.array([p[5] is not None for p in self.points], dtype=np.uint8).reshape(n),
        }
        kept_meta = {}
        for key, tensor in self.kept.items():
            tensors[f"kept/{key}"] = np.frombuffer(bytes(tensor["data"]), dtype=np.uint8).copy()
            kept_meta[key] = {"dtype": str(tensor["dtype"]), "shape": [int(s) for s in tensor["shape"]]}
        metadata = {
            "format": _FORMAT, "digest": self.digest, "names": json.dumps(names), "dtypes": json.dumps(dtypes),
            "shapes": json.dumps([list(s) for s in shapes]), "switches": json.dumps(list(self.switches)),
            "kept": json.dumps(kept_meta), "cut": json.dumps(self.cut),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path), metadata=metadata)
        return TraceFile(str(path), file_sha256(path), n, self.switches)

    @classmethod
    def read(cls, trace: TraceFile) -> CellTrace:
        """The trace ``trace`` points at, checked: its SHA-256 is the one the result stored, and it is well formed.

        Raises:
            ResultError: the file is missing, unreadable, not a cell trace, of another content than the result says, or
                malformed (one line naming the file and what is wrong).
        """
        path = Path(trace.path)
        try:
            digest = file_sha256(path)
        except OSError as err:
            raise ResultError(f"cannot read the cell trace {path}: {err.strerror or err}; restore the result's weights folder "
                              "or re-run `python -m harness run --json`.") from err
        if digest != trace.sha256:
            raise ResultError(f"the cell trace {path} is not the one its result recorded (its SHA-256 differs): it was "
                              "replaced or edited after the run; restore it or re-run `python -m harness run --json`.")
        try:
            with path.open("rb") as handle:
                header_size = int.from_bytes(handle.read(8), "little")
                metadata = json.loads(handle.read(header_size)).get("__metadata__") or {}
            arrays = load_file(str(path))
            return cls._from_arrays(arrays, metadata, trace)
        except (OSError, ValueError, KeyError, TypeError, IndexError, SafetensorError) as err:
            raise ResultError(f"the cell trace {path} is malformed ({type(err).__name__}: {err}); re-run "
                              "`python -m harness run --json`.") from err

    @classmethod
    def _from_arrays(cls, arrays: Mapping[str, np.ndarray], metadata: Mapping[str, str], trace: TraceFile) -> CellTrace:
        if metadata.get("format") not in (_FORMAT, _FORMAT_SHA256):
            raise ValueError(f"its format is {metadata.get('format')!r}, not {_FORMAT!r}")
        digest = "sha256" if metadata["format"] == _FORMAT_SHA256 else metadata.get("digest")
        names, dtypes = json.loads(metadata["names"]), json.loads(metadata["dtypes"])
        shapes = [tuple(int(s) for s in shape) for shape in json.loads(metadata["shapes"])]
        n = int(arrays["step"].shape[0])
        if n > MAX_POINTS:
            raise ValueError(f"it holds {n} points, over the {MAX_POINTS} a trace may hold")
        if n != trace.points:
            raise ValueError(f"it holds {n} points, its result says {trace.points}")
        columns = [arrays[k] for k in ("step", "point", "dtype", "shape", "value", "has_value")]
        if any(c.shape != (n,) for c in columns) or arrays["digest"].shape != (n, DIGEST_HEX // 2):
            raise ValueError("its columns do not have one entry per point")
        digests = arrays["digest"].tobytes().hex()
        points = tuple(
            (int(step), str(names[name]), str(dtypes[dtype]), shapes[shape], digests[k * DIGEST_HEX:(k + 1) * DIGEST_HEX],
             float(value) if has else None)
            for k, (step, name, dtype, shape, value, has) in enumerate(zip(*columns, strict=True))
        )
        kept = {key: {"dtype": meta["dtype"], "shape": meta["shape"], "data": arrays[f"kept/{key}"].tobytes()}
                for key, meta in json.loads(metadata.get("kept") or "{}").items()}
        cut = json.loads(metadata.get("cut") or "null")  # absent in a file from before traces were cut: every point is there
        return cls(points, str(digest), tuple(json.loads(metadata.get("switches") or "[]")), kept, None if cut is None else int(cut))


@dataclass(frozen=True)
class TraceFile(Stored):
    """Where a cell's trace is (``path``, relative to the result in a stored result), its SHA-256, how many points it
    holds and the switches its run applied (none for the plain run)."""

    path: str
    sha256: str
    points: int
    switches: tuple[str, ...] = ()


def file_sha256(path: Path) -> str:
    """A file's SHA-256, read in chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
