"""What comparing two runs' final weights finds: each tensor on both sides, and the weights as a whole.

Part of the findings (:mod:`harness.judge.findings`): measurements only, in float64 from the float32 tensors,
with the distance in float32 ULPs; each tensor knows whether it is bitwise equal, within the tolerance,
and by which of the tolerance's three criteria (relative L2, largest difference, ULPs) and how much of it.
One run's weights alone reduce to a digest (:func:`weights_digest`): equal or not, without the other file.

A tensor is measured first (:func:`measure_tensor`, the numbers a result keeps: :mod:`harness.model.weights`), then held
to a tolerance (:func:`judge_tensor`); so a result whose weights files are gone is judged from what it kept
(:func:`find_weights`' ``kept``), under any policy, as it was with the files.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from harness.files.bounded_read import FileFormatError, check_regular_file
from harness.judge.tolerances import Tolerance
from harness.model.weights import TensorComparison, TensorDigest
from harness.worker_side.tensor_bytes import ulp_distance

__all__ = [
    "KeptWeights", "TensorFindings", "UnreadableWeights", "WeightFindings", "find_weights", "judge_tensor", "measure_tensor",
    "load_weights", "measure_weights", "tensor_digests", "weights_digest",
]


def load_weights(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The tensors of one final-weights file, read as every file the harness reads: a regular file (a FIFO would hang,
    ``/dev/zero`` read forever), no larger than this machine's memory (a spec's weights must fit in half of it:
    :mod:`harness.workload.spec`), then mapped by safetensors.

    Raises:
        ValueError: it cannot be read as safetensors: missing, not a regular file, too large, truncated or corrupt (its
            path and the reason, one line).
    """
    try:
        check_regular_file(path, _physical_memory())
        return load_file(os.fspath(path))
    except Exception as err:  # an OSError, FileFormatError, safetensors' own SafetensorError
        raise ValueError(f"cannot read the weights in {os.fspath(path)}: {_said(err)}") from err


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # no sysconf names here: no bound but the file system's
        return 1 << 62


@dataclass(frozen=True)
class TensorFindings:
    """One final-weights tensor on both sides: its measurement (:class:`TensorComparison`), held to a tolerance."""

    measured: TensorComparison
    within: bool
    #: The share of the tolerance used, by the criterion that admits the tensor most easily (``admitted_by``:
    #: ``rel_l2``, ``max_abs`` or ``ulps``, the three ways a tensor can be within tolerance).
    tolerance_used: float
    admitted_by: str

    # What was measured, read through: a finding is its measurement plus the tolerance's answer.
    @property
    def name(self) -> str:
        """The measurement's ``name``."""
        return self.measured.name

    @property
    def shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The measurement's ``shapes``."""
        return self.measured.shapes

    @property
    def dtypes(self) -> tuple[str, str]:
        """The measurement's ``dtypes``."""
        return self.measured.dtypes

    @property
    def identical(self) -> bool:
        """The measurement's ``identical``."""
        return self.measured.identical

    @property
    def max_abs(self) -> float:
        """The measurement's ``max_abs``."""
        return self.measured.max_abs

    @property
    def rel_l2(self) -> float:
        """The measurement's ``rel_l2``."""
        return self.measured.rel_l2

    @property
    def max_ulps(self) -> int:
        """The measurement's ``max_ulps``."""
        return self.measured.max_ulps

    @property
    def worst_index(self) -> tuple[int, ...] | None:
        """The measurement's ``worst_index``."""
        return self.measured.worst_index

    @property
    def worst_values(self) -> tuple[float, float] | None:
        """Both sides' values at ``worst_index`` (as float64; None where there is no element)."""
        return self.measured.worst_values

    @property
    def diff_sq(self) -> float:
        """The measurement's ``diff_sq``."""
        return self.measured.diff_sq

    @property
    def norm_sq(self) -> float:
        """The measurement's ``norm_sq``."""
        return self.measured.norm_sq

    @property
    def shape_differs(self) -> bool:
        """The sides' shapes differ: nothing else about the tensor was compared."""
        return self.shapes[0] != self.shapes[1]

    @property
    def dtype_differs(self) -> bool:
        """The sides stored different dtypes (the contract says float32)."""
        return self.dtypes[0] != self.dtypes[1]

    @property
    def beyond(self) -> bool:
        """A shape or dtype that differs, or a difference past the tolerance."""
        return self.shape_differs or self.dtype_differs or (not self.identical and not self.within)


@dataclass(frozen=True)
class UnreadableWeights:
    """A side whose final-weights file could not be read."""

    side: int
    path: str
    error: str


@dataclass(frozen=True)
class KeptWeights:
    """What a result kept of a pair's final weights (:class:`harness.model.weights.FinalWeights`), for when a file is gone:
    the tensors measured against each other (side 0 first), or ``None``, and each side's tensor digests, or ``None``."""

    comparison: tuple[TensorComparison, ...] | None
    digests: tuple[Mapping[str, TensorDigest] | None, Mapping[str, TensorDigest] | None]


