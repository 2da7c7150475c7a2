"""Known differences: the committed list loads, a divergence is matched only by its exact signature, and a stale entry fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import KnownDifferencesError
from harness.judge.known_differences import DEFAULT_LIST, load_known_differences
from harness.judge.pairs import FAILING_VERDICTS, compare_cells
from harness.model.result import CellResult
from harness.model.trace import PairTrace, PointDifference
from tests.twins import by_mode, golden, nudge_one_ulp, twin_cell, with_record

CLIP = "cuda_amp_grad_scaler-autocast_scaler_clip-sgd-cpu"


def _trace(step: int = 0, point: str = "clip.coef", distance: int = 1, clipped: tuple[int, ...] = (0, 1, 2)) -> PairTrace:
    first = PointDifference(step, point, "bytes", ("float32", "float32"), ((), (1,)), 1, 1, distance, (), (0.85, 0.8500001))
    return PairTrace(CLIP, ("python", "r"), (300, 300), 22, first, (0, "clip.total_norm"), {"clip_engaged": clipped})


def _identical_trace(clipped: tuple[int, ...]) -> PairTrace:
    return PairTrace(CLIP, ("python", "r"), (300, 300), 300, None, (7, "scaler.growth_tracker"), {"clip_engaged": clipped})


@pytest.fixture(scope="module")
def clip_cell() -> CellResult:
    """The golden result's Python clip cell."""
    return by_mode(golden())["autocast_scaler_clip"]


def test_the_committed_list_loads_with_the_clip_entry() -> None:
    """The committed entry covers the clip pair on CPU, python vs r, triggered by clipping, at most 1 ULP at clip.coef."""
    (entry,) = load_known_differences()
    assert entry.id == "clip-coef-reciprocal" and entry.applies(CLIP, "cpu", ("python", "r"))
    assert not entry.applies(CLIP.replace("-cpu", "-cuda"), "cuda", ("python", "r"))
    assert not entry.applies("cuda_amp_grad_scaler-autocast_scaler-sgd-cpu", "cpu", ("python", "r"))
    assert (entry.trigger, entry.signature.first_point, entry.signature.first_step, entry.signature.max_distance) == (
        "clip_engaged", "clip.coef", "trigger", 1)
    assert any("torch/_tensor.py" in s for s in entry.sources) and any("R/operators.R" in s for s in entry.sources)


def test_an_entry_naming_script_and_mode_covers_every_optimizer() -> None:
    """Pair ids name the optimizer (``script-mode-optimizer-device``): the clip entry, which names ``script-mode``, covers the
    clip pair with every optimizer (the clip coefficient is computed before any optimizer's step), and an entry may name one
    optimizer to cover that one only."""
    import dataclasses

    (entry,) = load_known_differences()
    for optimizer in ("sgd", "adam", "ignite_adagrad"):
        assert entry.applies(f"cuda_amp_grad_scaler-autocast_scaler_clip-{optimizer}-cpu", "cpu", ("python", "r"))
    adam_only = dataclasses.replace(entry, pairs=("cuda_amp_grad_scaler-autocast_scaler_clip-adam",))
    assert adam_only.applies("cuda_amp_grad_scaler-autocast_scaler_clip-adam-cpu", "cpu", ("python", "r"))
    assert not adam_only.applies(CLIP, "cpu", ("python", "r"))


def test_only_the_exact_signature_matches() -> None:
    """The same point at a clipped step within 1 ULP matches; 2 ULPs, another point or an unclipped step do not."""
    (entry,) = load_known_differences()
    assert entry.matches(_trace())
    assert entry.mismatch(_trace(distance=2)) == "its first difference is 2 apart, beyond the entry's 1"
    assert entry.mismatch(_trace(point="clip.total_norm")) == "it first differs at clip.total_norm, not clip.coef"
    assert entry.mismatch(_trace(step=5)) == "it first differs at step 5, not at a step where clip_engaged holds"
    assert entry.mismatch(_identical_trace((0,))) == "the trace shows no difference"


def test_a_matching_divergence_is_a_known_difference_and_shows_the_entry(clip_cell: CellResult, tmp_path: Path) -> None:
    """A 1-ULP weight difference whose trace has the signature: ``known_difference`` (not failing), entry and trace shown."""
    twin = twin_cell(clip_cell, tmp_path, edit=nudge_one_ulp("layer0.weight", (1, 1)))
    verdict = compare_cells(clip_cell, twin, trace=_trace(), known=load_known_differences())
    assert verdict.verdict == "known_difference" and verdict.ok and verdict.verdict not in FAILING_VERDICTS, verdict.explain()
    assert verdict.details["known_difference"] == "clip-coef-reciprocal"
    assert "known difference clip-coef-reciprocal: first differs at step 0, clip.coef (1 ULP)" in verdict.summary
    assert "trace: last identical point: step 0, clip.total_norm" in verdict.explain()
    assert "upstream:" in verdict.explain()


