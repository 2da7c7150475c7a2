"""The nn_init judgement, from two scripts' files written here (NumPy, no torch): each verdict, each explanation's proof.

tests/integration/test_init_parity.py runs the real scripts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from harness.contract.nn_init import INIT_ROWS, InitVerdict, init_cases
from harness.judge.init_parity import INIT_EXPLANATIONS, InitExplanation, judge_init_cases, switched_id, switches_for


def _case(function: str, shape: list[int] | None = (2, 2), dtype: str = "float32", **options: object) -> dict[str, object]:
    return {"id": f"{function} {shape} {dtype} {options}", "function": function, "shape": None if shape is None else list(shape),
            "dtype": dtype, "options": options}


def _write(path: Path, tensors: dict[str, np.ndarray], errors: dict[str, str]) -> Path:
    save_file(tensors, str(path), metadata={"errors": json.dumps(errors), "versions": json.dumps({"binding": path.stem})})
    return path


VALUES = np.arange(4, dtype=np.float32).reshape(2, 2)
OTHER = VALUES + np.float32(1)


def test_each_verdict_from_what_the_files_hold(tmp_path: Path) -> None:
    """Same bytes: identical; other bytes: diverged; R's error: unsupported; PyTorch's: r_accepts; both: both_refuse."""
    same, apart, refused, accepted, neither = (_case(f) for f in ("uniform_", "normal_", "dirac_", "eye_", "xavier_normal_"))
    py = _write(tmp_path / "python.safetensors", {same["id"]: VALUES, apart["id"]: VALUES, refused["id"]: VALUES},
                {accepted["id"]: "Only tensors with 2 dimensions are supported", neither["id"]: "no"})
    r = _write(tmp_path / "r.safetensors", {same["id"]: VALUES.copy(), apart["id"]: OTHER, accepted["id"]: VALUES},
               {refused["id"]: "not implemented", neither["id"]: "nor here"})
    parity = judge_init_cases([same, apart, refused, accepted, neither], py, r, explanations=())
    assert [o.verdict for o in parity.outcomes] == ["identical", "diverged", "unsupported", "r_accepts", "both_refuse"]
    assert parity.outcomes[1].detail == "4 of 4 elements differ, the most by 1"
    assert parity.outcomes[2].detail == "R torch: not implemented" and "nor here" in parity.outcomes[4].detail
    assert [o.case["function"] for o in parity.unexplained] == ["normal_", "dirac_", "eye_"] and not parity.ok


def test_a_difference_is_explained_only_when_its_switch_gives_rs_bytes(tmp_path: Path) -> None:
    """The switch's tensor (written by the Python script beside the case) must equal R's bytes: then proven, else not."""
    explanation = InitExplanation("x", "difference", ("normal_",), InitVerdict.DIVERGED, "t", ("s",), switch="as_r")
    case = _case("normal_")
    assert switches_for(case, [explanation]) == [{"name": "as_r", "data": {}}]
    for switched, proven in ((OTHER, True), (OTHER + np.float32(1), False)):
        py = _write(tmp_path / "python.safetensors", {case["id"]: VALUES, switched_id(case["id"]): switched}, {})
        r = _write(tmp_path / "r.safetensors", {case["id"]: OTHER}, {})
        (outcome,) = judge_init_cases([case], py, r, explanations=[explanation]).outcomes
        assert (outcome.explanation, outcome.proven, outcome.explained) == ("x", proven, proven)


def test_a_refusal_is_explained_only_in_the_words_its_explanation_names(tmp_path: Path) -> None:
    """R's message must match the explanation's pattern (else it covers nothing); an explanation that covers no case is stale."""
    explanation = InitExplanation("gain", "bug", ("calculate_gain",), InitVerdict.UNSUPPORTED, "t", ("s",),
                                  where={"options": {"nonlinearity": "selu"}}, error=r"^Unsupported nonlinearity: selu$")
    unused = InitExplanation("unused", "bug", ("sparse_",), InitVerdict.UNSUPPORTED, "t", ("s",))
    case = _case("calculate_gain", None, "float64", nonlinearity="selu")
    py = _write(tmp_path / "python.safetensors", {case["id"]: np.array([0.75])}, {})
    for said, explained in (("Unsupported nonlinearity: selu", True), ("object 'x' not found", False)):
        r = _write(tmp_path / "r.safetensors", {}, {case["id"]: said})
        parity = judge_init_cases([case], py, r, explanations=[explanation, unused])
        assert parity.outcomes[0].explained is explained
        assert parity.stale == (("unused",) if explained else ("gain", "unused"))


def test_explanations_select_by_dtype_rank_and_options() -> None:
    """``where`` narrows an explanation: the dtype, the rank, options passed, options absent."""
    e = InitExplanation("e", "bug", ("orthogonal_",), InitVerdict.DIVERGED, "t", ("s",),
                        where={"dtype": "float64", "ndim": (2,), "options": {"gain": 2.0}, "options_absent": ("x",)})
    assert e.matches(_case("orthogonal_", (2, 2), "float64", gain=2.0))
    assert not e.matches(_case("orthogonal_", (2, 2), "float32", gain=2.0))
    assert not e.matches(_case("orthogonal_", (2, 2, 2), "float64", gain=2.0))
    assert not e.matches(_case("orthogonal_", (2, 2), "float64"))
    assert not e.matches(_case("orthogonal_", (2, 2), "float64", gain=2.0, x=1))


def test_the_declaration_names_each_case_once_and_every_explanation_a_declared_function() -> None:
    """Case ids are unique (they are the files' keys); each explanation names functions the rows declare; a diverged one a
    switch; a bug its folder in docs/bugs/ with the reproducers and the report."""
    ids = [c["id"] for c in init_cases()]
    assert len(ids) == len(set(ids))
    declared = {row.function for row in INIT_ROWS}
    for e in INIT_EXPLANATIONS:
        assert set(e.functions) <= declared, e.id
        assert (e.switch is not None) == (e.verdict is InitVerdict.DIVERGED), e.id
        assert e.kind in ("bug", "difference", "unimplemented") and e.sources, e.id


@pytest.mark.parametrize("bug", sorted({e.id for e in INIT_EXPLANATIONS if e.kind == "bug"}))
def test_every_init_bug_has_its_folder(bug: str) -> None:
    """A bug explanation has docs/bugs/<id>/ (reproducer.R, reproducer.py, report.md), as the known differences' bugs do."""
    from harness.files.paths import REPO_ROOT

    folder = REPO_ROOT / "docs" / "bugs" / bug
    assert all((folder / name).is_file() for name in ("reproducer.R", "reproducer.py", "report.md")), folder