@dataclass(frozen=True)
class WeightFindings:
    """The final weights, tensor by tensor (in layer order), with the relative L2 gap of all of them."""

    unreadable: tuple[UnreadableWeights, ...]
    #: The tensor names each side lacks (present on the other side only).
    missing: tuple[tuple[str, ...], tuple[str, ...]]
    tensors: tuple[TensorFindings, ...]
    rel_l2_all: float
    #: How they were found without both files (what the result kept), or ``None``: from the two weights files.
    kept: str | None = None

    @property
    def readable(self) -> bool:
        """Both files could be read."""
        return not self.unreadable

    @property
    def differing(self) -> tuple[TensorFindings, ...]:
        """The tensors that are not bitwise equal."""
        return tuple(t for t in self.tensors if not t.identical)

    @property
    def worst(self) -> TensorFindings | None:
        """The tensor furthest apart (beyond tolerance first), or None when every tensor is bitwise equal."""
        if not self.differing:
            return None
        return max(self.tensors, key=lambda t: (not t.within, t.rel_l2, t.max_ulps))

    @property
    def identical(self) -> bool:
        """Both files read, the same tensor names, every tensor bitwise equal."""
        return self.readable and not any(self.missing) and not self.differing

    @property
    def beyond(self) -> bool:
        """A tensor missing on one side or beyond tolerance."""
        return any(self.missing) or any(t.beyond for t in self.tensors)


def find_weights(paths: tuple[Any, Any], tol: Tolerance, kept: KeptWeights | None = None) -> WeightFindings:
    """Both sides' final-weights files, read and compared tensor by tensor.

    Where a file is gone (``None``, or not on disk) and ``kept`` holds what the result kept of the pair, the tensors are
    judged from that instead: the measurements, else (two cells of different results) the digests, which can say
    "bitwise equal" and nothing more; ``kept`` on the findings says which. A file that exists but cannot be read is
    unreadable whatever was kept: something replaced it.
    """
    loaded: list[dict[str, np.ndarray]] = []
    unreadable = []
    for side, path in enumerate(paths):
        if path is None or not os.path.exists(path):
            unreadable.append(UnreadableWeights(side, str(path), "the file is not present"))
            continue
        try:
            loaded.append(load_weights(str(path)))
        except ValueError as err:
            unreadable.append(UnreadableWeights(side, str(path), _cause(err)))
    if unreadable:
        gone = all(u.error == "the file is not present" for u in unreadable)
        found = _from_kept(kept, tol) if gone and kept is not None else None
        return found or WeightFindings(tuple(unreadable), ((), ()), (), math.nan)
    wa, wb = loaded
    return _findings(wa.keys(), wb.keys(), [judge_tensor(measure_tensor(k, wa[k], wb[k]), tol) for k in set(wa) & set(wb)])


def _cause(err: ValueError) -> str:
    """What :func:`load_weights` found wrong, without its path (the caller's line names it)."""
    return str(err) if err.__cause__ is None else _said(err.__cause__)


