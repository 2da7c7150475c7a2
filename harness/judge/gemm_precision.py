"""The parent's reading of a GEMM profile (:mod:`harness.worker_side.gemm_profiler` measures it in the worker).

Plain data in, plain data out: a cell whose mode claims AMP but whose GEMMs ran in float32 gets a
one-line problem, which the result keeps and shows as a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.contract.dtypes import FULL_DTYPES
from harness.contract.modes import Mode

__all__ = ["amp_gemm_problem"]

#: The dtypes that mean a GEMM did not run in half precision.
_FULL = FULL_DTYPES


def amp_gemm_problem(mode: Mode, profile: Mapping[str, Any]) -> str | None:
    """One line when a mode that claims AMP (:attr:`Mode.claims_amp`) ran GEMMs in float32/float64; ``None`` when clean
    or when the mode claims no AMP."""
    if not mode.claims_amp:
        return None
    full_ops = [op for op in profile.get("ops", []) if op.get("dtype") in _FULL]
    if not full_ops:
        return None
    by_dtype = profile.get("seconds_by_dtype", {})
    gemm_seconds = float(profile.get("gemm_seconds") or 0.0)
    full_seconds = sum(float(by_dtype.get(d, 0.0)) for d in _FULL)
    share = f"{100 * full_seconds / gemm_seconds:.1f}%" if gemm_seconds > 0 else "some"
    dtypes = "/".join(d for d in _FULL if any(op["dtype"] == d for op in full_ops))
    listing = ", ".join(f"{op['name']} ×{op['count']}" for op in full_ops)
    return f"claims AMP ({mode.name}) but {share} of GEMM time ran in {dtypes} ({listing})"
