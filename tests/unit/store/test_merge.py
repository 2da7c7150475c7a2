"""Results from many machines merge into one judged tracker; incompatible inputs are refused in one line, before any report."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from harness.errors import ExitCode, ResultError
from harness.model.cell_efficiency import cell_efficiency
from harness.model.result import MatrixResult, with_time_vs_default
from harness.store.merge import merge_results
from harness.store.result_file import load_result, save_result
from harness.workload.matrix import Cell
from tests.support import report_text, run_cli
from tests.twins import golden


def _slice(result: MatrixResult, frontend: str, **changes: object) -> MatrixResult:
    """One frontend's cells of ``result``, as a CI job running only that installation would have written them."""
    cells = tuple(c for c in result.cells if c.frontend == frontend)
    sliced = dataclasses.replace(result, cells=cells, frontends=(frontend,), baseline=frontend, pairs=(), traces=(), **changes)  # type: ignore[arg-type]
    return dataclasses.replace(sliced, spec_digest=sliced.spec.digest())  # a spec it ran, not one edited after


@pytest.fixture
def slices(tmp_path: Path) -> tuple[Path, Path]:
    """The golden run split into a Python job's result and an R job's."""
    a, b = tmp_path / "python.json", tmp_path / "r.json"
    save_result(_slice(golden(), "python"), a)
    save_result(_slice(golden(), "r"), b)
    return a, b


def test_merged_slices_are_judged_as_the_run_they_came_from(slices: tuple[Path, Path]) -> None:
    """Every pair of the golden run comes back with the same verdict; the merged result says what it was made of."""
    merged = merge_results(slices)
    assert [(p.pair, p.frontends, p.verdict) for p in merged.pairs] == [(p.pair, p.frontends, p.verdict) for p in golden().pairs]
    assert merged.frontends == ("python", "r") and merged.baseline == "python"
    assert [s["file"] for s in merged.sources] == [str(p) for p in slices]
    assert [len(s["cells"]) for s in merged.sources] == [4, 4]
    text = report_text(merged)
    assert "## Merged from" in text and f"| `{slices[0]}` |" in text


def test_a_merged_result_saves_and_loads_with_its_inputs_weights(slices: tuple[Path, Path], tmp_path: Path) -> None:
    merged = merge_results(slices)
    (tmp_path / "out").mkdir()
    save_result(merged, tmp_path / "out" / "merged.json")
    again = load_result(tmp_path / "out" / "merged.json")
    assert [p.verdict for p in again.pairs] == [p.verdict for p in merged.pairs] and again.sources == merged.sources


def test_a_cell_alone_on_its_device_is_listed_with_why(tmp_path: Path) -> None:
    """A GPU job's cell has no CPU partner: it is not judged, and the report says so (the spec differs by device and AMP dtype)."""
    gpu = _slice(golden(), "r")
    gpu = dataclasses.replace(gpu, cells=tuple(dataclasses.replace(c, cell=Cell("h100", c.script, c.mode, c.optimizer, "cuda"), record=None,
                                                                   reference_distance=None, status=c.status.__class__("skipped"),
                                                                   reason="no GPU here", timing=None, efficiency=None,
                                                                   time_vs_default=None, verdict=None)
                                               for c in gpu.cells), frontends=("h100",), baseline="h100",
                              spec=dataclasses.replace(gpu.spec, device="cuda", amp_dtype="float16"))
    gpu = dataclasses.replace(gpu, spec_digest=gpu.spec.digest())
    a, b = tmp_path / "cpu.json", tmp_path / "gpu.json"
    save_result(_slice(golden(), "python"), a)
    save_result(gpu, b)
    merged = merge_results([a, b])
    assert merged.pairs == ()
    text = report_text(merged)
    assert "Not judged (no pair):" in text
    assert "- `with_autocast-default-sgd-h100-cuda`: no other frontend ran with_autocast default on cuda in this result" in text


