"""A result without its final-weights files (a lean result, as docs/results/ keeps them) is judged from what it kept, and
says so; a result whose weights went while it was in memory is not saved; a runner without a folder for them is refused."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from harness.errors import ResultError, UsageError
from harness.model.result import MatrixResult
from harness.store.merge import merge_results
from harness.store.result_file import load_result, save_result
from harness.workload.spec import WorkloadSpec
from tests.support import GOLDEN_RESULT


def _golden_copy(folder: Path) -> Path:
    """The golden result and its weights folder copied into ``folder``, saved again by this harness (schema 9, weights kept)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(GOLDEN_RESULT, folder / GOLDEN_RESULT.name)
    shutil.copytree(GOLDEN_RESULT.with_suffix(".weights"), folder / "golden.weights")
    path = folder / GOLDEN_RESULT.name
    save_result(load_result(path), path, overwrite=True)
    return path


def _lean(path: Path) -> int:
    """Remove the ``.safetensors`` files of ``path``'s weights folder (what docs/results/ does not commit); return how many."""
    removed = list(path.with_suffix(".weights").glob("*.safetensors"))
    for weights in removed:
        weights.unlink()
    return len(removed)


def _verdicts(result: MatrixResult) -> list[tuple[str, str, str]]:
    return [(p.pair, p.verdict, p.explanation[0]) for p in result.pairs]


@pytest.mark.parametrize("judging", [None, "tolerance_only"])
def test_a_lean_result_is_judged_as_it_was_with_its_weights(tmp_path: Path, judging: str | None) -> None:
    """Without its weights files the golden result gives every pair the verdict and headline it had with them (under either
    policy), every pair it measured says it was judged from what was kept, and a warning names the cells without weights."""
    path = _golden_copy(tmp_path)
    whole = load_result(path, judging)
    assert _lean(path) == 6
    lean = load_result(path, judging)
    assert _verdicts(lean) == _verdicts(whole) and [p.verdict for p in lean.pairs][:2] == ["identical", "identical"]
    assert lean.pairs[0].details["weights"] == whole.pairs[0].details["weights"]
    measured = [p for p in lean.pairs if p.verdict == "identical"]
    assert measured and all(any("judged from the measurements the result kept" in line for line in p.explanation) for p in measured)
    assert any(w.startswith("final weights not present for 6 cell(s)") for w in lean.warnings)
    assert all(c.record is None or c.record.weights_path is None for c in lean.cells)  # no path to nothing
    assert [c.verdict for c in lean.cells] == [c.verdict for c in whole.cells]


def test_a_lean_result_saves_and_loads_again(tmp_path: Path) -> None:
    """Saved again (merge --json does), a lean result names no weights and keeps what it kept: the same verdicts on load."""
    path = _golden_copy(tmp_path / "a")
    _lean(path)
    lean = load_result(path)
    again = tmp_path / "again.json"
    save_result(lean, again)
    assert _verdicts(load_result(again)) == _verdicts(lean)


def test_a_pair_across_lean_results_is_identical_by_digest_and_otherwise_an_error_naming_why(tmp_path: Path) -> None:
    """Two lean results' cells that never met: bitwise-equal digests make the pair identical; digests that differ cannot
    say how far apart the tensors are, so the pair is an error naming the weights that are not present."""
    from tests.unit.store.test_merge import _slice

    for side, frontend in (("a", "python"), ("b", "r")):
        whole = load_result(_golden_copy(tmp_path / side))
        cells = tuple(dataclasses.replace(c, weights=None if c.weights is None else dataclasses.replace(c.weights, compared={}))
                      for c in whole.cells)  # as if each slice ran alone: nothing measured across them
        save_result(_slice(dataclasses.replace(whole, cells=cells), frontend), tmp_path / side / "slice.json")
        _lean(tmp_path / side / "golden.json")
    merged = merge_results([tmp_path / "a" / "slice.json", tmp_path / "b" / "slice.json"])
    default, autocast = merged.pairs[0], merged.pairs[1]
    assert default.verdict == autocast.verdict == "identical"  # python and r agree bitwise in the golden run
    assert any("judged from the tensor digests the results kept: bitwise equal" in line for line in default.explanation)
    # another r slice whose default weights differ by one tensor's digest, and nothing was measured across
    other = load_result(tmp_path / "b" / "slice.json")
    cell = next(c for c in other.cells if c.mode == "default")
    assert cell.weights is not None
    digest = dataclasses.replace(cell.weights.tensors["layer0.bias"], sha256="0" * 64)
    changed = dataclasses.replace(cell.weights, tensors={**cell.weights.tensors, "layer0.bias": digest})
    other = dataclasses.replace(other, cells=tuple(dataclasses.replace(c, weights=changed) if c is cell else c for c in other.cells))
    save_result(other, tmp_path / "b" / "slice.json", overwrite=True)
    judged = merge_results([tmp_path / "a" / "slice.json", tmp_path / "b" / "slice.json"]).pairs[0]
    assert judged.verdict == "error" and "final weights" in judged.summary and "the file is not present" in judged.summary


def test_save_refuses_a_result_whose_weights_are_gone(tmp_path: Path) -> None:
    """A result whose weights files went while it was in memory is refused, naming the cell, and nothing is written."""
    path = _golden_copy(tmp_path / "run")
    result = load_result(path)
    first = next(c for c in result.cells if c.record is not None)
    assert first.record is not None and first.record.weights_path is not None
    Path(first.record.weights_path).unlink()
    with pytest.raises(ResultError, match=rf"cells\[0\] \({first.id}\) names final weights .* that are gone \(1 cell\(s\) in all\)"):
        save_result(result, tmp_path / "copy.json")
    assert not (tmp_path / "copy.json").exists()


def test_a_runner_without_a_folder_for_the_weights_is_refused() -> None:
    """``MatrixRunner(spec, ("python",))`` no longer hands out weights paths that vanish when it closes: it is refused at once."""
    from harness.run.runner import MatrixRunner

    with pytest.raises(UsageError, match="MatrixRunner staging must be a folder that outlives the runner"):
        MatrixRunner(WorkloadSpec.from_preset("tiny"), ("python",))
