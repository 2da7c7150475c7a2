"""A tensor as both frontends hand it over: a dtype name, a shape and its raw bytes (little-endian).

The trace compares two runs on the bytes, so this is where bytes become numbers again: the values a
person reads (:func:`decode`) and the distance in units in the last place (:func:`ulp_distance`), for
every dtype a trace point holds. NumPy only: the harness's own process never imports torch, and NumPy
has no bfloat16, so bfloat16 is decoded from its bits (the upper half of a float32).
"""

from __future__ import annotations

import numpy as np

from harness.contract.dtypes import DTYPES as CONTRACT_DTYPES
from harness.contract.dtypes import FLOAT_DTYPES

__all__ = ["DTYPES", "FLOAT_DTYPES", "decode", "encode", "ordered_bits", "ulp_distance"]

#: Each dtype's storage: the NumPy type of its bytes and whether it is a floating-point type (ULPs are then
#: counted in that format; integers and booleans differ by their values).
#: (harness/contract/dtypes.py declares them).
DTYPES: dict[str, tuple[str, bool]] = {name: (d.numpy, d.is_float) for name, d in CONTRACT_DTYPES.items()}
#: The signed integer of each float format's width, whose order the bit patterns are mapped onto.
_BITS = {name: d.bits for name, d in CONTRACT_DTYPES.items() if d.bits is not None}


def _storage(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype][0]


def decode(dtype: str, data: bytes | memoryview | np.ndarray) -> np.ndarray:
    """The elements as float64 (floats, bfloat16 included) or int64 (integers, booleans), flat.

    Raises:
        ValueError: an unknown dtype, or bytes that are not a whole number of elements.
    """
    raw = np.frombuffer(data, dtype=_storage(dtype))
    if dtype == "bfloat16":
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return raw.astype(np.float64 if dtype in FLOAT_DTYPES else np.int64)


def encode(dtype: str, values: np.ndarray | list[float]) -> bytes:
    """The bytes of ``values`` in ``dtype``: the inverse of :func:`decode` for values that are that dtype's (a trace stores
    a one-element point's value as a float64, which holds every float32, float16, bfloat16 and int32 exactly)."""
    array = np.asarray(values, dtype=np.float64)
    if dtype == "bfloat16":
        return (array.astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
    return array.astype(_storage(dtype)).tobytes()


def ordered_bits(dtype: str, data: bytes | memoryview | np.ndarray) -> np.ndarray:
    """Each float's bit pattern as an integer in the order of the values it encodes (int64, flat).

    Negative numbers are reflected below zero, so -0.0 and +0.0 both map to 0 and neighbours differ by 1.
    """
    if dtype not in _BITS:
        raise ValueError(f"ULPs are counted for {', '.join(_BITS)} only, got {dtype!r}")
    bits = np.frombuffer(data, dtype=_BITS[dtype]).astype(np.int64)
    magnitude = np.int64((1 << (8 * np.dtype(_BITS[dtype]).itemsize - 1)) - 1)  # every bit but the sign
    ordered: np.ndarray = np.where(bits < 0, -(bits & magnitude), bits)
    return ordered


def ulp_distance(dtype: str, a: bytes | memoryview | np.ndarray, b: bytes | memoryview | np.ndarray) -> np.ndarray:
    """Elementwise distance of two equally long tensors of ``dtype``: ULPs of that format for floats (0 equal,
    1 neighbours; NaN on one side only is the largest int64, on both 0), the difference of values otherwise."""
    if dtype not in FLOAT_DTYPES:
        values: np.ndarray = np.abs(decode(dtype, a) - decode(dtype, b))
        return values
    dist = np.abs(ordered_bits(dtype, a) - ordered_bits(dtype, b))
    nan_a, nan_b = np.isnan(decode(dtype, a)), np.isnan(decode(dtype, b))
    dist = np.where(nan_a & nan_b, 0, dist)
    return np.where(nan_a ^ nan_b, np.iinfo(np.int64).max, dist)
