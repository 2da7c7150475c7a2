"""Tensors as bytes: decoding every dtype a trace point holds, and distances in units in the last place."""

from __future__ import annotations

import numpy as np
import pytest

from harness.worker_side.tensor_bytes import decode, ulp_distance


def _bf16(values: list[float]) -> bytes:
    """bfloat16 bytes by truncating float32s (the values below are exact in bfloat16)."""
    return (np.array(values, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()


def test_ulp_distance_is_order_preserving_across_zero() -> None:
    """Neighbouring floats are 1 ULP apart, ±0 are equal, the two smallest subnormals of each sign are 2 apart."""
    tiny = np.float32(np.nextafter(np.float32(0), np.float32(1)))
    a = np.array([1.0, 0.0, -tiny, -0.0, np.nan, np.nan, -1.0], dtype=np.float32)
    b = np.array([np.nextafter(np.float32(1), np.float32(2)), tiny, tiny, 0.0, np.nan, 1.0, -2.0], dtype=np.float32)
    assert ulp_distance("float32", a, b).tolist() == [1, 1, 2, 0, 0, np.iinfo(np.int64).max, 1 << 23]


def test_bfloat16_is_decoded_from_its_bits_and_counted_in_its_own_ulps() -> None:
    """bfloat16 has 7 mantissa bits: 1.0 and 1.0078125 are neighbours, 1.0 and -1.0 are 2 x 0x3F80 apart."""
    a, b = _bf16([1.0, 2.5, 1.0]), _bf16([1.0078125, 2.5, -1.0])
    assert decode("bfloat16", a).tolist() == [1.0, 2.5, 1.0]
    assert ulp_distance("bfloat16", a, b).tolist() == [1, 0, 2 * 0x3F80]


def test_float16_and_float64_count_ulps_in_their_own_widths() -> None:
    """float16's neighbour of 1 is 1 + 2**-10 and float64's is 1 + 2**-52: one ULP each."""
    assert ulp_distance("float16", np.float16([1.0]), np.float16([1 + 2**-10])).tolist() == [1]
    assert ulp_distance("float64", np.float64([1.0]), np.float64([1 + 2**-52])).tolist() == [1]


def test_integers_and_booleans_differ_by_their_values() -> None:
    """A growth tracker (int32) at 3 vs 1 is 2 apart; booleans are 0/1."""
    assert ulp_distance("int32", np.int32([3, 7]), np.int32([1, 7])).tolist() == [2, 0]
    assert ulp_distance("bool", np.array([True, False]), np.array([False, False])).tolist() == [1, 0]


def test_an_unknown_dtype_or_a_torn_buffer_is_refused() -> None:
    """complex64 is no trace dtype, and 3 bytes are no float16 tensor."""
    with pytest.raises(ValueError, match="dtype must be one of"):
        decode("complex64", b"\0" * 8)
    with pytest.raises(ValueError):
        decode("float16", b"\0\0\0")
