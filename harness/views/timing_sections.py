"""The report's measurement sections: timing protocol and rounds, efficiency against the hardware, performance targets.

Kept apart from :mod:`harness.views.report` (parity) because these read the measurements, not the verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.model.result import CellResult, MatrixResult, Memory, TargetCheck
from harness.model.timing import MALLOC_THRESHOLDS, MIN_ROUNDS_FOR_SPREAD, Timing
from harness.views.formatting import cell_text, mib, num

__all__ = [
    "NO_BF16_NOTE", "bf16_note", "efficiency_section", "frontend_costs", "limit_line", "phases_line", "phases_section",
    "targets_section", "timing_section",
]


def frontend_costs(cells: Sequence[CellResult]) -> dict[str, tuple[float, float]]:
    """Per frontend, the median over its timed cells of the script's set-up and of the bridge, in seconds.

    The set-up is the frontend's own cost per call (R torch builds its modules in R), shown beside the
    harness's bridge so neither is mistaken for the other.
    """
    timings: dict[str, list[Timing]] = {}
    for cell in cells:
        if cell.timing:
            timings.setdefault(cell.frontend, []).append(cell.timing)
    return {
        name: (float(np.median([t.setup_seconds for t in ts])), float(np.median([t.judged_bridge_seconds for t in ts])))
        for name, ts in timings.items()
    }


def _bridge(t: Timing) -> str:
    """The harness's overhead cell: the bridge and its share of the call; where the side-by-side reading was read again with
    the machine to itself, that one, with the side-by-side one beside it."""
    judged = t.judged_bridge_seconds
    again = "" if t.bridge_alone_seconds is None else f" alone; {t.bridge_seconds * 1e3:.2f} side by side"
    return f"{judged * 1e3:.2f} ({judged / t.call.median:.2%}){again}"


def timing_section(result: MatrixResult) -> list[str]:
    """How cells were timed, then each cell's rounds: loop spread, call time and the overhead split."""
    protocol = result.protocol
    order = "interleaved (A, B, A, B …)" if protocol.interleave else "back to back, cell after cell"
    lines = [
        "## Timing", "",
        f"Protocol: {protocol.warmup_rounds} untimed call(s) per cell (the first writes the weights and the parity "
        f"record), then up to {protocol.rounds} timed rounds (no more once a cell's rounds took "
        f"{num(protocol.max_seconds, 'g')} s), {order}. {protocol.to_json()['gc']}. Threads {result.spec.threads} in "
        "both frontends (set by the scripts, and OMP_NUM_THREADS in the workers); glibc's malloc thresholds fixed in "
        f"the workers (mmap {MALLOC_THRESHOLDS['MALLOC_MMAP_THRESHOLD_'] >> 20} MiB, trim "
        f"{MALLOC_THRESHOLDS['MALLOC_TRIM_THRESHOLD_'] >> 20} MiB, unless the user set them); on CUDA the device is "
        "synchronised before each read of the clock.", "",
        "| cell | rounds | loop median s | IQR s | CV | floor CV | call median s | harness overhead ms (% of call) "
        "| script set-up ms | GC s | rounds = record |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for cell in result.cells:
        t = cell.timing
        if not t:
            continue
        loop, call = t.loop, t.call
        lines.append(
            f"| `{cell.id}` | {t.rounds} | {loop.median:.4g} | {num(loop.iqr, '.2g')} | {num(loop.cv, '.1%')} | "
            f"{num(t.floor and t.floor.cv, '.1%')} | {call.median:.4g} | {_bridge(t)} | "
            f"{t.setup_seconds * 1e3:.2f} | {t.gc_seconds:.3g} | {_same_losses(t)} |"
        )
    if len(lines) == 6:
        lines.append("| no cell was timed | | | | | | | | | | |")
    costs = frontend_costs(result.cells)
    clocks = {c.frontend: c.record.clock for c in result.cells if c.record}
    note = bf16_note(result.environment.get("bf16_instructions"))
    return [
        *lines, "",
        *([f"Note: {note}.", ""] if note else []),
        "Loop: the script's own clock around its training loop; call: the harness's clock around the call, as a benchmark "
        "round sees it. Harness overhead = call − workload: the bridge (pipe, serialization, rpy2), the harness's own cost; "
        "side by side, one over its bound is read again in one more round with the machine to itself (\"alone\"). "
        "Script set-up = workload − loop: building the model and optimizer in the frontend, each call; the frontend's own "
        f"cost, not the harness's. CV: standard deviation ÷ mean of the loop times (— below {MIN_ROUNDS_FOR_SPREAD} timed rounds: "
        "too few for a spread). Floor CV: the same of a fixed loop of matrix products timed in the cell's worker after each of "
        "its rounds, the machine's own noise at those moments (— where not measured: cells the spread target does not check, "
        "older results).", "",
        *[f"- {name}: script set-up {setup * 1e3:.2f} ms per call (its own cost), harness bridge "
          f"{bridge * 1e3:.2f} ms (medians over its cells); clock: {clocks.get(name) or 'not recorded'}."
          for name, (setup, bridge) in costs.items()],
        *([""] if costs else []),
    ]


#: What a reader of a CPU without bfloat16 instructions is told, once in the run's header and beside the speed table.
NO_BF16_NOTE = ("this CPU lacks bfloat16 instructions (no avx512_bf16 or amx_bf16 in /proc/cpuinfo, or oneDNN capped below "
                "them by ONEDNN_MAX_CPU_ISA): its bfloat16 matrix "
                "products are emulated, slower than float32, so the seeds' AMP speed-ups cannot appear here; their absence "
                "is the CPU's, not the harness's")


def bf16_note(has_bf16: object) -> str | None:
    """:data:`NO_BF16_NOTE` where the CPU is known to lack bfloat16 instructions (``False``), else ``None`` (it has them,
    or it is not known: a result from before issue 38, a CPU that lists no flags)."""
    return NO_BF16_NOTE if has_bf16 is False else None


def limit_line(result: MatrixResult) -> str | None:
    """How far the run's wall time is from its limit (:meth:`MatrixResult.limit`), as measured in that run; ``None`` for
    a merged result (its matrices ran apart) or one in which no cell ran."""
    if result.sources or not any(c.record is not None for c in result.cells):
        return None
    limit, start, rounds = result.limit()
    if limit <= 0:
        return None
    lanes = result.lanes
    spread = f" over {lanes} cores" if lanes > 1 else ""
    return (f"matrix: {result.wall_seconds:.1f} s wall, {result.wall_seconds / limit:.1f}× its limit here of {limit:.1f} s "
            f"(the slowest worker's start {start:.1f} s + one untraced run of every cell and reconciled run{spread} {rounds:.1f} s)")


def phases_line(result: MatrixResult) -> str | None:
    """One line of where the run's time went, phase by phase in the order it went through them (``run -v``); ``None``
    where no phases were recorded (a result before schema 10, a merged one)."""
    phases = result.phases
    if not phases.seconds:
        return None
    parts = " · ".join(f"{name} {seconds:.2f} s" for name, seconds in phases.seconds)
    return f"phases: {parts} (together {phases.total:.2f} s; matrix wall {result.wall_seconds:.2f} s)"


def phases_section(result: MatrixResult) -> list[str]:
    """Where the run's time went (:mod:`harness.model.phases`), and the least it could have taken here."""
    phases = result.phases
    if not phases.seconds:
        return ["## Where the time went", "", "No phases recorded (a result before schema 10, or a merged one).", ""]
    limit, start, rounds = result.limit()
    lines = ["## Where the time went", "", "| phase | seconds | share |", "|---|---:|---:|"]
    lines += [f"| {name} | {seconds:.2f} | {seconds / max(phases.total, 1e-9):.0%} |" for name, seconds in phases.seconds]
    return [
        *lines, "",
        f"Matrix wall time {result.wall_seconds:.2f} s; the phases account for {phases.total:.2f} s (writing comes after the "
        "result is made, and is in the report, not the result file). Its limit here, the least any run could take: "
        f"{limit:.2f} s (the slowest worker's start {start:.2f} s, the workers starting side by side, and one round of every "
        f"cell {rounds:.2f} s).", "",
    ]


def _same_losses(timing: Timing) -> str:
    return "yes" if timing.reproducible else f"no ({timing.differing_rounds} differ)"


def efficiency_section(result: MatrixResult) -> list[str]:
    """FLOPs, achieved TFLOP/s, share of the measured peak, GEMM precision and peak memory per cell."""
    peaks = result.peaks
    measured = [
        f"{dtype} {p['tflops']:.3g} TFLOP/s (n={p['n']}, best of {len(p['samples_tflops'])}"
        + (f", fastest layout {p['layout']} of {'/'.join(p['layouts_tflops'])})" if p.get("layout") else ")")
        for dtype, p in peaks.by_dtype.items() if p
    ]
    peak_line = (
        f"Measured matmul peaks on {peaks.device} with {peaks.threads} thread(s), in this run: {'; '.join(measured)}."
        if measured else f"No matmul peak was measured: {cell_text(peaks.reason)}."
    )
    lines = [
        "## Efficiency", "", peak_line, "",
        "| cell | GFLOP per run | TFLOP/s | GEMM dtype | % of measured peak | half-precision GEMM time | peak memory "
        "| memory measured as |",
        "|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for cell in result.cells:
        e = cell.efficiency
        if not cell.ok or not e:
            continue
        profile = cell.gemm_profile or {}
        half = num(profile.get("half_share"), ".0%") if "half_share" in profile else "not profiled"
        if cell.gemm_problem:
            half += " ⚠"
        lines.append(
            f"| `{cell.id}` | {e.flops / 1e9:.4g} | {num(e.tflops, '.3g')} | {e.gemm_dtype} | "
            f"{num(e.share_of_peak, '.1%')} | {half} | {_memory(cell.memory)} |"
        )
    problems = [f"- ⚠ `{c.id}`: {cell_text(c.gemm_problem)}" for c in result.cells if c.gemm_problem]
    problems += [f"- `{c.id}`: {cell_text(c.efficiency.share_note)}" for c in result.cells if c.efficiency and c.efficiency.share_note]
    return [
        *lines, "", *problems, *([""] if problems else []),
        "FLOPs: forward, weight-gradient and input-gradient GEMMs of every Linear layer (the first needs no input gradient), "
        "from the spec. TFLOP/s over the median timed loop. Half-precision GEMM time: torch.profiler, one step, Python "
        "cells (on CUDA by default, `--profile` elsewhere); ⚠ marks an AMP cell that ran float32 GEMMs.", "",
    ]


def _memory(memory: Memory | None) -> str:
    """The peak-memory cells of a row: the peak, and what it measured."""
    memory = memory or Memory()
    if memory.cuda_peak_bytes is not None:
        return f"{mib(memory.cuda_peak_bytes)} | CUDA peak allocated by tensors"
    scope = "this call" if memory.scope == "call" else "the worker's life (high-water mark)"
    return f"{mib(memory.peak_rss_bytes)} | worker peak RSS over {scope} ({mib(memory.rss_before_bytes)} held before it)"


def _met_text(check: TargetCheck) -> str:
    """The "met" column: a miss the run's floor pins on the machine says so (harness.judge.spread)."""
    if check.met:
        return "yes"
    return "**no** (the machine's noise)" if check.machine_noise else "**no**"


def targets_section(result: MatrixResult) -> list[str]:
    """The performance targets that apply to this result, each once with what it asks and on how many subjects it was
    met, then every miss (its subject, what was measured, why). One row per check repeated each target's text: 1,340 rows,
    0.3 MB of the main job's report."""
    checks = result.targets
    lines = ["## Performance targets", ""]
    if not checks:
        return [*lines, "No performance target applies to this preset and device.", ""]
    groups: dict[tuple[str, str], list[TargetCheck]] = {}
    for check in checks:
        groups.setdefault((check.name, check.target), []).append(check)
    for (name, target), group in groups.items():
        missed = [c for c in group if not c.met]
        met = [c for c in group if c.met]
        lines += [f"### {name}: met on {len(met)} of {len(group)}", "", f"Asks: {cell_text(target)}.", ""]
        if len(met) == 1:
            lines += [f"Met on `{met[0].subject}`: {cell_text(met[0].measured)}.", ""]
        elif met:
            lines += [f"Met on {', '.join(f'`{c.subject}`' for c in met)} (each cell's measurements: the timing table).", ""]
        if missed:
            lines += ["| missed on | measured | why |", "|---|---|---|"]
            lines += [f"| `{c.subject}` | {cell_text(c.measured)} | {_met_text(c)}: {cell_text(c.why)} |" for c in missed]
            lines.append("")
    return lines
