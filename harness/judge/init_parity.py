"""The nn_init comparison judged: each case of :mod:`harness.contract.nn_init` bitwise, and every difference explained.

Each case gets one verdict, from the two files the twin scripts wrote (``py_scripts/nn_init.py`` ↔ ``r_scripts/nn_init.R``):

- ``identical``: both initialised the tensor, with the same dtype, shape and bytes;
- ``diverged``: both did, and something differs;
- ``unsupported``: PyTorch ran the case and R torch refused it (R's own words are kept);
- ``r_accepts``: PyTorch refused the case (its words are kept) and R torch initialised the tensor anyway;
- ``both_refuse``: both refused (a shape the function does not take): parity, with both messages kept.

A case that is neither identical nor refused by both needs an explanation (:data:`INIT_EXPLANATIONS`): an R torch bug
with its folder in docs/bugs/, a difference between two defensible algorithms, or a function R torch does not implement.
An explanation of a ``diverged`` case is **proven** as a known difference is: it names a *switch*, a function in
``py_scripts/nn_init.py`` that computes the case as R torch does (its algorithm, written in PyTorch), which must give R's
bytes exactly. An explanation that matches no case is stale. ``python -m harness inits`` fails on an unexplained case,
an unproven explanation or a stale one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.contract.nn_init import InitVerdict

__all__ = [
    "INIT_EXPLANATIONS", "TRUNC_NORMAL_PNORM", "InitExplanation", "InitOutcome", "InitParity", "VERDICTS",
    "judge_init_cases", "read_init_file", "switched_id", "switches_for",
]

#: Every verdict a case may get, in the order the summary lists them.
VERDICTS = tuple(InitVerdict)
#: The verdicts that need no explanation: parity.
_PARITY = (InitVerdict.IDENTICAL, InitVerdict.BOTH_REFUSE)


@dataclass(frozen=True)
class InitExplanation:
    """Why some cases are not identical. ``functions`` and ``where`` select the cases (``where`` keys: ``dtype``,
    ``ndim``, ``options``: a subset of the case's options, ``options_absent``: options the case must not pass);
    ``verdict`` is what they get; ``error``, a regular expression R's (``unsupported``) or PyTorch's (``r_accepts``)
    message must match; ``switch``, for ``diverged``, the Python function computing the case as R torch does (the proof),
    with ``switch_data``, numbers R computes that PyTorch has no function for (measured in R, checked against it by a test);
    ``kind`` is ``bug`` (docs/bugs/<id>/ holds its reproducers and report), ``difference`` or ``unimplemented``."""

    id: str
    kind: str
    functions: tuple[str, ...]
    verdict: InitVerdict
    title: str
    sources: tuple[str, ...]
    where: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    switch: str | None = None
    switch_data: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, case: Mapping[str, Any]) -> bool:
        """Whether the explanation selects ``case`` (its verdict aside)."""
        if case["function"] not in self.functions:
            return False
        shape = case["shape"]
        if "dtype" in self.where and case["dtype"] != self.where["dtype"]:
            return False
        if "ndim" in self.where and (shape is None or len(shape) not in self.where["ndim"]):
            return False
        options = case["options"]
        if any(options.get(k, _ABSENT) != v for k, v in self.where.get("options", {}).items()):
            return False
        return not any(k in options for k in self.where.get("options_absent", ()))


_ABSENT = object()

#: R's ``stats::pnorm(x)`` at the standardised bounds ``(a - mean) / std`` of the trunc_normal_ cases, exactly (hex), for
#: the switch ``trunc_normal_by_inverse_cdf``: R torch's sampler starts from them, and PyTorch has no pnorm. R's pnorm is
#: not Python's ``(1 + erf(x / sqrt(2))) / 2`` to the last bit (at -0.75: ...a4f against ...a4e, the correctly rounded
#: value), which moves a float64 tensor's bounds of the uniform draw by an ULP. Measured with
#: ``Rscript -e 'sprintf("%a", pnorm(x))'`` (R 4.2.2); tests/integration/test_init_parity.py checks them against R.
TRUNC_NORMAL_PNORM = {
    "-2.0": "0x1.74bcf82c9d861p-6", "2.0": "0x1.f45a183e9b13dp-1", "-0.75": "0x1.d0220056b3a4fp-3",
    "1.25": "0x1.c9e845da8ac7bp-1", "1.0": "0x1.aec4bd120d37dp-1", "4.0": "0x1.fffbd94a1aad4p-1",
}
_R = "R torch 0.17.0.9000 (mlverse/torch e4de110)"
_PY = "torch 2.13.0"

#: The explanations, each with the source lines on both sides.
INIT_EXPLANATIONS: tuple[InitExplanation, ...] = (
    InitExplanation(
        "init-orthogonal-dtype", "bug", ("orthogonal_",), InitVerdict.DIVERGED,
        "nn_init_orthogonal_() draws its Gaussian matrix in the default dtype (float32), whatever the tensor's dtype",
        (f"r: R/nn-init.R:374 ({_R}) nn_init_orthogonal_: flattened <- torch_randn(rows, cols), the default dtype",
         f"python: torch/nn/init.py:702 ({_PY}) flattened = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator)"),
        where={"dtype": "float64", "ndim": (2, 3, 4, 5)}, switch="orthogonal_in_float32",
    ),
    InitExplanation(
        "trunc-normal-algorithm", "difference", ("trunc_normal_",), InitVerdict.DIVERGED,
        "trunc_normal_: R torch samples by the inverse CDF (uniform_, then erfinv_); PyTorch 2.13 by redrawing or rejecting",
        (f"r: R/nn-init.R:15-33 ({_R}) nn_init_no_grad_trunc_normal: l, u from stats::pnorm; uniform_(2l-1, 2u-1), "
         "erfinv_, mul_, add_, clamp_",
         f"python: torch/nn/init.py:108-159 ({_PY}) normal_ and redraws outside [a, b] if the mass inside is > 0.3, else "
         "uniform_ candidates accepted by their log-density"),
        switch="trunc_normal_by_inverse_cdf", switch_data={"pnorm": TRUNC_NORMAL_PNORM},
    ),
    InitExplanation(
        "init-gain-selu", "bug", ("calculate_gain", "kaiming_uniform_", "kaiming_normal_"), InitVerdict.UNSUPPORTED,
        "nn_init_calculate_gain() has no 'selu' (PyTorch: 3/4), so nn_init_kaiming_*(nonlinearity = 'selu') stop too",
        (f"r: R/nn-init.R:69-89 ({_R}) nn_init_calculate_gain: linear, conv*, sigmoid, tanh, relu, leaky_relu, else an error; "
         "nn_init_kaiming_uniform_ and nn_init_kaiming_normal_ call it: gain <- nn_init_calculate_gain(nonlinearity, a)",
         f"python: torch/nn/init.py:239-241 ({_PY}) elif nonlinearity == 'selu': return 3.0 / 4"),
        where={"options": {"nonlinearity": "selu"}}, error=r"^Unsupported nonlinearity: selu$",
    ),
    InitExplanation(
        "init-dirac-unimplemented", "unimplemented", ("dirac_",), InitVerdict.UNSUPPORTED,
        "nn_init_dirac_() is exported but stops with 'not implemented'",
        (f"r: R/nn-init.R:222-229 ({_R}) nn_init_dirac_: computes the sizes, then not_implemented_error('not implemented')",),
        where={"ndim": (3, 4, 5)}, error=r"^not implemented$",
    ),
    InitExplanation(
        "init-sparse-unimplemented", "unimplemented", ("sparse_",), InitVerdict.UNSUPPORTED,
        "nn_init_sparse_() is exported but stops with 'not implemented'",
        (f"r: R/nn-init.R:420-422 ({_R}) nn_init_sparse_: not_implemented_error('not implemented')",),
        error=r"^not implemented$",
    ),
    InitExplanation(
        "init-eye-any-rank", "bug", ("eye_",), InitVerdict.R_ACCEPTS,
        "nn_init_eye_() takes a tensor of any rank and torch_eye_out() resizes it to 2-D (4x3x3x3 to 4x3; PyTorch refuses)",
        (f"r: R/nn-init.R:198-201 ({_R}) nn_init_eye_: torch_eye_out(tensor, size[1], size[2]), no check of the rank",
         f"python: torch/nn/init.py:394-395 ({_PY}) eye_: if tensor.ndimension() != 2: raise ValueError"),
        where={"ndim": (1, 3, 4, 5)}, error=r"^Only tensors with 2 dimensions are supported$",
    ),
    InitExplanation(
        "init-orthogonal-any-rank", "difference", ("orthogonal_",), InitVerdict.R_ACCEPTS,
        "nn_init_orthogonal_() takes a 1-D tensor (as a 7 × 1 matrix); PyTorch refuses fewer than 2 dimensions",
        (f"r: R/nn-init.R:371-374 ({_R}) nn_init_orthogonal_: rows <- tensor$size(1), no check of the rank",
         f"python: torch/nn/init.py:694-695 ({_PY}) orthogonal_: if tensor.ndimension() < 2: raise ValueError"),
        where={"ndim": (1,)}, error=r"^Only tensors with 2 or more dimensions are supported$",
    ),
    InitExplanation(
        "init-fan-out-vector", "difference", ("kaiming_uniform_", "kaiming_normal_"), InitVerdict.R_ACCEPTS,
        "R's fans of a 1-D tensor are NA (fan in: tensor$size(2) is NA) and its length (fan out): nn_init_kaiming_*("
        "mode = 'fan_out') initialises a vector, where PyTorch refuses fewer than 2 dimensions",
        (f"r: R/nn-init.R:232-236 ({_R}) nn_init_calculate_fan_in_and_fan_out: tensor$size(2) of a 1-D tensor, no check of the rank",
         f"python: torch/nn/init.py:458-463 ({_PY}) _calculate_fan_in_and_fan_out: if dimensions < 2: raise ValueError"),
        where={"ndim": (1,), "options": {"mode": "fan_out"}}, error=r"^Fan in and fan out can not be computed",
    ),
)


def switched_id(case_id: str) -> str:
    """The key under which the Python script writes a case computed as R torch does (its explanation's switch)."""
    return f"{case_id} @switch"


@dataclass(frozen=True)
class InitOutcome:
    """One case judged: its verdict, the explanation that covers it (if any, and whether it is proven), and what was seen
    (``detail``: the elements that differ, or each side's error)."""

    case: Mapping[str, Any]
    verdict: InitVerdict
    detail: str
    explanation: str | None = None
    proven: bool | None = None

    @property
    def explained(self) -> bool:
        """Identical, refused by both, or covered by its explanation (proven where it needs a proof)."""
        return self.verdict in _PARITY or (self.explanation is not None and self.proven is not False)

    def to_json(self) -> dict[str, Any]:
        """As the command writes it (init-parity.json)."""
        return {"id": self.case["id"], "verdict": self.verdict.value, "detail": self.detail, "explanation": self.explanation,
                "proven": self.proven}


@dataclass(frozen=True)
class InitParity:
    """Every case judged, the explanations no case matched, and both bindings' versions."""

    outcomes: tuple[InitOutcome, ...]
    stale: tuple[str, ...]
    versions: Mapping[str, Any]

    @property
    def unexplained(self) -> tuple[InitOutcome, ...]:
        """The cases that fail the comparison: not identical, not refused by both, and not (provably) explained."""
        return tuple(o for o in self.outcomes if not o.explained)

    @property
    def ok(self) -> bool:
        """Nothing unexplained and nothing stale."""
        return not self.unexplained and not self.stale

    def counts(self) -> dict[str, dict[str, int]]:
        """Per function, the number of cases of each verdict (by its name)."""
        table: dict[str, dict[str, int]] = {}
        for o in self.outcomes:
            row = table.setdefault(o.case["function"], {v.value: 0 for v in VERDICTS})
            row[o.verdict.value] += 1
        return table

    def to_json(self) -> dict[str, Any]:
        """What ``inits --out`` writes (init-parity.json): versions, counts, every case, the stale explanations."""
        return {"versions": dict(self.versions), "counts": self.counts(), "stale": list(self.stale),
                "cases": [o.to_json() for o in self.outcomes]}


def read_init_file(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str], dict[str, Any]]:
    """A script's output: its tensors (as NumPy arrays), its errors by case id, and its versions."""
    from safetensors import safe_open

    tensors: dict[str, np.ndarray] = {}
    with safe_open(str(path), framework="np") as handle:
        metadata = handle.metadata() or {}
        for key in handle.keys():
            tensors[key] = handle.get_tensor(key)
    return tensors, json.loads(metadata.get("errors", "{}")), json.loads(metadata.get("versions", "{}"))


def _bytes_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _difference(a: np.ndarray, b: np.ndarray) -> str:
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"python {a.dtype}{list(a.shape)}, r {b.dtype}{list(b.shape)}"
    differ = int(np.count_nonzero(a.reshape(-1).view(f"u{a.itemsize}") != b.reshape(-1).view(f"u{b.itemsize}")))
    largest = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
    return f"{differ} of {a.size} elements differ, the most by {largest:.3g}"


def judge_init_cases(cases: Sequence[Mapping[str, Any]], python_file: Path, r_file: Path,
                     explanations: Sequence[InitExplanation] = INIT_EXPLANATIONS) -> InitParity:
    """Judge every case from the two scripts' files (see the module docstring)."""
    py, py_errors, py_versions = read_init_file(python_file)
    r, r_errors, r_versions = read_init_file(r_file)
    outcomes = []
    used: set[str] = set()
    for case in cases:
        key = case["id"]
        if key in py and key in r:
            same = _bytes_equal(py[key], r[key])
            verdict, detail = ((InitVerdict.IDENTICAL, "bitwise identical") if same
                               else (InitVerdict.DIVERGED, _difference(py[key], r[key])))
        elif key in py:
            verdict, detail = InitVerdict.UNSUPPORTED, f"R torch: {r_errors.get(key, 'no result and no error')}"
        elif key in r:
            verdict, detail = InitVerdict.R_ACCEPTS, f"PyTorch: {py_errors.get(key, 'no result and no error')}"
        else:
            verdict, detail = InitVerdict.BOTH_REFUSE, f"PyTorch: {py_errors.get(key)}; R torch: {r_errors.get(key)}"
        outcome = InitOutcome(case, verdict, detail)
        if verdict not in _PARITY:
            outcome = _explained(outcome, explanations, py, r, r_errors, py_errors)
            if outcome.explanation is not None:
                used.add(outcome.explanation)
        outcomes.append(outcome)
    stale = tuple(e.id for e in explanations if e.id not in used)
    return InitParity(tuple(outcomes), stale, {"python": py_versions, "r": r_versions})


def _explained(outcome: InitOutcome, explanations: Sequence[InitExplanation], py: Mapping[str, np.ndarray],
               r: Mapping[str, np.ndarray], r_errors: Mapping[str, str], py_errors: Mapping[str, str]) -> InitOutcome:
    """The outcome with the explanation that matches it (and its proof), or as it was."""
    case = outcome.case
    for e in explanations:
        if e.verdict != outcome.verdict or not e.matches(case):
            continue
        key = case["id"]
        if e.verdict is InitVerdict.DIVERGED:
            switched = py.get(switched_id(key))
            proven = switched is not None and _bytes_equal(switched, r[key])
            return InitOutcome(case, outcome.verdict, outcome.detail, e.id, proven)
        message = r_errors.get(key, "") if e.verdict is InitVerdict.UNSUPPORTED else py_errors.get(key, "")
        if e.error is None or re.search(e.error, message):
            return InitOutcome(case, outcome.verdict, outcome.detail, e.id, True)
    return outcome


def switches_for(case: Mapping[str, Any], explanations: Sequence[InitExplanation] = INIT_EXPLANATIONS) -> list[dict[str, Any]]:
    """The switches the Python script runs for ``case`` beside it (``{"name", "data"}``): those of the ``diverged``
    explanations that select it."""
    return [{"name": e.switch, "data": dict(e.switch_data)} for e in explanations
            if e.switch and e.verdict is InitVerdict.DIVERGED and e.matches(case)]