def _said(err: BaseException) -> str:
    """One line for why a weights file could not be read: the file system's words, the bounded reader's, or safetensors'."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    if isinstance(err, FileFormatError):
        return str(err)
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


def measure_weights(path_a: Any, path_b: Any) -> tuple[TensorComparison, ...]:
    """Every tensor both final-weights files hold, measured against each other (the file at ``path_a`` is side 0), in layer order.

    Raises:
        ValueError: a file that cannot be read as safetensors (:func:`load_weights`).
    """
    wa, wb = load_weights(str(path_a)), load_weights(str(path_b))
    return tuple(measure_tensor(k, wa[k], wb[k]) for k in sorted(set(wa) & set(wb), key=_tensor_order))


def tensor_digests(path: Any) -> dict[str, TensorDigest]:
    """Each tensor of one final-weights file: dtype, shape and the SHA-256 of its bytes (in layer order).

    Raises:
        ValueError: a file that cannot be read as safetensors (:func:`load_weights`).
    """
    tensors = load_weights(str(path))
    return {k: TensorDigest(str(tensors[k].dtype), tuple(int(n) for n in tensors[k].shape),
                            hashlib.sha256(np.ascontiguousarray(tensors[k]).tobytes()).hexdigest())
            for k in sorted(tensors, key=_tensor_order)}


def _findings(names_a: Any, names_b: Any, tensors: list[TensorFindings], kept: str | None = None) -> WeightFindings:
    """The findings of the tensors both sides hold (in layer order) and the names one side lacks."""
    a, b = set(names_a), set(names_b)
    ordered = tuple(sorted(tensors, key=lambda t: _tensor_order(t.name)))
    num, den = sum(t.diff_sq for t in ordered), sum(t.norm_sq for t in ordered)
    rel_all = math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)
    return WeightFindings((), (tuple(sorted(b - a)), tuple(sorted(a - b))), ordered, rel_all, kept)


def _from_kept(kept: KeptWeights, tol: Tolerance) -> WeightFindings | None:
    """The findings from what the result kept of the pair (its weights files are gone), or ``None``: it kept too little."""
    if kept.comparison is not None:
        names = [t.name for t in kept.comparison]
        da, db = kept.digests
        return _findings(da or names, db or names, [judge_tensor(t, tol) for t in kept.comparison],
                         "judged from the measurements the result kept (its final-weights files are not present)")
    da, db = kept.digests
    if da is None or db is None or any(da[k] != db[k] for k in set(da) & set(db)):
        return None  # digests cannot say how far apart two tensors are
    same = [judge_tensor(TensorComparison(k, (da[k].shape, db[k].shape), (da[k].dtype, db[k].dtype), True, 0.0, 0.0, 0,
                                          None, None, 0.0, 0.0), tol) for k in set(da) & set(db)]
    return _findings(da, db, same, "judged from the tensor digests the results kept: bitwise equal (the final-weights files are "
                                   "not present)")


def measure_tensor(key: str, a: np.ndarray, b: np.ndarray) -> TensorComparison:
    """One tensor on both sides, measured in float64 with the distance in float32 ULPs (no tolerance applied)."""
    shapes, dtypes = (tuple(a.shape), tuple(b.shape)), (str(a.dtype), str(b.dtype))
    if a.shape != b.shape:
        return TensorComparison(key, shapes, dtypes, False, math.inf, math.inf, -1, None, None, 0.0, 0.0)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    # Weights that went to ±inf (PyTorch's after an inf slipped past its scaler) make infinite distances and
    # norms: the right answer, so NumPy's overflow warnings are not raised.
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.where(nan_a & nan_b, 0.0, np.where(nan_a ^ nan_b, np.inf, np.abs(a64 - b64)))
        diff = np.where(np.isnan(diff), np.inf, diff)  # inf - inf: both infinite, of one sign or not
        diff = np.where(a64 == b64, 0.0, diff)
        # relative to the larger norm: symmetric, so swapping the frontends never changes a verdict
        diff_sq = float(np.sum(np.square(diff)))
        norm_sq = max(float(np.sum(np.square(np.nan_to_num(a64)))), float(np.sum(np.square(np.nan_to_num(b64)))))
    ulps = ulp_distance("float32", np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)).reshape(a.shape)
    rel = math.sqrt(diff_sq / norm_sq) if norm_sq > 0 else (0.0 if diff_sq == 0 else math.inf)
    max_abs, max_ulps = (float(diff.max()), int(ulps.max())) if diff.size else (0.0, 0)
    identical = a.dtype == b.dtype and bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape)) if diff.size else ()
    values = (float(a64[index]), float(b64[index])) if diff.size else None
    return TensorComparison(key, shapes, dtypes, identical, max_abs, rel, max_ulps, index, values, diff_sq, norm_sq)


def judge_tensor(m: TensorComparison, tol: Tolerance) -> TensorFindings:
    """A measured tensor held to ``tol``: within it by any of its three criteria, and how much of it is used."""
    if m.shapes[0] != m.shapes[1]:
        return TensorFindings(m, False, math.inf, "rel_l2")
    within = m.rel_l2 <= tol.weight_rtol or m.max_abs <= tol.weight_atol or m.max_ulps <= tol.max_ulps
    shares = {"rel_l2": _share(m.rel_l2, tol.weight_rtol), "max_abs": _share(m.max_abs, tol.weight_atol),
              "ulps": _share(m.max_ulps, tol.max_ulps)}
    admitted_by = min(shares, key=lambda k: shares[k])
    return TensorFindings(m, within, shares[admitted_by], admitted_by)


def _share(value: float, allowed: float) -> float:
    return 0.0 if value == 0 else (value / allowed if allowed > 0 else math.inf)


def _tensor_order(key: str) -> tuple[int, str]:
    layer, _, kind = key.partition(".")
    digits = layer.removeprefix("layer")
    return (int(digits) if digits.isdigit() else 1 << 30, kind or key)


def weights_digest(path: str | os.PathLike[str]) -> str:
    """A sha256 over one final-weights file's tensors: each name, dtype, shape and bytes, in name order.

    Two runs' weights are then compared without keeping both files: the benchmarks store it beside each
    cell's losses, so a saved run tells whether the weights moved. Taken over the tensors, not the file's
    bytes, so the header's layout and metadata (another safetensors version, another writer) do not count.

    Raises:
        ValueError: the file could not be read as safetensors (its path and safetensors' own message).
    """
    try:
        tensors = load_weights(path)
    except ValueError as err:
        raise ValueError(f"cannot digest the weights in {os.fspath(path)}: {_cause(err)}") from err
    digest = hashlib.sha256()
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        digest.update(f"{name}\0{array.dtype.str}\0{list(array.shape)}\0".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()
