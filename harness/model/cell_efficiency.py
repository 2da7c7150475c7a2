"""A cell's efficiency, from its result and the run's measured peaks (:mod:`harness.model.efficiency` says what each
number is). Apart from :mod:`harness.model.efficiency` because it reads a :class:`~harness.model.result.CellResult`,
which holds an :class:`~harness.model.efficiency.Efficiency`: so neither module imports the other's importer.
"""

from __future__ import annotations

from harness.model.efficiency import Efficiency, gemm_dtype, step_flops, workload_flops
from harness.model.result import CellResult, Peaks
from harness.workload.spec import WorkloadSpec

__all__ = ["cell_efficiency"]


def cell_efficiency(cell: CellResult, spec: WorkloadSpec, peaks: Peaks) -> Efficiency | None:
    """FLOPs, achieved TFLOP/s (over the median timed loop) and the share of the measured peak.

    ``peaks.by_dtype`` maps a dtype to :func:`harness.worker_side.matmul_peak.measure_matmul_peak`'s result (or to nothing).
    ``None`` for a cell that produced no record.
    """
    if cell.record is None:
        return None
    seconds = (cell.timing.loop.median if cell.timing is not None else None) or cell.record.seconds_total
    flops = workload_flops(spec)
    tflops = flops / seconds / 1e12 if seconds > 0 else None
    dtype = gemm_dtype(cell.cell.properties, spec)
    peak = peaks.by_dtype.get(dtype) or {}
    peak_tflops = peak.get("tflops")
    share = tflops / peak_tflops if tflops is not None and peak_tflops else None
    note = None
    if share is not None and share > 1:
        note = (
            f"no share of peak: the cell reached {tflops:.3g} TFLOP/s, {share:.0%} of the {peak_tflops:.3g} TFLOP/s measured "
            f"for {dtype} square {peak.get('n')}³ matmuls, so that measurement does not bound this cell's GEMMs here "
            "(another kernel path, or the machine was busier while the peak was measured)"
        )
        share = None
    return Efficiency(
        flops=flops, step_flops=step_flops(spec), seconds=seconds, tflops=tflops,
        gemm_dtype=dtype, peak_tflops=peak_tflops, share_of_peak=share, share_note=note,
    )
