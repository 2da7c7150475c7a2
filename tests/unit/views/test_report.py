"""The report on the golden result: report.md with the result's own numbers, and PNG plots that open (no torch)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib.image
import pytest
from rich.console import Console

from harness.errors import ResultError
from harness.judge.assess import assess_result
from harness.judge.pairs import compare_result
from harness.model.result import CellResult, MatrixResult, ReferenceSummary
from harness.views.page import PAGE_FILE
from harness.views.plots import timing_samples
from harness.views.report import PLOT_FILES, REPORT_FILE, render_markdown, write_report
from harness.views.summary import SUMMARY_FILE
from harness.views.table import print_result
from tests.support import report_text
from tests.twins import by_mode, golden, replace_cells, split_losses, steady_timing, twin_cell, with_status

_R_MISSING = 'the R package torch is not installed: in R, install.packages("torch"); torch::install_torch()'


@pytest.fixture(scope="module")
def r_skipped() -> MatrixResult:
    """The golden result as the runner writes it on a machine without R torch: every R cell skipped with the reason."""
    result = golden()
    return replace_cells(result, {c.id: with_status(c, "skipped", _R_MISSING) for c in result.cells if c.frontend == "r"})


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> MatrixResult:
    """Both frontends: one identical pair (real), one diverged, one identical on another libtorch, one unsupported (real)."""
    folder = tmp_path_factory.mktemp("both")
    result = golden()
    python = by_mode(result)
    autocast, scaler = python["autocast"], python["autocast_scaler"]
    assert autocast.record is not None
    twins = [twin_cell(autocast, folder, losses=split_losses(autocast.record, 5)), twin_cell(scaler, folder, libtorch_version="2.5.1")]
    warning = "libtorch versions differ (python 2.13.0, r 2.5.1): bitwise parity is not expected"
    return dataclasses.replace(replace_cells(result, {t.id: t for t in twins}), warnings=(warning,))


def _written(result: MatrixResult, out: Path) -> tuple[list[Path], str]:
    """The report of ``result`` judged, as the CLI writes it (a view reads a judged result)."""
    paths = write_report(assess_result(result), out)
    return paths, (out / REPORT_FILE).read_text(encoding="utf-8")


def _line(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


@pytest.mark.parametrize("which", ["r_skipped", "both"])
def test_report_and_every_plot_are_written_and_open(which: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """write_report returns report.md, the page, the summary and three PNGs that exist and decode to images of a readable size."""
    paths, _ = _written(request.getfixturevalue(which), tmp_path / "out")
    assert [p.name for p in paths] == [REPORT_FILE, PAGE_FILE, SUMMARY_FILE, *PLOT_FILES]
    for path in paths[3:]:
        image = matplotlib.image.imread(path)
        assert path.stat().st_size > 10_000
        assert image.shape[0] > 200 and image.shape[1] > 600 and image.shape[2] in (3, 4)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in paths), "no temporary files left"


def test_report_lists_every_cell_with_status_and_final_loss(both: MatrixResult) -> None:
    """Each cell id appears in a table row with its status and its final loss formatted as recorded."""
    text = report_text(both)
    for cell in both.cells:
        row = _line(text, f"| `{cell.id}` | {cell.status} |")
        if cell.record:
            assert cell.reference_distance is not None
            assert f"| {cell.record.final_loss:.7g} |" in row
            assert f"{cell.reference_distance.final_weights_rel_error:.2e}" in row
        else:
            assert cell.reason and cell.reason.split("\n")[0].strip() in row


def test_report_lists_every_pair_with_its_verdict(both: MatrixResult) -> None:
    """Each pair has a tracker row with its verdict and cause; a pair that needs a look (not identical, not a side that did
    not run) a details section with the full explanation."""
    text = report_text(both)
    verdicts = {v.pair: v for v in compare_result(both)}
    assert [v.verdict for v in verdicts.values()] == ["identical", "diverged", "identical", "unsupported"]
    for pair, verdict in verdicts.items():
        assert f"| `{pair}` | python vs r | **{verdict.verdict}** | {verdict.cause.replace('|', chr(92) + '|')} |" in text
        assert (f"### {pair} (python vs r): {verdict.verdict}" in text) is (verdict.verdict == "diverged")
        assert (verdict.explain() in text) is (verdict.verdict == "diverged")
    assert "losses split at step 5" in text
    assert "- Pairs: 4 (2 identical, 1 diverged, 1 unsupported)." in text
    assert "- Judged `strict`: a pair expected bitwise identical (one libtorch, CPU) that is not is diverged." in text


def test_report_names_a_judging_policy_other_than_the_runs(both: MatrixResult) -> None:
    """A report asked for tolerance-only judging of a strict result says so in its summary."""
    text = report_text(both, judging="tolerance_only")
    assert "- Judged `tolerance_only` (--tolerance-only): every pair by the tolerance, bitwise identity only noted." in text
    assert "`strict`" not in text.split("## Warnings")[0]


def test_report_says_when_r_was_skipped_and_why(r_skipped: MatrixResult) -> None:
    """With R torch absent the summary says R was not run, with the runner's reason, and every pair is skipped."""
    text = report_text(r_skipped)
    assert f"- **r was not run** (every r cell skipped): {_R_MISSING}" in text
    assert "- Pairs: 4 (4 skipped)." in text
    assert text.count("| python vs r | **skipped** |") == 4


