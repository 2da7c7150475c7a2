"""Efficiency of a cell against the hardware: FLOPs from the spec, achieved TFLOP/s, share of a measured peak.

The peak is measured by the harness in the same run, on the same device and in the cell's GEMM dtype
(:mod:`harness.worker_side.matmul_peak`, run in the Python worker): a cell then reads "x % of this machine's measured peak", not a datasheet
figure the machine may never reach. A share above 100 % would mean the peak did not bound the cell's
GEMMs (another kernel path, or a measurement the machine's noise pulled down): no share is given then,
and ``share_note`` says why, rather than a number that cannot be true.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract.modes import Mode
from harness.model.codec import Stored
from harness.workload.spec import WorkloadSpec

__all__ = ["Efficiency", "gemm_dtype", "step_flops", "workload_flops"]


def step_flops(spec: WorkloadSpec) -> float:
    """Floating-point operations of one training step, counted from the spec by its model's row
    (:attr:`harness.contract.models.Model.step_flops`: the GEMMs of the forward and backward passes; bias adds,
    activations, the loss and the update are O(batch·width) and left out, as ``torch.utils.flop_counter`` does)."""
    return spec.model_row.step_flops(spec.sizes)


def workload_flops(spec: WorkloadSpec) -> float:
    """Floating-point operations of the whole run (every step)."""
    return step_flops(spec) * spec.steps


def gemm_dtype(mode: Mode, spec: WorkloadSpec) -> str:
    """The dtype a mode's GEMMs run in under ``spec`` (:meth:`Mode.gemm_dtype`), hence the peak it is compared with."""
    return mode.gemm_dtype(str(spec.amp_dtype))


@dataclass(frozen=True)
class Efficiency(Stored):
    """A cell against the hardware (:func:`harness.model.cell_efficiency.cell_efficiency` says how each is found)."""

    flops: float
    step_flops: float
    seconds: float
    tflops: float | None
    gemm_dtype: str
    peak_tflops: float | None
    share_of_peak: float | None
    #: Why there is no share of the peak (schema 3 added it: an older result has none).
    share_note: str | None = None
