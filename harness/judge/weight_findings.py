"""What comparing two runs' final weights finds: each tensor on both sides, and the weights as a whole.

Part of the findings (:mod:`harness.judge.findings`): measurements only, in float64 from the float32 tensors,
with the distance in float32 ULPs; each tensor knows whether it is bitwise equal, within the tolerance,
and by which of the tolerance's three criteria (relative L2, largest difference, ULPs) and how much of it.
One run's weights alone reduce to a digest (:func:`weights_digest`): equal or not, without the other file.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from harness.files.bounded_read import FileFormatError, check_regular_file
from harness.frontends.tensor_bytes import ulp_distance
from harness.judge.tolerances import Tolerance

__all__ = ["TensorFindings", "UnreadableWeights", "WeightFindings", "find_weights", "load_weights", "weights_digest"]


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
    """One final-weights tensor on both sides."""

    name: str
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    dtypes: tuple[str, str]
    identical: bool
    within: bool
    max_abs: float
    rel_l2: float
    max_ulps: int
    worst_index: tuple[int, ...] | None
    #: Both sides' values at ``worst_index`` (as float64; None where there is no element).
    worst_values: tuple[float, float] | None
    diff_sq: float
    norm_sq: float
    #: The share of the tolerance used, by the criterion that admits the tensor most easily (``admitted_by``:
    #: ``rel_l2``, ``max_abs`` or ``ulps``, the three ways a tensor can be within tolerance).
    tolerance_used: float
    admitted_by: str

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
class WeightFindings:
    """The final weights, tensor by tensor (in layer order), with the relative L2 gap of all of them."""

    unreadable: tuple[UnreadableWeights, ...]
    #: The tensor names each side lacks (present on the other side only).
    missing: tuple[tuple[str, ...], tuple[str, ...]]
    tensors: tuple[TensorFindings, ...]
    rel_l2_all: float

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


def find_weights(paths: tuple[Any, Any], tol: Tolerance) -> WeightFindings:
    """Both sides' final-weights files, read and compared tensor by tensor."""
    loaded: list[dict[str, np.ndarray]] = []
    unreadable = []
    for side, path in enumerate(paths):
        try:
            loaded.append(load_weights(str(path)))
        except ValueError as err:
            unreadable.append(UnreadableWeights(side, str(path), _cause(err)))
    if unreadable:
        return WeightFindings(tuple(unreadable), ((), ()), (), math.nan)
    wa, wb = loaded
    missing = (tuple(sorted(set(wb) - set(wa))), tuple(sorted(set(wa) - set(wb))))
    tensors = tuple(_find_tensor(key, wa[key], wb[key], tol) for key in sorted(set(wa) & set(wb), key=_tensor_order))
    num, den = sum(t.diff_sq for t in tensors), sum(t.norm_sq for t in tensors)
    return WeightFindings((), missing, tensors, math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf))


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


def _find_tensor(key: str, a: np.ndarray, b: np.ndarray, tol: Tolerance) -> TensorFindings:
    shapes, dtypes = (tuple(a.shape), tuple(b.shape)), (str(a.dtype), str(b.dtype))
    if a.shape != b.shape:
        return TensorFindings(key, shapes, dtypes, False, False, math.inf, math.inf, -1, None, None, 0.0, 0.0, math.inf, "rel_l2")
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
    within = rel <= tol.weight_rtol or max_abs <= tol.weight_atol or max_ulps <= tol.max_ulps
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape)) if diff.size else ()
    values = (float(a64[index]), float(b64[index])) if diff.size else None
    shares = {"rel_l2": _share(rel, tol.weight_rtol), "max_abs": _share(max_abs, tol.weight_atol), "ulps": _share(max_ulps, tol.max_ulps)}
    admitted_by = min(shares, key=lambda k: shares[k])
    return TensorFindings(
        key, shapes, dtypes, identical, within, max_abs, rel, max_ulps, index, values, diff_sq, norm_sq, shares[admitted_by], admitted_by,
    )


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
