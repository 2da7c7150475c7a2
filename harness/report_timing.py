"""The report's measurement sections: timing protocol and rounds, efficiency against the hardware, figures.

Kept apart from :mod:`harness.report` (parity) because these read the measurements, not the verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.figures import check_figures
from harness.text import cell_text, mib, num
from harness.timing import frontend_costs

__all__ = ["efficiency_section", "figures_section", "timing_section"]


def timing_section(result: Mapping[str, Any]) -> list[str]:
    """How cells were timed, then each cell's rounds: loop spread, call time and the overhead split."""
    protocol = result.get("protocol") or {}
    order = "interleaved (A, B, A, B …)" if protocol.get("interleave") else "back to back, cell after cell"
    lines = [
        "## Timing", "",
        f"Protocol: {protocol.get('warmup_rounds')} untimed call(s) per cell (the first writes the weights and the parity "
        f"record), then up to {protocol.get('rounds')} timed rounds (no more once a cell's rounds took "
        f"{num(protocol.get('max_seconds'), 'g')} s), {order}. {protocol.get('gc')}. Threads {result['spec']['threads']} in "
        "both frontends (set by the scripts, and OMP_NUM_THREADS in the workers); on CUDA the device is synchronised "
        "before each read of the clock.", "",
        "| cell | rounds | loop median s | IQR s | CV | call median s | harness overhead ms (% of call) | script set-up ms | GC s "
        "| rounds = record |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for cell in result["cells"]:
        t = cell.get("timing")
        if not t:
            continue
        loop, call = t["loop"], t["call"]
        lines.append(
            f"| `{cell['id']}` | {t['rounds']} | {loop['median']:.4g} | {num(loop['iqr'], '.2g')} | {num(loop['cv'], '.1%')} | "
            f"{call['median']:.4g} | {t['overhead_seconds'] * 1e3:.2f} ({t['overhead_share']:.2%}) | {t['setup_seconds'] * 1e3:.2f} | "
            f"{t['gc_seconds']:.3g} | {_same_losses(t)} |"
        )
    if len(lines) == 6:
        lines.append("| no cell was timed | | | | | | | | | |")
    costs = frontend_costs(result["cells"])
    clocks = {c["frontend"]: (c.get("record") or {}).get("clock") for c in result["cells"] if c.get("record")}
    return [
        *lines, "",
        "Loop: the script's own clock around its training loop; call: the harness's clock around the call, as a benchmark "
        "round sees it. Harness overhead = call − workload: the bridge (pipe, serialization, rpy2), the harness's own cost. "
        "Script set-up = workload − loop: building the model and optimizer in the frontend, each call; the frontend's own "
        "cost, not the harness's. CV: standard deviation ÷ mean of the loop times (from 3 rounds).", "",
        *[f"- {name}: script set-up {c['setup_seconds'] * 1e3:.2f} ms per call (its own cost), harness bridge "
          f"{c['bridge_seconds'] * 1e3:.2f} ms (medians over its cells); clock: {clocks.get(name) or 'not recorded'}."
          for name, c in costs.items()],
        *([""] if costs else []),
    ]


def _same_losses(timing: Mapping[str, Any]) -> str:
    return "yes" if timing["reproducible"] else f"no ({timing['differing_rounds']} differ)"


def efficiency_section(result: Mapping[str, Any]) -> list[str]:
    """FLOPs, achieved TFLOP/s, share of the measured peak, GEMM precision and peak memory per cell."""
    peaks = result.get("peaks") or {}
    measured = [
        f"{dtype} {p['tflops']:.3g} TFLOP/s (n={p['n']}, best of {len(p['samples_tflops'])}"
        + (f", fastest layout {p['layout']} of {'/'.join(p['layouts_tflops'])})" if p.get("layout") else ")")
        for dtype, p in (peaks.get("by_dtype") or {}).items() if p
    ]
    peak_line = (
        f"Measured matmul peaks on {peaks.get('device')} with {peaks.get('threads')} thread(s), in this run: {'; '.join(measured)}."
        if measured else f"No matmul peak was measured: {cell_text(peaks.get('reason'))}."
    )
    lines = [
        "## Efficiency", "", peak_line, "",
        "| cell | GFLOP per run | TFLOP/s | GEMM dtype | % of measured peak | half-precision GEMM time | peak memory "
        "| memory measured as |",
        "|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for cell in result["cells"]:
        e = cell.get("efficiency")
        if cell["status"] != "ok" or not e:
            continue
        profile = cell.get("gemm_profile") or {}
        half = num(profile.get("half_share"), ".0%") if "half_share" in profile else "not profiled"
        if cell.get("gemm_problem"):
            half += " ⚠"
        memory = cell.get("memory") or {}
        if memory.get("cuda_peak_bytes") is not None:
            peak_memory, how = mib(memory["cuda_peak_bytes"]), "CUDA peak allocated by tensors"
        else:
            scope = "this call" if memory.get("scope") == "call" else "the worker's life (high-water mark)"
            peak_memory = mib(memory.get("peak_rss_bytes"))
            how = f"worker peak RSS over {scope} ({mib(memory.get('rss_before_bytes'))} held before it)"
        lines.append(
            f"| `{cell['id']}` | {e['flops'] / 1e9:.4g} | {num(e['tflops'], '.3g')} | {e['gemm_dtype']} | "
            f"{num(e['share_of_peak'], '.1%')} | {half} | {peak_memory} | {how} |"
        )
    problems = [f"- ⚠ `{c['id']}`: {cell_text(c['gemm_problem'])}" for c in result["cells"] if c.get("gemm_problem")]
    problems += [
        f"- `{c['id']}`: {cell_text(c['efficiency']['share_note'])}"
        for c in result["cells"] if (c.get("efficiency") or {}).get("share_note")
    ]
    return [
        *lines, "", *problems, *([""] if problems else []),
        "FLOPs: forward, weight-gradient and input-gradient GEMMs of every Linear layer (the first needs no input gradient), "
        "from the spec. TFLOP/s over the median timed loop. Half-precision GEMM time: torch.profiler, one step, Python "
        "cells (on CUDA by default, `--profile` elsewhere); ⚠ marks an AMP cell that ran float32 GEMMs.", "",
    ]


def figures_section(result: Mapping[str, Any]) -> list[str]:
    """The README's figures that apply to this result: met, or missed by how much and why."""
    checks = check_figures(result)
    lines = ["## Figures", ""]
    if not checks:
        return [*lines, "None of the README's figures applies to this preset and device.", ""]
    lines += ["| figure | subject | target | measured | met | why missed |", "|---|---|---|---|---|---|"]
    for c in checks:
        lines.append(
            f"| {c.figure} | `{c.subject}` | {cell_text(c.target)} | {cell_text(c.measured)} | {'yes' if c.met else '**no**'} | "
            f"{cell_text(c.why)} |"
        )
    return [*lines, ""]
