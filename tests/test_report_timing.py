"""The report's measurement sections and the figures: planted numbers must come out as written, misses with by how much."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from harness.figures import CV_MAX, OVERHEAD_MAX_SECONDS, check_figures
from harness.report import render_markdown
from tests.fake_results import add_times_vs_default as add_speedups
from tests.fake_results import build_python_result, steady_timing


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real Python-only tiny result, with known steady timings (see fake_results)."""
    return build_python_result(tmp_path_factory.mktemp("timing"))


def _line(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def test_timing_table_shows_rounds_spread_and_the_overhead_split(result: dict[str, Any]) -> None:
    """Each timed cell has one row: rounds, loop median and CV, call median, the harness's bridge with its share, the script's set-up."""
    text = render_markdown(result)
    cell = result["cells"][0]
    t = cell["timing"]
    row = _line(text.split("## Timing")[1], f"| `{cell['id']}` |")
    assert row.startswith(f"| `{cell['id']}` | 3 | {t['loop']['median']:.4g} | {t['loop']['iqr']:.2g} | {t['loop']['cv']:.1%} |")
    assert f"| 0.50 ({t['overhead_share']:.2%}) | 0.50 | 0 | yes |" in row
    assert "- python: script set-up 0.50 ms per call (its own cost), harness bridge 0.50 ms (medians over its cells); " \
           "clock: time.perf_counter." in text
    assert "Protocol: 2 untimed call(s) per cell" in text and "up to 3 timed rounds" in text


def test_efficiency_table_and_peaks(result: dict[str, Any]) -> None:
    """FLOPs, TFLOP/s, the GEMM dtype and the share of the measured peak are written per cell; the peaks line names them."""
    text = render_markdown(result)
    autocast = result["cells"][1]
    e = autocast["efficiency"]
    row = _line(text.split("## Efficiency")[1], f"| `{autocast['id']}` |")
    expected = f"| `{autocast['id']}` | {e['flops'] / 1e9:.4g} | {e['tflops']:.3g} | bfloat16 | {e['share_of_peak']:.1%} | not profiled |"
    assert row.startswith(expected)
    peak = result["peaks"]["by_dtype"]["bfloat16"]
    assert (f"bfloat16 {peak['tflops']:.3g} TFLOP/s (n={peak['n']}, best of {len(peak['samples_tflops'])}, "
            f"fastest layout {peak['layout']} of NT/NN/TN)") in text


def test_an_amp_cell_with_float32_gemms_is_marked(result: dict[str, Any]) -> None:
    """A profiled AMP cell whose GEMMs ran in float32 gets ⚠ in the table and its message below it."""
    planted = copy.deepcopy(result)
    cell = planted["cells"][1]
    cell["gemm_profile"] = {"half_share": 0.25}
    cell["gemm_problem"] = "claims AMP (autocast) but 75.0% of GEMM time ran in float32 (aten::mm ×5)"
    text = render_markdown(planted)
    assert "| 25% ⚠ |" in _line(text.split("## Efficiency")[1], f"| `{cell['id']}` |")
    assert f"- ⚠ `{cell['id']}`: claims AMP (autocast) but 75.0% of GEMM time ran in float32 (aten::mm ×5)" in text


def test_a_noisy_cell_gets_no_ratio_but_a_note(result: dict[str, Any]) -> None:
    """With a 20 % spread the speed table prints 'no ratio (1)' and note 1 says why, instead of a number."""
    noisy = copy.deepcopy(result)
    autocast = noisy["cells"][1]
    autocast["timing"] = steady_timing(autocast["record"]["seconds_total"], spread=0.2)
    add_speedups(noisy["cells"])
    text = render_markdown(noisy)
    row = _line(text.split("## Speed")[1], "| autocast |")
    assert "| no ratio (1) |" in row
    assert "1. spread too wide: CV 20.0%, 1.0% (> 5%); try --interleave or more --rounds" in text  # the cell's, then the default's


def test_figures_met_and_missed_by_how_much(result: dict[str, Any]) -> None:
    """Planted bridge time and spread past the targets come out as misses with the amount; a slow set-up is not charged."""
    planted = copy.deepcopy(result)
    slow, steady = planted["cells"][0], planted["cells"][1]
    slow["timing"] = steady_timing(0.6, spread=0.05, overhead=0.009, setup=0.001)
    steady["timing"] = steady_timing(0.6, spread=0.01, overhead=0.021, setup=0.020)  # 20 ms set-up, 1 ms bridge
    checks = {(c.figure, c.subject): c for c in check_figures(planted)}
    overhead = checks[("overhead per call", slow["id"])]
    assert not overhead.met and overhead.why is not None
    assert overhead.why.startswith(f"missed by {(0.008 - OVERHEAD_MAX_SECONDS) * 1e3:.2f} ms: the bridge (pipe, serialization, rpy2)")
    met = checks[("overhead per call", steady["id"])]
    assert met.met and met.measured.startswith("bridge 1.00 ms")
    assert "python script set-up 20.00 ms, the frontend's own cost" in met.measured
    spread = checks[("round-to-round spread", slow["id"])]
    assert not spread.met and spread.why is not None and spread.why.startswith(f"missed by {(0.05 - CV_MAX) * 100:.1f} points")
    assert checks[("round-to-round spread", steady["id"])].met
    matrix = checks[("whole tiny CPU matrix", "matrix")]
    assert matrix.met and matrix.measured.startswith(f"{planted['wall_seconds']:.1f} s (python start-up")
    text = render_markdown(planted)
    assert f"| overhead per call | `{slow['id']}` | bridge ≤ 5 ms per call (the script's own set-up not counted) |" in text
    assert "| **no** | missed by 3.00 ms" in text


def test_the_gpu_figure_applies_to_cuda_recipe_only(result: dict[str, Any]) -> None:
    """A CUDA recipe result is checked against the autocast share of peak, with the profile's GEMM share as the why."""
    gpu = copy.deepcopy(result)
    gpu["spec"] |= {"device": "cuda", "preset": "recipe", "amp_dtype": "float16", "epochs": 3, "num_batches": 50}
    autocast = gpu["cells"][1]
    autocast["record"]["device_name"] = "NVIDIA H100 80GB HBM3"
    autocast["efficiency"] |= {"tflops": 300.0, "peak_tflops": 750.0, "share_of_peak": 0.4, "seconds": 0.15}
    autocast["gemm_profile"] = {"half_share": 1.0, "gemm_seconds": 0.0006}
    checks = [c for c in check_figures(gpu) if c.figure == "GPU autocast efficiency"]
    assert len(checks) == 1 and not checks[0].met
    assert checks[0].measured == "40.0% (300.0 of 750.0 TFLOP/s)"
    assert checks[0].why == (
        "missed by 10.0 points; GEMM kernels are 60% of a step's time; the rest is elementwise work, "
        "the optimizer and launch gaps, which a peak matmul does not have"
    )
    assert all(c.figure != "GPU autocast efficiency" for c in check_figures(result))


def test_report_of_a_result_without_timing_still_renders(result: dict[str, Any], tmp_path: Path) -> None:
    """Cells that were never timed (errors) leave the timing table with a line saying so, not a crash."""
    untimed = copy.deepcopy(result)
    for cell in untimed["cells"]:
        cell["timing"] = None
    text = render_markdown(untimed)
    assert "| no cell was timed |" in text