def test_speed_table_shows_seconds_and_the_stored_time_vs_default(both: MatrixResult) -> None:
    """The speed table shows each frontend's seconds, the stored time ÷ default as is, and R ÷ Python per mode."""
    python = by_mode(both)
    default = dataclasses.replace(python["default"], timing=steady_timing(0.1))
    autocast = dataclasses.replace(python["autocast"], timing=steady_timing(0.05), time_vs_default=0.55)
    r_autocast = dataclasses.replace(by_mode(both, "r")["autocast"], timing=steady_timing(0.05), time_vs_default=0.55)
    text = report_text(replace_cells(both, {c.id: c for c in (default, autocast, r_autocast)}))
    row = _line(text.split("## Speed")[1], "| autocast |")
    assert autocast.timing is not None
    assert row.startswith(f"| autocast | {autocast.timing.loop.median:.4g} | 0.55 |"), "cell ÷ default, as stored, never inverted"
    assert row.endswith("| 1.00 |"), "the twin has Python's rounds, so R ÷ Python is 1"
    clip = _line(text.split("## Speed")[1], "| autocast_scaler_clip |")
    assert "| unsupported |" in clip and clip.endswith("| — |")


def test_a_noisy_cell_gets_no_ratio_but_a_note(both: MatrixResult) -> None:
    """A cell with no stored ratio prints 'no ratio (k)' and note k is the stored reason, instead of a number."""
    autocast = by_mode(both)["autocast"]
    noisy = dataclasses.replace(autocast, time_vs_default=None, time_vs_default_note="spread too wide: CV 1.0%, 20.0% (> 5%)")
    text = report_text(replace_cells(both, {noisy.id: noisy}))
    row = _line(text.split("## Speed")[1], "| autocast |")
    note = row.split(" | ")[2]
    assert note.startswith("no ratio (") and f"{note[10:-1]}. spread too wide: CV 1.0%, 20.0% (> 5%)" in text


def test_memory_versions_warnings_and_reference_are_reported(both: MatrixResult) -> None:
    """Peak RSS per cell, torch/libtorch versions and threads, the warnings and the reference status appear."""
    text = report_text(both)
    first = both.cells[0]
    assert first.memory is not None and first.record is not None
    peak, before = (first.memory.peak_rss_bytes or 0) / 2**20, (first.memory.rss_before_bytes or 0) / 2**20
    assert f"| {peak:.1f} MiB | worker peak RSS over this call ({before:.1f} MiB held before it) |" in text
    record = first.record
    assert (f"| python | python: `this harness's own` | {record.torch_version} | {record.libtorch_version} | "
            f"{record.language_version} | 1 | cpu | —: — |") in text
    assert "- libtorch versions differ (python 2.13.0, r 2.5.1): bitwise parity is not expected" in text
    assert "- float64 reference: computed for 1 optimizer(s), plain and clipped (4 trajectories, 8 steps each)." in text


