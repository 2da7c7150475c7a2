"""The dtypes both languages name, declared once: the contract's name, libtorch's, the profiler's, the NumPy storage of
its bytes, and its machine epsilon.

The run spec hands the table to the scripts (``dtypes``: R maps libtorch's names back through it), the trace decodes
bytes by it (:mod:`harness.worker_side.tensor_bytes`), the GEMM profile and the peak read their dtypes from it, and the
tolerances are in units of its ``eps``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AMP_DTYPES", "DTYPES", "EPS", "FLOAT_DTYPES", "FULL_DTYPES", "GEMM_DTYPES", "HALF_DTYPES", "DType", "dtype_markdown",
    "dtype_table",
]


@dataclass(frozen=True)
class DType:
    """One dtype. ``libtorch``: libtorch's scalar-type name (R's ``as.character(dtype)``); ``profiler``: how the autograd
    profiler spells it (``c10::`` stripped), ``None`` where no GEMM runs in it; ``numpy``: the NumPy type of its bytes
    (bfloat16, which NumPy lacks, as its 16 bits); ``bits``: the signed integer of a float's width, whose order ULPs are
    counted in (``None``: not a float); ``eps``: the gap between 1 and the next number (floats); ``subnormal``: its
    smallest positive number (a number below half of it rounds to 0); ``amp``: autocast may compute in it (an AMP dtype of
    the spec)."""

    name: str
    libtorch: str
    numpy: str
    bits: str | None = None
    eps: float | None = None
    profiler: str | None = None
    amp: bool = False
    subnormal: float | None = None

    @property
    def is_float(self) -> bool:
        """A floating-point type: ULPs are counted in its format."""
        return self.bits is not None

    def to_json(self) -> dict[str, Any]:
        """What a script reads of it (the run spec's ``dtypes``)."""
        return {"libtorch": self.libtorch}


#: Every dtype a record, a trace point or a GEMM names. Epsilons: float32 has a 23-bit fraction (2^-23 ≈ 1.19e-7),
#: bfloat16 a 7-bit one (2^-7 ≈ 7.8e-3, float32's range with 3 significant digits), float16 a 10-bit one (2^-10 ≈ 9.8e-4,
#: with a narrow range that is why it needs a loss scaler); round-to-nearest makes each rounding at most half of this.
#: Smallest subnormals: 2^-(bias - 1 + fraction bits): float16's 2^-24 ≈ 5.96e-8 is what the AMP guide's pure float16
#: weights run into (an optimizer's eps of 1e-8 is 0 there); bfloat16 keeps float32's exponent (2^-133).
DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("float32", "Float", "<f4", "<i4", 2.0**-23, profiler="float", subnormal=2.0**-149),
    DType("float64", "Double", "<f8", "<i8", 2.0**-52, profiler="double", subnormal=2.0**-1074),
    DType("float16", "Half", "<f2", "<i2", 2.0**-10, profiler="Half", amp=True, subnormal=2.0**-24),
    DType("bfloat16", "BFloat16", "<u2", "<i2", 2.0**-7, profiler="BFloat16", amp=True, subnormal=2.0**-133),
    DType("int32", "Int", "<i4"),
    DType("int64", "Long", "<i8"),
    DType("uint8", "Byte", "u1"),
    DType("bool", "Bool", "?"),
)}
#: The spec's AMP dtypes (``amp_dtype``), bfloat16 first (CPU autocast's default).
AMP_DTYPES: tuple[str, ...] = ("bfloat16", "float16")
#: The floating-point dtypes.
FLOAT_DTYPES = frozenset(d.name for d in DTYPES.values() if d.is_float)
#: The dtypes a GEMM counts as half precision (floats of 16 bits).
HALF_DTYPES: tuple[str, ...] = tuple(d.name for d in DTYPES.values() if d.is_float and d.bits == "<i2")
#: The dtypes a GEMM counts as full precision (the other floats).
FULL_DTYPES: tuple[str, ...] = tuple(d.name for d in DTYPES.values() if d.is_float and d.name not in HALF_DTYPES)
#: The dtypes a mode's GEMMs may run in: float32, or an AMP dtype (what the peak is measured in).
GEMM_DTYPES: tuple[str, ...] = ("float32", *(d.name for d in DTYPES.values() if d.amp))
#: Each float dtype's epsilon by name.
EPS: dict[str, float] = {d.name: d.eps for d in DTYPES.values() if d.eps is not None}

if set(AMP_DTYPES) != {d.name for d in DTYPES.values() if d.amp}:
    raise ValueError("AMP_DTYPES must list the dtypes declared amp")


def dtype_table() -> dict[str, dict[str, Any]]:
    """The run spec's ``dtypes``: each dtype's names by its contract name."""
    return {name: d.to_json() for name, d in DTYPES.items()}


def dtype_markdown() -> str:
    """The dtype table in docs/contract.md (Markdown), from the declaration."""
    rows = ["| dtype | libtorch | bytes as (NumPy) | eps | AMP dtype |", "|---|---|---|---|---|"]
    rows += [f"| `{d.name}` | `{d.libtorch}` | `{d.numpy}` | {'' if d.eps is None else f'2^{round(math.log2(d.eps))}'} | "
             f"{'yes' if d.amp else ''} |" for d in DTYPES.values()]
    return "\n".join(rows)