def test_a_look_alike_with_a_larger_distance_stays_diverged(clip_cell: CellResult, tmp_path: Path) -> None:
    """The same point 3 ULPs apart is not the known difference: ``diverged``, saying why the entry does not apply."""
    twin = twin_cell(clip_cell, tmp_path, edit=nudge_one_ulp("layer0.weight", (1, 1)))
    verdict = compare_cells(clip_cell, twin, trace=_trace(distance=3), known=load_known_differences())
    assert verdict.verdict == "diverged", verdict.explain()
    assert "first differs at step 0, clip.coef" in verdict.summary
    assert "not known difference clip-coef-reciprocal: its first difference is 3 apart, beyond the entry's 1" in verdict.explain()


def test_a_difference_beyond_the_tolerance_is_never_known(clip_cell: CellResult, tmp_path: Path) -> None:
    """A loss-scale history that differs must be equal: ``diverged`` even when the trace's first point has the signature."""
    assert clip_cell.record is not None and clip_cell.record.loss_scale is not None
    scales = [s * 2 if i == 3 else s for i, s in enumerate(clip_cell.record.loss_scale)]
    twin = twin_cell(clip_cell, tmp_path, loss_scale=scales)
    verdict = compare_cells(clip_cell, twin, trace=_trace(), known=load_known_differences())
    assert verdict.verdict == "diverged" and verdict.details["known_difference"] is None, verdict.explain()


def test_an_entry_whose_trigger_held_on_an_identical_pair_is_stale(clip_cell: CellResult, tmp_path: Path) -> None:
    """Clipping engaged and every point equal: the entry no longer describes the bindings, and the run fails naming it."""
    twin = twin_cell(clip_cell, tmp_path)
    stale = compare_cells(clip_cell, twin, trace=_identical_trace((0, 1)), known=load_known_differences())
    assert stale.verdict == "stale_known_difference" and stale.verdict in FAILING_VERDICTS, stale.explain()
    assert ("remove or update entry clip-coef-reciprocal (harness/judge/known_differences.toml): its trigger clip_engaged held"
            in stale.summary)


def test_where_the_trigger_never_held_an_identical_pair_is_simply_identical(clip_cell: CellResult, tmp_path: Path) -> None:
    """At bench clipping never engages: identical, and the entry is not stale."""
    twin = twin_cell(clip_cell, tmp_path)
    verdict = compare_cells(clip_cell, twin, trace=_identical_trace(()), known=load_known_differences())
    assert verdict.verdict == "identical" and verdict.details["stale_known_difference"] is None


def test_the_lifted_check_is_named_in_the_pair(clip_cell: CellResult, tmp_path: Path) -> None:
    """A side that ran with a lifted check says so in the pair's explanation."""
    twin = with_record(twin_cell(clip_cell, tmp_path), lifted_check="cuda_amp_grad_scaler()$scale(): CUDA-only check lifted on CPU")
    verdict = compare_cells(clip_cell, twin)
    assert "lifted: r ran cuda_amp_grad_scaler()$scale(): CUDA-only check lifted on CPU" in verdict.explanation


@pytest.mark.parametrize(("text", "message"), [
    ("[[difference]]\nid = 'x'\n", "`frontends` must be a non-empty list of strings"),
    ("not toml = = 1", "is not valid TOML"),
    (DEFAULT_LIST.read_text().replace('trigger = "clip_engaged"', 'trigger = "moon_phase"'), "`trigger` must be one of"),
    (DEFAULT_LIST.read_text().replace("max_distance = 1", "max_distance = -1"), "`signature.max_distance` must be a whole number"),
    (DEFAULT_LIST.read_text() * 2, "entry ids must be unique"),
])
def test_a_broken_list_is_refused_in_one_line_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    """A list with a missing or wrong field is refused before anything runs, in one line naming the file and the field."""
    path = tmp_path / "known.toml"
    path.write_text(text)
    with pytest.raises(KnownDifferencesError, match=message) as refused:
        load_known_differences(path)
    assert str(path) in str(refused.value) and "\n" not in str(refused.value)


def test_a_folder_is_no_list(tmp_path: Path) -> None:
    """--known-differences pointing at a folder is one line, not a traceback."""
    with pytest.raises(KnownDifferencesError, match="is not a file"):
        load_known_differences(tmp_path)