def test_a_missing_reference_is_reported_and_plots_still_draw(both: MatrixResult, tmp_path: Path) -> None:
    """Without a float64 reference the report gives the reason and the plots are still written."""
    reason = "float64 reference skipped: 2.0e+13 FLOPs exceed the budget"
    result = dataclasses.replace(
        both, reference=ReferenceSummary(False, reason), cells=tuple(dataclasses.replace(c, reference_distance=None) for c in both.cells),
    )
    paths, text = _written(result, tmp_path)
    assert f"- float64 reference: not computed — {reason}." in text
    assert "float64 distance not recorded for python and r" in text
    assert all(p.stat().st_size > 10_000 for p in paths if p.suffix == ".png")


def test_an_unwritable_folder_is_a_result_error(both: MatrixResult, tmp_path: Path) -> None:
    """A report folder that cannot be created raises ResultError saying where and what to do."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ResultError, match=r"cannot write the report to .*file/out: .*Choose a writable folder"):
        write_report(both, blocker / "out")


def test_the_report_reads_the_verdicts_it_is_given(both: MatrixResult) -> None:
    """A view judges nothing: the report shows the pair verdicts of the result it is handed, not verdicts of its own."""

    planted = dataclasses.replace(both, pairs=tuple(dataclasses.replace(p, verdict="diverged") for p in both.pairs))
    assert "| **diverged** |" in render_markdown(planted) and "| **diverged** |" not in render_markdown(both)


def test_timing_uses_timed_rounds_when_recorded() -> None:
    """A timed cell is plotted by its rounds' loop times; an untimed one by its seconds per epoch."""
    timed = golden().cells[0]
    assert timed.timing is not None and timed.record is not None
    assert timing_samples(dataclasses.replace(timed, timing=None)) == (list(timed.record.seconds_per_epoch), "epoch")
    rounds = dataclasses.replace(timed.timing, samples=dataclasses.replace(timed.timing.samples, loop_seconds=(0.5, 0.25, 0.75)))
    assert timing_samples(dataclasses.replace(timed, timing=rounds)) == ([0.5, 0.25, 0.75], "round")
    assert timing_samples(dataclasses.replace(timed, timing=rounds), prefer_rounds=False)[1] == "epoch"


def _failing(result: MatrixResult) -> tuple[MatrixResult, CellResult]:
    """A copy of ``result`` whose Python clip cell fails its own verdict: its losses leave the float64 bound from step 5
    (as a missing ``unscale_`` makes them), its distance as the run would have measured it."""
    cell = result.cell("cuda_amp_grad_scaler-autocast_scaler_clip-sgd-python-cpu")
    assert cell.record is not None and cell.reference_distance is not None
    losses = tuple(v * 1.01 if k >= 5 else v for k, v in enumerate(cell.record.losses))
    record = dataclasses.replace(cell.record, losses=losses, final_loss=losses[-1])
    distance = dataclasses.replace(cell.reference_distance, max_rel_loss_error=None)
    failed = dataclasses.replace(cell, record=record, reference_distance=distance)
    return replace_cells(result, {cell.id: failed}), failed


def test_report_tracks_each_cell_on_its_own_and_names_a_failure() -> None:
    """The tracker has each cell's own verdict; a failing cell is named in the summary with its reason and detailed below."""
    clean = report_text(golden())
    assert "- Cells on their own (float64 bound; scaler cells: GradScaler's rule): 6 pass, 2 not judged." in clean
    failed, cell = _failing(golden())
    text = report_text(failed)
    assert "- Cells on their own (float64 bound; scaler cells: GradScaler's rule): 5 pass, 1 fail, 2 not judged." in text
    assert f"- **`{cell.id}` fails on its own**: loss past the float64 bound from step 5" in text
    assert any(line.startswith(f"| `{cell.id}` | ok | **FAIL** |") for line in text.splitlines())
    assert f"### {cell.id}: fail" in text and "float64 bound: loss rel error" in text


def _exit_status(result: MatrixResult) -> int:
    """The CLI's exit status of a judged result."""
    from harness.cli.outcome import exit_status

    return exit_status(result)