def test_another_workload_is_refused_naming_the_field(slices: tuple[Path, Path], tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    save_result(_slice(golden(), "r", spec=dataclasses.replace(golden().spec, lr=0.5)), other)
    with pytest.raises(ResultError) as refused:
        merge_results([slices[0], other])
    assert str(refused.value) == (
        f"{other} ran another workload than {slices[0]}: its spec's lr is 0.5, not {golden().spec.lr!r}. Merge results of one "
        "workload: the same preset and flags; only the device (and the AMP dtype and threads it decides) may differ, between "
        "results on different devices."
    )


def test_one_cell_from_two_inputs_is_refused_with_what_to_rename(slices: tuple[Path, Path], tmp_path: Path) -> None:
    again = tmp_path / "again.json"
    save_result(_slice(golden(), "python"), again)
    with pytest.raises(ResultError, match=r"cell with_autocast-default-sgd-python-cpu is in both .*python.json and .*again.json: two runs "
                                          r"named an installation 'python' on cpu\. Label the inputs \(harness merge A=a\.json B=b\.json"):
        merge_results([slices[0], again])


@pytest.mark.parametrize(("which", "says"), [
    ("one", "merge needs two results or more, got 1"),
    ("twice", "is named twice: name each result to merge once."),
    ("baseline", "baseline 'julia' ran in none of the merged results (they ran python, r): choose one of those with --baseline."),
])
def test_what_cannot_merge_is_one_line(slices: tuple[Path, Path], which: str, says: str) -> None:
    paths = {"one": [slices[0]], "twice": [slices[0], slices[0]], "baseline": list(slices)}[which]
    with pytest.raises(ResultError) as refused:
        merge_results(paths, baseline="julia" if which == "baseline" else None)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_merge_writes_the_report_and_the_merged_result_and_refuses_to_overwrite(slices: tuple[Path, Path], tmp_path: Path) -> None:
    out, merged = tmp_path / "report", tmp_path / "merged.json"
    done = run_cli("merge", *map(str, slices), "--out", str(out), "--json", str(merged))
    assert done.returncode == 0, done.stderr
    assert (out / "report.md").is_file() and json.loads(merged.read_text())["schema_version"] == 10
    assert f"merged 2 results (8 cells); report written to {out / 'report.md'}" in " ".join(done.stdout.split())
    again = run_cli("merge", *map(str, slices), "--out", str(tmp_path / "elsewhere"), "--json", str(merged))
    assert again.returncode == ExitCode.USAGE_ERROR
    assert again.stderr.strip() == f"error: {merged} already exists; choose another path or pass --overwrite to replace it."
    assert not (tmp_path / "elsewhere").exists()


def _own_weights(result: MatrixResult, folder: Path) -> MatrixResult:
    """``result`` with its weights copied into ``folder``: another machine's run has files of its own."""
    folder.mkdir()
    for cell in result.cells:
        if cell.record is not None and cell.record.weights_path is not None:
            shutil.copyfile(cell.record.weights_path, folder / Path(cell.record.weights_path).name)
    return result.map_weights_paths(lambda p: str(folder / Path(p).name))


def test_labelled_inputs_merge_two_machines_that_both_ran_python(slices: tuple[Path, Path], tmp_path: Path) -> None:
    """``xeon=a.json epyc=b.json``: each input's frontends become LABEL.NAME, so no re-run is needed to tell them apart."""
    other = tmp_path / "other-machine.json"
    save_result(_own_weights(_slice(golden(), "python"), tmp_path / "other-weights"), other)
    done = run_cli("merge", f"xeon={slices[0]}", f"epyc={other}", "--out", str(tmp_path / "report"), "--json", str(tmp_path / "m.json"))
    assert done.returncode == 0, done.stderr
    stored = json.loads((tmp_path / "m.json").read_text())
    assert (stored["frontends"], stored["baseline"]) == (["xeon.python", "epyc.python"], "xeon.python")
    assert {c["id"] for c in stored["cells"]} >= {"with_autocast-default-sgd-xeon.python-cpu",
                                                   "with_autocast-default-sgd-epyc.python-cpu"}
    assert [(p["frontends"], p["verdict"]) for p in stored["pairs"]][:2] == [
        (["xeon.python", "epyc.python"], "identical"), (["xeon.python", "epyc.python"], "identical"),
    ]
    bad = run_cli("merge", f"x-y={slices[0]}", str(other), "--out", str(tmp_path / "r2"))
    assert bad.returncode == ExitCode.USAGE_ERROR
    assert bad.stderr.strip().startswith("error: merge must be a name of letters, digits, '_' and '.'")


def test_a_json_place_that_is_not_a_result_is_refused_before_the_report(slices: tuple[Path, Path], tmp_path: Path) -> None:
    """``--overwrite`` replaces only a result: a notes file at ``--json`` is refused first, and no report is left behind."""
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    done = run_cli("merge", *map(str, slices), "--out", str(tmp_path / "report"), "--json", str(notes), "--overwrite")
    assert done.returncode == ExitCode.USAGE_ERROR
    assert done.stderr.strip() == (f"error: {notes} is not an amp-parity result; --overwrite replaces only those. Move it away or "
                                   "choose another path.")
    assert notes.read_text() == "mine" and not (tmp_path / "report").exists()


def _measured_elsewhere(result: MatrixResult, scale: float, interleave: bool) -> MatrixResult:
    """``result`` as another machine would have measured it: its own matmul peaks (``scale`` × these), under its own protocol,
    each cell's efficiency and time against its default recomputed from them, as that machine's run would have stored them."""
    peaks = dataclasses.replace(result.peaks, by_dtype={
        dtype: None if p is None else {**p, "tflops": p["tflops"] * scale, "samples_tflops": [t * scale for t in p["samples_tflops"]]}
        for dtype, p in result.peaks.by_dtype.items()})
    cells = [dataclasses.replace(c, efficiency=cell_efficiency(c, result.spec, peaks)) for c in result.cells]
    cells = with_time_vs_default(cells, paired=interleave)
    protocol = dataclasses.replace(result.protocol, interleave=interleave)
    return dataclasses.replace(result, peaks=peaks, protocol=protocol, cells=tuple(cells))


def test_a_merged_result_of_two_machines_loads_back(tmp_path: Path) -> None:
    """Two inputs measured on machines with other matmul peaks and other protocols: ``merge --json`` writes a result that
    ``load_result``, ``report`` and ``merge`` read back (each cell checked against its own input's peaks and protocol), where
    it was refused as "a result edited by hand?" (the merged result kept the first input's peaks only)."""
    a, b = tmp_path / "python.json", tmp_path / "r.json"
    save_result(_slice(golden(), "python"), a)
    save_result(_measured_elsewhere(_slice(golden(), "r"), 3.0, interleave=not golden().protocol.interleave), b)
    merged = tmp_path / "merged.json"
    done = run_cli("merge", str(a), str(b), "--out", str(tmp_path / "report"), "--json", str(merged))
    assert done.returncode == 0, done.stderr
    again = load_result(merged)
    assert [c.efficiency for c in again.cells] == [c.efficiency for c in merge_results([a, b]).cells]
    assert [s["peaks"]["by_dtype"] for s in json.loads(merged.read_text())["sources"]] == [
        load_result(a).peaks.by_dtype, load_result(b).peaks.by_dtype]
    report = run_cli("report", str(merged), "--out", str(tmp_path / "again"))
    assert report.returncode == 0, report.stderr
    third = tmp_path / "third.json"
    save_result(_own_weights(_slice(golden(), "python"), tmp_path / "third-weights"), third)
    nested = run_cli("merge", f"m={merged}", f"t={third}", "--out", str(tmp_path / "nested"), "--json", str(tmp_path / "nested.json"))
    assert nested.returncode == 0, nested.stderr
    loaded = load_result(tmp_path / "nested.json")
    assert [(s["file"], s["frontends"]) for s in loaded.sources] == [(str(a), ["m.python"]), (str(b), ["m.r"]), (str(third), ["t.python"])]
    assert loaded.run_of(loaded.cell("with_autocast-default-sgd-m.r-cpu")).peaks == load_result(b).peaks


def test_the_committed_slices_merge_into_a_result_that_loads(tmp_path: Path) -> None:
    """``docs/results``' two installation slices (two venvs measured their own peaks) merge with ``--json`` into a result
    that loads back: the committed results failed the same way. Their weights are in git history only (docs/results is
    lean), so the pairs across the slices whose tensors differ cannot be compared: the merge says so and fails, and its
    result still loads (``tiny-merged.json``, merged while the weights were there, judges them)."""
    folder = Path(__file__).resolve().parents[3] / "docs" / "results" / "installations-epyc-avx2-2-cores"
    merged = tmp_path / "tiny.json"
    done = run_cli("merge", str(folder / "tiny-torch-2.13.json"), str(folder / "tiny-torch-2.8.json"), "--out", str(tmp_path / "r"),
                   "--json", str(merged))
    assert done.returncode == ExitCode.FAILED and "could not be compared" in done.stderr, done.stderr
    assert len(load_result(merged).cells) == 16


def test_one_run_merged_twice_is_refused(slices: tuple[Path, Path], tmp_path: Path) -> None:
    """A run inside a merged input and on its own again (under two labels) would be compared with itself and read as
    identical: the merge refuses it, naming both cells and the file they share."""
    merged = tmp_path / "merged.json"
    assert run_cli("merge", *map(str, slices), "--out", str(tmp_path / "r1"), "--json", str(merged)).returncode == 0
    twice = run_cli("merge", f"x={merged}", f"y={slices[0]}", "--out", str(tmp_path / "r2"))
    assert twice.returncode != 0 and len(twice.stderr.splitlines()) == 1
    assert twice.stderr.startswith(f"error: cell with_autocast-default-sgd-y.python-cpu of {slices[0]} and cell "
                                   f"with_autocast-default-sgd-x.python-cpu of {merged} read one weights file (")
    assert twice.stderr.rstrip().endswith("): the same run is merged twice. Merge each run once.")
    assert not (tmp_path / "r2").exists()


def test_merging_results_that_ran_different_scripts_says_which_files_differ(tmp_path: Path) -> None:
    """Two slices whose provenance differs in one R file merge, and the merged result, its report and the printed table name
    the file; slices of the same files say nothing of it, and a slice written before schema 9 is said to be unknown."""
    from harness.model.provenance import Provenance

    files = {"py_scripts/common.py": "a" * 64, "r_scripts/common.R": "b" * 64}
    same = Provenance("0.1.0", "checkout", commit="c" * 40, dirty=False, files=files)
    other = dataclasses.replace(same, commit="d" * 40, files={**files, "r_scripts/common.R": "e" * 64})
    a, b = tmp_path / "python.json", tmp_path / "r.json"
    save_result(_slice(golden(), "python", provenance=same), a)
    save_result(_slice(golden(), "r", provenance=same), b)
    assert not [w for w in merge_results([a, b]).warnings if "scripts" in w]
    save_result(_slice(golden(), "r", provenance=other), b, overwrite=True)
    line = "r.json ran different scripts than python.json: r_scripts/common.R differs"
    merged = merge_results([a, b])
    assert line in merged.warnings and [s["provenance"]["commit"] for s in merged.sources] == ["c" * 40, "d" * 40]
    done = run_cli("merge", str(a), str(b), "--out", str(tmp_path / "report"))
    assert done.returncode == ExitCode.OK, done.stderr
    assert line in " ".join(done.stdout.split()) and f"provenance of {b}: harness 0.1.0; commit {'d' * 12} (clean)" in done.stdout
    report = (tmp_path / "report" / "report.md").read_text()
    assert f"- **{b} ran different scripts than {a}: r_scripts/common.R differs**" in report
    save_result(_slice(golden(), "r"), b, overwrite=True)  # the golden result is schema 3: no provenance
    assert "r.json: provenance unknown: written by a harness before result schema 9, which recorded none; whether it ran the same " \
           "scripts as python.json is unknown" in merge_results([a, b]).warnings


def test_a_merged_result_of_inputs_measured_against_other_peaks_loads_again(tmp_path: Path) -> None:
    """Each input's cells were measured against its own run's matmul peaks; the merged result keeps them per source, so
    its load checks every cell's efficiency against its own (it checked the second input's against the first's: refused)."""
    from harness.model.cell_efficiency import cell_efficiency
    from harness.model.result import Peaks

    r = _slice(golden(), "r")
    def doubled(peak: dict[str, object]) -> dict[str, object]:  # a machine twice as fast: every sample and layout doubled
        twice = {k: 2 * v for k, v in peak.items() if k in ("tflops", "tflops_median")}  # type: ignore[operator]
        lists = {"samples_tflops": [2 * x for x in peak["samples_tflops"]],  # type: ignore[attr-defined]
                 "layouts_tflops": {k: 2 * x for k, x in peak["layouts_tflops"].items()}}  # type: ignore[attr-defined]
        return {**peak, **twice, **lists}

    faster = Peaks(r.peaks.device, r.peaks.threads, {k: v and doubled(dict(v)) for k, v in r.peaks.by_dtype.items()}, r.peaks.reason)
    r = dataclasses.replace(r, peaks=faster, cells=tuple(dataclasses.replace(c, efficiency=cell_efficiency(c, r.spec, faster))
                                                         for c in r.cells))
    a, b = tmp_path / "python.json", tmp_path / "r.json"
    save_result(_slice(golden(), "python"), a)
    save_result(r, b)
    done = run_cli("merge", str(a), str(b), "--out", str(tmp_path / "report"), "--json", str(tmp_path / "merged.json"))
    assert done.returncode == ExitCode.OK, done.stderr
    again = load_result(tmp_path / "merged.json")
    assert [s["peaks"]["by_dtype"]["float32"]["tflops"] for s in again.sources] == [
        golden().peaks.by_dtype["float32"]["tflops"], faster.by_dtype["float32"]["tflops"]]  # type: ignore[index]


def test_merge_keeps_every_inputs_float64_reference(tmp_path: Path) -> None:
    """Issue 37 (7): each input's float64 trajectories are kept, and each cell is judged against its own input's: a slice
    whose trajectories the first input lacks (here, every unclipped one) is not left ``not_judged`` in the merge."""
    full = golden().reference
    clipped_only = dataclasses.replace(full, trajectories=tuple(t for t in full.trajectories if t["clip"]))
    a, b = tmp_path / "python.json", tmp_path / "r.json"
    python = _slice(golden(), "python", reference=clipped_only)  # a slice of the clipped cells (what it has references for)
    save_result(dataclasses.replace(python, cells=tuple(c for c in python.cells if c.cell.properties.clip)), a)
    save_result(_slice(golden(), "r"), b)
    alone = {c.id: c.verdict.outcome for c in load_result(b).cells if c.verdict is not None}
    merged = merge_results([a, b])
    judged = {c.id: c.verdict.outcome for c in merged.cells if c.frontend == "r" and c.verdict is not None}
    assert judged == alone and "pass" in judged.values(), judged
    assert len(merged.reference.trajectories) == len(full.trajectories)
    assert [s.get("reference") is not None for s in merged.sources] == [True, True]
    assert merge_results([a, b]).cells == load_result_roundtrip(merged, tmp_path / "m.json").cells


def load_result_roundtrip(result: MatrixResult, path: Path) -> MatrixResult:
    save_result(result, path)
    return load_result(path)


def test_a_merged_result_over_the_readers_limit_is_refused_before_anything_is_written(
    slices: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48 (2): each input is under the reader's limit, their merge is not: ``merge --json`` refuses it in one line before
    the report or the result is written, and an earlier merged result at ``--json`` stays (``--overwrite`` once refused it as
    "not an amp-parity result", being over the limit)."""
    merged, out = tmp_path / "merged.json", tmp_path / "out"
    assert run_cli("merge", *map(str, slices), "--out", str(out), "--json", str(merged)).returncode == 0
    before = merged.read_bytes()
    limit = max(p.stat().st_size for p in slices) + 1  # every input loads; the merge of both does not fit
    assert len(before) > limit
    monkeypatch.setattr("harness.store.result_file.RESULT_MAX_BYTES", limit)
    done = run_cli("merge", *map(str, slices), "--out", str(tmp_path / "again"), "--json", str(merged), "--overwrite")
    assert done.returncode == ExitCode.USAGE_ERROR, done.stderr
    line = done.stderr.strip()
    assert line.startswith(f"error: cannot write {merged}: the result would be ") and "nothing was written" in line, line
    assert "\n" not in line
    assert merged.read_bytes() == before and not (tmp_path / "again").exists()
    from harness.store.result_file import is_result_file  # an older harness's result over the limit is still its own

    (tmp_path / "big.txt").write_text("x" * (limit + 1))
    assert is_result_file(merged) and not is_result_file(tmp_path / "big.txt")


def test_every_result_the_harness_writes_its_reader_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's limit is the reader's: a result exactly at ``RESULT_MAX_BYTES`` is written and loads; one byte over, it
    is refused before anything is written."""
    from harness.store.result_file import stored_text

    result = _slice(golden(), "python")
    size = len(stored_text(result, tmp_path / "a.json").encode())
    monkeypatch.setattr("harness.store.result_file.RESULT_MAX_BYTES", size)
    save_result(result, tmp_path / "a.json")
    assert len(load_result(tmp_path / "a.json").cells) == len(result.cells)
    monkeypatch.setattr("harness.store.result_file.RESULT_MAX_BYTES", size - 1)
    with pytest.raises(ResultError, match=r"over the 0 MiB a result file may hold \(4 cells\); nothing was written"):
        save_result(result, tmp_path / "b.json")
    assert not (tmp_path / "b.json").exists()


def _resume_slice(folder: Path, edit: bool) -> MatrixResult:
    """The golden run's Python default cell run again as a ``resume`` cell (its final weights one ULP off where ``edit``), as
    a slice run with ``--feature resume`` writes it: the float64 trajectory it is measured against is the plain loop's."""
    from tests.twins import by_mode, nudge_one_ulp, twin_cell

    plain = by_mode(golden())["default"]
    twin = twin_cell(plain, folder, frontend="python", edit=nudge_one_ulp("layer0.bias", (1,)) if edit else None)
    resumed = dataclasses.replace(twin, cell=dataclasses.replace(plain.cell, feature="resume"))
    reference = golden().reference
    ran = next(t for t in reference.trajectories if t["optimizer"] == "sgd" and not t["clip"] and not t["skipped_steps"])
    return _slice(dataclasses.replace(golden(), cells=(resumed,), reference=dataclasses.replace(
        reference, trajectories=(*reference.trajectories, {**ran, "feature": "resume"}))), "python")


@pytest.mark.parametrize("edit", [False, True])
def test_a_merged_resume_cell_is_checked_against_its_uninterrupted_twin(edit: bool, tmp_path: Path) -> None:
    """Issue 48 (4): the same cells run as one matrix or as two slices (``--feature none``, ``--feature resume``) get one
    verdict: a resumed cell whose final weights are not its uninterrupted cell's ends in ``error`` in the merge, and the
    merge fails, as the run did; bitwise the same, it passes."""
    from harness.cli.outcome import exit_status

    plain, resumed = tmp_path / "plain.json", tmp_path / "resume.json"
    save_result(_slice(golden(), "python"), plain)
    save_result(_resume_slice(tmp_path / "w", edit), resumed)
    assert all(c.status == "ok" for c in load_result(resumed).cells)  # alone, nothing to compare it with
    merged = merge_results([plain, resumed])
    cell = next(c for c in merged.cells if c.cell.feature == "resume")
    assert cell.verdict is not None
    if not edit:
        assert cell.verdict.outcome == "pass" and exit_status(merged) is ExitCode.OK, cell.verdict.reason
        return
    assert cell.verdict.outcome == "fail" and exit_status(merged) is ExitCode.FAILED
    assert cell.verdict.reason == ("resumed from its checkpoint, it is not the uninterrupted run "
                                   "with_autocast-default-sgd-python-cpu: its final weights differ in layer0.bias")
    (tmp_path / "out").mkdir()
    save_result(merged, tmp_path / "out" / "m.json")  # and so does the merged result loaded again, its weights files gone
    for weights in (tmp_path / "w").iterdir():
        weights.unlink()
    again = load_result(tmp_path / "out" / "m.json")
    verdict = next(c.verdict for c in again.cells if c.cell.feature == "resume")
    assert verdict is not None and verdict.reason == cell.verdict.reason and exit_status(again) is ExitCode.FAILED
