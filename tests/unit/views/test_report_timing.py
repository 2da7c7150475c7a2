"""The report's measurement sections on the golden result: planted numbers come out as written, misses with by how much."""

from __future__ import annotations

import dataclasses

from harness.model.efficiency import Efficiency
from harness.model.record import RunRecord
from harness.model.result import MatrixResult
from harness.model.verdicts import TargetCheck
from harness.views.timing_sections import frontend_costs
from tests.support import report_text
from tests.twins import by_mode, golden, replace_cells, steady_timing, with_record


def _line(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def _steady() -> MatrixResult:
    """The golden result with known, steady timings on its Python default and autocast cells."""
    python = by_mode(golden())
    return replace_cells(golden(), {
        python["default"].id: dataclasses.replace(python["default"], timing=steady_timing(0.1)),
        python["autocast"].id: dataclasses.replace(python["autocast"], timing=steady_timing(0.05)),
    })


def test_timing_table_shows_rounds_spread_and_the_overhead_split() -> None:
    """Each timed cell has one row: rounds, loop median and CV, call median, the harness's bridge with its share, the script's set-up."""
    result = _steady()
    text = report_text(result)
    cell = result.cells[0]
    t = cell.timing
    assert t is not None and t.loop.iqr is not None and t.loop.cv is not None
    row = _line(text.split("## Timing")[1], f"| `{cell.id}` |")
    assert row.startswith(f"| `{cell.id}` | 3 | {t.loop.median:.4g} | {t.loop.iqr:.2g} | {t.loop.cv:.1%} |")
    assert f"| 0.50 ({t.overhead_share:.2%}) | 0.50 | 0 | yes |" in row
    assert "Protocol: 1 untimed call(s) per cell" in text and "up to 5 timed rounds" in text and "interleaved (A, B, A, B …)" in text
    assert "glibc's malloc thresholds fixed in the workers (mmap 32 MiB, trim 64 MiB" in text  # harness.run.pool.ALLOCATOR_ENV


def test_each_timed_cell_shows_its_floor_cv_beside_its_cv_where_measured() -> None:
    """A cell timed with a noise floor shows the floor's CV after its own, in the report and the terminal table; one without
    shows —."""
    from rich.console import Console

    from harness.judge.assess import assess_result
    from harness.views.table import print_result

    python = by_mode(golden())
    floored = dataclasses.replace(python["default"], timing=steady_timing(0.1, spread=0.02, floor=0.013))
    result = replace_cells(golden(), {floored.id: floored})
    section = report_text(result).split("## Timing")[1]
    assert _line(section, f"| `{floored.id}` |").startswith(f"| `{floored.id}` | 3 | 0.1 | 0.002 | 2.0% | 1.3% | ")
    assert _line(section, f"| `{python['autocast'].id}` |").split(" | ")[5] == "—"
    assert "| CV | floor CV |" in section
    console = Console(record=True, width=240)
    print_result(assess_result(result), console)
    row = next(line for line in console.export_text().splitlines() if "· default " in line and "│ python " in line)
    assert [part.strip() for part in row.split("│")][10:12] == ["2.0%", "1.3%"]


def test_each_frontends_costs_are_medians_over_its_cells() -> None:
    """The set-up and bridge per frontend are medians over its timed cells, and the report says them with its clock."""
    result = golden()
    costs = frontend_costs(result.cells)
    timed = [c.timing for c in result.cells if c.frontend == "r" and c.timing]
    assert set(costs) == {"python", "r"} and len(timed) == 2
    assert costs["r"] == (sum(t.setup_seconds for t in timed) / 2, sum(t.bridge_seconds for t in timed) / 2)
    setup, bridge = costs["python"]
    assert (f"- python: script set-up {setup * 1e3:.2f} ms per call (its own cost), harness bridge {bridge * 1e3:.2f} ms "
            "(medians over its cells); clock: time.perf_counter.") in report_text(result)


def test_a_cell_whose_rounds_did_not_repeat_the_record_says_so() -> None:
    """A timed cell with two rounds whose losses differed from the record call's reads 'no (2 differ)'."""
    cell = golden().cells[0]
    assert cell.timing is not None
    odd = dataclasses.replace(cell, timing=dataclasses.replace(cell.timing, reproducible=False, differing_rounds=2))
    row = _line(report_text(replace_cells(golden(), {odd.id: odd})).split("## Timing")[1], f"| `{cell.id}` |")
    assert row.endswith("| no (2 differ) |")


def test_efficiency_table_and_peaks() -> None:
    """FLOPs, TFLOP/s, the GEMM dtype and the share of the measured peak are written per cell; the peaks line names them."""
    result = golden()
    text = report_text(result)
    autocast = by_mode(result)["autocast"]
    e = autocast.efficiency
    assert e is not None and e.tflops is not None and e.share_of_peak is not None
    row = _line(text.split("## Efficiency")[1], f"| `{autocast.id}` |")
    assert row.startswith(f"| `{autocast.id}` | {e.flops / 1e9:.4g} | {e.tflops:.3g} | bfloat16 | {e.share_of_peak:.1%} | not profiled |")
    peak = result.peaks.by_dtype["bfloat16"]
    assert peak is not None
    assert (f"bfloat16 {peak['tflops']:.3g} TFLOP/s (n={peak['n']}, best of {len(peak['samples_tflops'])}, "
            f"fastest layout {peak['layout']} of NT/NN/TN)") in text


def test_an_amp_cell_with_float32_gemms_is_marked() -> None:
    """A profiled AMP cell whose GEMMs ran in float32 gets ⚠ in the table and its message below it."""
    autocast = by_mode(golden())["autocast"]
    problem = "claims AMP (autocast) but 75.0% of GEMM time ran in float32 (aten::mm ×5)"
    planted = dataclasses.replace(autocast, gemm_profile={"half_share": 0.25}, gemm_problem=problem)
    text = report_text(replace_cells(golden(), {planted.id: planted}))
    assert "| 25% ⚠ |" in _line(text.split("## Efficiency")[1], f"| `{planted.id}` |")
    assert f"- ⚠ `{planted.id}`: {problem}" in text


def test_figures_met_and_missed_by_how_much() -> None:
    """Planted bridge time and spread past the targets come out as misses with the amount; a slow set-up is not charged."""
    from harness.judge.spread import CV_MAX
    from harness.judge.targets import OVERHEAD_MAX_SECONDS, check_targets

    python = by_mode(golden())
    slow = dataclasses.replace(python["default"], timing=steady_timing(0.6, spread=0.05, overhead=0.009, setup=0.001))
    steady = dataclasses.replace(python["autocast"], timing=steady_timing(0.6, spread=0.01, overhead=0.021, setup=0.020))
    planted = dataclasses.replace(replace_cells(golden(), {slow.id: slow, steady.id: steady}), wall_seconds=50.0)
    checks = {(c.name, c.subject): c for c in check_targets(planted)}
    overhead = checks[("overhead per call", slow.id)]
    assert not overhead.met and overhead.why is not None
    assert overhead.why.startswith(f"missed by {(0.008 - OVERHEAD_MAX_SECONDS) * 1e3:.2f} ms: the bridge (pipe, serialization, rpy2)")
    met = checks[("overhead per call", steady.id)]
    assert met.met and met.measured.startswith("bridge 1.00 ms")
    assert "python script set-up 20.00 ms, the frontend's own cost" in met.measured
    spread = checks[("round-to-round spread", slow.id)]
    assert not spread.met and spread.why is not None and spread.why.startswith(f"missed by {(0.05 - CV_MAX) * 100:.2f} points")
    assert checks[("round-to-round spread", steady.id)].met
    matrix = checks[("whole tiny CPU matrix", "matrix")]
    assert not matrix.met and matrix.measured.startswith("50.0 s, ")  # over 3 times a limit of python's start and the cells' rounds
    text = report_text(planted)
    overhead_section = text.split("### overhead per call: ")[1].split("### ")[0]
    assert "Asks: bridge ≤ 5 ms per call (the script's own set-up not counted)." in overhead_section
    assert f"| `{slow.id}` | bridge 8.00 ms" in overhead_section and "| **no**: missed by 3.00 ms" in overhead_section
    assert f"`{steady.id}`" in overhead_section.split("| missed on |")[0], "a met subject is named once, in the met line"


def test_the_tiny_matrix_figure_is_within_twice_its_limit_and_names_the_longest_phases_when_missed() -> None:
    """The bound is 3× the limit: the slowest worker's start to its first answer plus one round of every cell that ran,
    spread over the cores its frontends could use; any tiny matrix (the wider ones too); a miss names the longest phases.
    Planted: starts of 2.0 s and 0.8 s, and the golden cells' own runs."""
    from harness.judge.targets import TINY_MATRIX_LIMIT_FACTOR, check_targets
    from harness.model.phases import Phases

    result = golden()
    rounds = sum(c.own_run_seconds or 0.0 for c in result.cells if c.record is not None)
    workers = {"python": {"startup_seconds": 0.5, "ready_seconds": 0.8}, "r": {"startup_seconds": 0.3, "ready_seconds": 2.0}}
    phases = Phases((("worker starts", 2.0), ("record calls", 1.5), ("timed rounds", 3.0), ("judging", 0.1)))
    assert TINY_MATRIX_LIMIT_FACTOR == 2.0

    def matrix(wall: float, cpus: int | None = None, optimizer: str = "sgd") -> TargetCheck:
        environment = {**result.environment, "cpus": cpus} if cpus is not None else result.environment
        cells = tuple(dataclasses.replace(c, cell=dataclasses.replace(c.cell, optimizer=optimizer)) for c in result.cells)
        planted = dataclasses.replace(result, workers=workers, wall_seconds=wall, phases=phases, environment=environment,
                                      cells=cells)
        return next(c for c in check_targets(planted) if c.subject == "matrix")

    bound = TINY_MATRIX_LIMIT_FACTOR * (2.0 + rounds)  # a result that did not record its cores: one cell after another
    assert matrix(bound - 0.01).met and f"{bound:.1f} s" in matrix(bound).target and f"{2.0 + rounds:.2f} s" in matrix(bound).target
    missed = matrix(bound + 1.0)
    assert not missed.met and missed.why is not None
    assert missed.why.startswith("missed by 1.0 s: the longest phases were timed rounds 3.0 s, worker starts 2.0 s, record calls 1.5 s")
    # two frontends on 2 cores: the rounds spread over both, so the bound is lower
    spread = TINY_MATRIX_LIMIT_FACTOR * (2.0 + rounds / 2)
    assert matrix(spread - 0.01, cpus=2).met and not matrix(spread + 0.01, cpus=2).met
    assert "over 2 cores" in matrix(spread, cpus=2).target and matrix(spread, cpus=1).met is (spread <= bound)
    assert matrix(2 * (2.0 + rounds / 2), cpus=2).measured.startswith(f"{2 * (2.0 + rounds / 2):.1f} s, 2.0× its limit")
    # any tiny matrix: the wider ones are held to the same bound
    assert matrix(spread + 0.01, cpus=2, optimizer="adam").name == "whole tiny CPU matrix"
    # a result without phases (before schema 10) still says by how much
    old = next(c for c in check_targets(dataclasses.replace(result, workers=workers, wall_seconds=bound + 2.0)) if c.subject == "matrix")
    assert old.why is not None and old.why.startswith("missed by 2.0 s: no phases recorded")


def test_the_gpu_figure_applies_to_cuda_recipe_only() -> None:
    """A CUDA recipe result is checked against the autocast share of peak, with the profile's GEMM share as the why."""
    from harness.judge.targets import check_targets

    spec = dataclasses.replace(golden().spec, device="cuda", preset="recipe", amp_dtype="float16", epochs=3, num_batches=50)
    autocast = by_mode(golden())["autocast"]
    assert autocast.efficiency is not None and isinstance(autocast.record, RunRecord)
    efficiency = dataclasses.replace(autocast.efficiency, tflops=300.0, peak_tflops=750.0, share_of_peak=0.4, seconds=0.15)
    planted = dataclasses.replace(with_record(autocast, device_name="NVIDIA H100 80GB HBM3"), efficiency=efficiency,
                                  gemm_profile={"half_share": 1.0, "gemm_seconds": 0.0006})
    gpu = dataclasses.replace(replace_cells(golden(), {planted.id: planted}), spec=spec)
    checks = [c for c in check_targets(gpu) if c.name == "GPU autocast efficiency"]
    assert len(checks) == 1 and not checks[0].met
    assert checks[0].measured == "40.0% (300.0 of 750.0 TFLOP/s)"
    assert checks[0].why == (
        "missed by 10.0 points; GEMM kernels are 60% of a step's time; the rest is elementwise work, "
        "the optimizer and launch gaps, which a peak matmul does not have"
    )
    assert "H100" in checks[0].target
    assert all(c.name != "GPU autocast efficiency" for c in check_targets(golden()))


def test_a_cuda_cell_without_a_measured_peak_misses_the_gpu_figure_saying_why() -> None:
    """With no share of peak (the note says why), the GPU figure is missed with that note as the reason."""
    from harness.judge.targets import check_targets

    spec = dataclasses.replace(golden().spec, device="cuda", preset="recipe")
    autocast = by_mode(golden())["autocast"]
    note = "measured share above 100 %: the peak is too low"
    efficiency = Efficiency(1.0, 1.0, 1.0, None, "bfloat16", None, None, note)
    gpu = dataclasses.replace(replace_cells(golden(), {autocast.id: dataclasses.replace(autocast, efficiency=efficiency)}), spec=spec)
    check = next(c for c in check_targets(gpu) if c.name == "GPU autocast efficiency")
    assert (check.met, check.measured, check.why) == (False, "no share of peak", note)


def test_report_of_a_result_without_timing_still_renders() -> None:
    """Cells that were never timed (errors) leave the timing table with a line saying so, not a crash."""
    untimed = dataclasses.replace(golden(), cells=tuple(dataclasses.replace(c, timing=None) for c in golden().cells))
    text = report_text(untimed)
    assert "| no cell was timed |" in text
    assert "No performance target applies" not in text and "### whole tiny CPU matrix: met on 1 of 1" in text


def test_the_phases_are_a_line_with_v_and_a_section_of_the_report() -> None:
    """Each phase with its seconds in the run's order, what they add up to and the wall time; the report adds shares and the
    limit; a result without phases says so rather than showing an empty table."""
    from harness.model.phases import Phases
    from harness.views.timing_sections import phases_line, phases_section

    phases = Phases((("worker starts", 2.0), ("record calls", 1.0), ("writing", 1.0)))
    result = dataclasses.replace(golden(), phases=phases, wall_seconds=4.5)
    assert phases_line(result) == ("phases: worker starts 2.00 s · record calls 1.00 s · writing 1.00 s "
                                   "(together 4.00 s; matrix wall 4.50 s)")
    section = "\n".join(phases_section(result))
    assert "| worker starts | 2.00 | 50% |" in section and "| writing | 1.00 | 25% |" in section
    limit, _, _ = result.limit()
    assert f"Its limit here, the least any run could take: {limit:.2f} s" in section
    assert "## Where the time went" in report_text(result)
    assert phases_line(golden()) is None and "No phases recorded" in "\n".join(phases_section(golden()))