def test_cli_table_and_exit_status_count_a_failed_cell() -> None:
    """The CLI table shows FAIL with the cell named and why, and the exit status is 1; the clean result exits 0."""
    failed, cell = _failing(golden())
    failed = assess_result(failed)
    console = Console(record=True, width=200)
    print_result(failed, console)
    text = console.export_text()
    assert f"{cell.id} FAIL: loss past the float64 bound from step 5" in text and "│ FAIL " in text
    assert (_exit_status(golden()), _exit_status(failed)) == (0, 1)


def test_cli_table_shows_each_cells_numbers_and_the_stored_ratio() -> None:
    """Each cell's row has its final loss, its distance from float64 and ×default as stored; the pairs and figures follow."""
    result = golden()
    console = Console(record=True, width=220)
    print_result(result, console)
    text = console.export_text()
    default = result.cells[0]
    assert default.record is not None and default.reference_distance is not None
    row = next(line for line in text.splitlines() if "· default " in line and "│ python " in line)
    assert f"{default.record.final_loss:.7g}" in row and f"{default.reference_distance.final_weights_rel_error:.1e}" in row
    assert f" {default.time_vs_default:.2f} │" in row
    assert "noisy" in next(line for line in text.splitlines() if "· autocast " in line and "│ python " in line)
    assert "with_autocast-default-sgd-cpu" in text and "identical" in text
    assert "parity: 2 pair(s) not compared" not in text
    assert f"targets: {sum(c.met for c in result.targets)} of {len(result.targets)} met" in text


def test_cli_table_says_no_default_where_there_is_none_not_noisy() -> None:
    """A run without the ``default`` mode: ×default is "—" with the stored note, never "noisy … use more --rounds"; each script
    misses its own default (×default compares within one script and optimizer)."""
    from harness.model.result import with_time_vs_default

    result = golden()
    cells = with_time_vs_default([c for c in result.cells if c.mode != "default"])
    console = Console(record=True, width=220)
    print_result(dataclasses.replace(result, cells=tuple(cells)), console)
    text = console.export_text()
    assert "noisy" not in text and "more --rounds" not in text
    row = next(line for line in text.splitlines() if "· autocast " in line and "│ python " in line)
    assert row.split("│")[12].strip() == "—"  # the column after CV and its floor
    assert ("×default 2 cells (with_autocast-autocast-sgd-python-cpu, ...): no default cell of with_autocast with sgd "
            "to compare with") in text
    assert ("×default 2 cells (cuda_amp_grad_scaler-autocast_scaler-sgd-python-cpu, ...): no default cell of cuda_amp_grad_scaler "
            "with sgd to compare with") in text


def test_the_report_header_and_the_table_say_where_the_result_came_from() -> None:
    """The report's header and the terminal table carry the version, commit and dirty state, and the files' digest; the report
    lists each file's digest; an installed harness's result says it has no commit; a result before schema 9 says it is unknown."""
    from harness.model.provenance import Provenance

    files = {"py_scripts/common.py": "a" * 64, "r_scripts/common.R": "b" * 64}
    checkout = Provenance("0.1.0", "checkout", commit="f" * 40, dirty=True, scripts_root="/repo", files=files)
    text = report_text(dataclasses.replace(golden(), provenance=checkout))
    header = text.split("## Summary")[0]
    assert f"Provenance: harness 0.1.0; commit {'f' * 12} (dirty: uncommitted changes); 2 script and data files, sha256 " \
           f"{checkout.files_digest}." in header
    assert f"| `r_scripts/common.R` | `{'b' * 16}` |" in text
    console = Console(record=True, width=400)
    print_result(assess_result(dataclasses.replace(golden(), provenance=checkout)), console)
    assert f"provenance: harness 0.1.0; commit {'f' * 12} (dirty: uncommitted changes)" in console.export_text()
    note = "installed package: no checkout, so no commit"
    installed = dataclasses.replace(checkout, source="installed", commit=None, dirty=None, note=note)
    assert note in report_text(dataclasses.replace(golden(), provenance=installed)).split("## Summary")[0]
    assert "Provenance: harness version unknown; provenance unknown: written by a harness before result schema 9" in report_text(golden())
