"""The report: report.md with the result's own numbers, and PNG plots that open, for R skipped or present."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

from harness.compare import compare_result
from harness.errors import ResultError
from harness.model import MatrixResult
from harness.plots import timing_samples
from harness.report import PLOT_FILES, REPORT_FILE, render_markdown, report_main, write_report
from harness.results import save_result
from tests.fake_results import build_python_result, pair_result, split_losses, twin_cell, with_status

_R_MISSING = 'the R package torch is not installed: in R, install.packages("torch"); torch::install_torch()'


@pytest.fixture(scope="module")
def python_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real Python result (tiny preset, every mode), built once for this module."""
    return build_python_result(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def r_skipped(python_result: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The result as the runner writes it on a machine without R torch: every R cell skipped with the reason."""
    folder = tmp_path_factory.mktemp("r-skipped")
    twins = {c["pair"]: with_status(twin_cell(c, folder), "skipped", _R_MISSING) for c in python_result["cells"]}
    return pair_result(python_result, twins)


@pytest.fixture(scope="module")
def both(python_result: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both frontends: one identical pair, one diverged, one unsupported, and one identical on another libtorch."""
    folder = tmp_path_factory.mktemp("both")
    cells = {c["mode"]: c for c in python_result["cells"]}
    twins = {
        cells["default"]["pair"]: twin_cell(cells["default"], folder),
        cells["autocast"]["pair"]: twin_cell(cells["autocast"], folder, losses=split_losses(cells["autocast"]["record"]["losses"], 11)),
        cells["autocast_scaler"]["pair"]: twin_cell(cells["autocast_scaler"], folder, libtorch_version="2.5.1"),
        cells["autocast_scaler_clip"]["pair"]: with_status(
            twin_cell(cells["autocast_scaler_clip"], folder), "unsupported", "Error: cuda_amp_grad_scaler needs CUDA tensors"
        ),
    }
    return pair_result(python_result, twins)


def _written(result: dict[str, Any], out: Path) -> tuple[list[Path], str]:
    paths = write_report(result, out)
    return paths, (out / REPORT_FILE).read_text(encoding="utf-8")


@pytest.mark.parametrize("which", ["r_skipped", "both"])
def test_report_and_every_plot_are_written_and_open(which: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """write_report returns report.md and three PNGs that exist and decode to images of a readable size."""
    paths, _ = _written(request.getfixturevalue(which), tmp_path / "out")
    assert [p.name for p in paths] == [REPORT_FILE, *PLOT_FILES]
    for path in paths[1:]:
        image = matplotlib.image.imread(path)
        assert path.stat().st_size > 10_000
        assert image.shape[0] > 300 and image.shape[1] > 600 and image.shape[2] in (3, 4)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in paths), "no temporary files left"


def test_report_lists_every_cell_with_status_and_final_loss(both: dict[str, Any], tmp_path: Path) -> None:
    """Each cell id appears in a table row with its status and its final loss formatted as recorded."""
    _, text = _written(both, tmp_path)
    for cell in both["cells"]:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{cell['id']}` | {cell['status']} |"))
        if cell["record"]:
            assert f"| {cell['record']['final_loss']:.7g} |" in row
            assert f"{cell['reference_distance']['final_weights_rel_error']:.2e}" in row
        else:
            assert cell["reason"] in row


def test_report_lists_every_pair_with_its_verdict(both: dict[str, Any], tmp_path: Path) -> None:
    """Each pair has a tracker row with its verdict and cause, and a details section with the full explanation."""
    _, text = _written(both, tmp_path)
    verdicts = {v.pair: v for v in compare_result(both)}
    assert [v.verdict for v in verdicts.values()] == ["identical", "diverged", "identical", "unsupported"]
    for pair, verdict in verdicts.items():
        assert f"| `{pair}` | python vs r | **{verdict.verdict}** | {verdict.cause.replace('|', chr(92) + '|')} |" in text
        assert f"### {pair}: {verdict.verdict}" in text
        assert verdict.explain() in text
    assert "losses split at step 11" in text
    assert "- Pairs: 4 (2 identical, 1 diverged, 1 unsupported)." in text
    assert "- Judged `strict`: a pair expected bitwise identical (one libtorch, CPU) that is not is diverged." in text


def test_report_names_a_judging_policy_other_than_the_runs(both: dict[str, Any], tmp_path: Path) -> None:
    """A report asked for tolerance-only judging of a strict result says so in its summary."""
    text = render_markdown(both, judging="tolerance_only")
    assert "- Judged `tolerance_only` (--tolerance-only): every pair by the tolerance, bitwise identity only noted " in text
    assert "(this result was run under `strict`)." in text


def test_report_says_when_r_was_skipped_and_why(r_skipped: dict[str, Any], tmp_path: Path) -> None:
    """With R torch absent the summary says R was not run, with the runner's reason, and every pair is skipped."""
    _, text = _written(r_skipped, tmp_path)
    assert f"- **r was not run** (every r cell skipped): {_R_MISSING}" in text
    assert "- Pairs: 4 (4 skipped)." in text
    assert text.count("| python vs r | **skipped** |") == 4


def test_speed_table_has_seconds_and_ratios(both: dict[str, Any], tmp_path: Path) -> None:
    """The speed table shows each frontend's seconds, AMP ÷ default, and R ÷ Python per mode."""
    _, text = _written(both, tmp_path)
    cells = {(c["mode"], c["frontend"]): c["timing"] for c in both["cells"] if c["timing"]}
    default, autocast = cells[("default", "python")]["loop"]["median"], cells[("autocast", "python")]["loop"]["median"]
    row = next(line for line in text.splitlines() if line.startswith("| autocast |"))
    assert row.startswith(f"| autocast | {autocast:.4g} |")
    assert f"| {autocast / default:.2f} |" in row
    assert row.endswith("| 1.00 |"), "the twin copies Python's seconds, so R ÷ Python is 1"
    clip = next(line for line in text.splitlines() if line.startswith("| autocast_scaler_clip |"))
    assert "| unsupported |" in clip and clip.endswith("| — |")


def test_memory_versions_warnings_and_reference_are_reported(both: dict[str, Any], tmp_path: Path) -> None:
    """Peak RSS per cell, torch/libtorch versions and threads, the libtorch warning and the reference status appear."""
    _, text = _written(both, tmp_path)
    first = both["cells"][0]
    peak = first["memory"]["peak_rss_bytes"] / 2**20
    before = first["memory"]["rss_before_bytes"] / 2**20
    assert f"| {peak:.1f} MiB | worker peak RSS over this call ({before:.1f} MiB held before it) |" in text
    record = first["record"]
    assert f"| python | {record['torch_version']} | {record['libtorch_version']} | {record['language_version']} | 1 | cpu |" in text
    assert f"- libtorch versions differ (python {record['libtorch_version']}, r 2.5.1): bitwise parity is not expected" in text
    assert "note: libtorch differs (python" in text
    assert "- float64 reference: computed (20 steps, plain and clipped)." in text


def test_a_missing_reference_is_reported_and_plots_still_draw(both: dict[str, Any], tmp_path: Path) -> None:
    """Without a float64 reference the report gives the reason and the plots are still written."""
    result = copy.deepcopy(both)
    result["reference"] = {"available": False, "reason": "float64 reference skipped: 2.0e+13 FLOPs exceed the budget"}
    for cell in result["cells"]:
        cell["reference_distance"] = None
    paths, text = _written(result, tmp_path)
    assert "- float64 reference: not computed — float64 reference skipped: 2.0e+13 FLOPs exceed the budget." in text
    assert "float64 distance not recorded for python and r" in text
    assert all(p.stat().st_size > 10_000 for p in paths[1:])


def test_an_unwritable_folder_is_a_result_error(both: dict[str, Any], tmp_path: Path) -> None:
    """A report folder that cannot be created raises ResultError saying where and what to do."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ResultError, match=r"cannot write the report to .*file/out: .*Choose a writable folder"):
        write_report(both, blocker / "out")


def test_report_main_reads_a_saved_result(both: dict[str, Any], tmp_path: Path) -> None:
    """report_main loads a result file and writes the same report write_report would."""
    path = tmp_path / "run.json"
    save_result(MatrixResult.from_json(both), path)
    paths = report_main(path, tmp_path / "report")
    assert paths[0].read_text(encoding="utf-8") == render_markdown(both)


def test_report_main_refuses_an_unreadable_result(tmp_path: Path) -> None:
    """A result path that does not exist is a ResultError, not a traceback."""
    with pytest.raises(ResultError, match="cannot read"):
        report_main(tmp_path / "absent.json", tmp_path / "out")


def test_timing_uses_timed_rounds_when_recorded(both: dict[str, Any]) -> None:
    """A timed cell is plotted by its rounds' loop times; an untimed one by its seconds per epoch."""
    cell = copy.deepcopy(both["cells"][0])
    cell["timing"] = None
    assert timing_samples(cell) == (cell["record"]["seconds_per_epoch"], "epoch")
    cell["timing"] = {"samples": {"loop_seconds": [0.5, 0.25, 0.75]}}
    assert timing_samples(cell) == ([0.5, 0.25, 0.75], "round")
    assert timing_samples(cell, prefer_rounds=False)[1] == "epoch"


def _failing(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A copy of ``result`` whose Python clip cell failed its own verdict (as a missing ``unscale_`` makes it)."""
    from harness.model import CellVerdict, Float64Check

    failed = copy.deepcopy(result)
    cell = next(c for c in failed["cells"] if c["id"] == "cuda_amp_grad_scaler-autocast_scaler_clip-python-cpu")
    check = Float64Check.from_dict(cell["verdict"]["float64"])
    why = "loss past the float64 bound from step 5"
    check = Float64Check(**{**check.__dict__, "passed": False, "first_step_beyond": 5, "message": why})
    cell["verdict"] = CellVerdict(cell["id"], "fail", check, None, why).to_dict()
    return failed, cell


def test_report_tracks_each_cell_on_its_own_and_names_a_failure(python_result: dict[str, Any], tmp_path: Path) -> None:
    """The tracker has each cell's own verdict; a failing cell is named in the summary with its reason and detailed below."""
    _, clean = _written(python_result, tmp_path / "clean")
    assert "- Cells on their own (float64 bound; scaler cells: GradScaler's rule): 4 pass." in clean
    failed, cell = _failing(python_result)
    _, text = _written(failed, tmp_path / "failed")
    assert "- Cells on their own (float64 bound; scaler cells: GradScaler's rule): 3 pass, 1 fail." in text
    assert f"- **`{cell['id']}` fails on its own**: loss past the float64 bound from step 5" in text
    assert any(line.startswith(f"| `{cell['id']}` | ok | **FAIL** |") for line in text.splitlines())
    assert f"### {cell['id']}: fail" in text and "float64 bound: loss rel error" in text


def test_cli_table_and_exit_status_count_a_failed_cell(python_result: dict[str, Any]) -> None:
    """The CLI table shows FAIL with the cell named and why, and the exit status is 1; the clean result exits 0."""
    from rich.console import Console

    from harness.cli import exit_status
    from harness.table import print_result

    failed, cell = _failing(python_result)
    console = Console(record=True, width=200)
    print_result(failed, console)
    text = console.export_text()
    assert f"{cell['id']} FAIL: loss past the float64 bound from step 5" in text and "│ FAIL " in text
    assert (exit_status(MatrixResult.from_json(python_result)), exit_status(MatrixResult.from_json(failed))) == (0, 1)
