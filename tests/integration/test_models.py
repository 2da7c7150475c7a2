"""The models beside the MLP (harness/contract/models.py), each run in both languages from its own fixtures: its cells
ran, its Python cells pass their own check against the model's float64 reference, and each pair's verdict is the one
its R torch findings explain (docs/bugs/), the trace naming the first differing tensor inside the model.

They need R torch: they skip with the reason when it is absent and fail under ``AMP_PARITY_REQUIRE_R=1``.
"""

from __future__ import annotations

from pathlib import Path

from harness.model.result import MatrixResult
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.spec import WorkloadSpec
from tests.support import require_r_torch


def _run(availability: Availability, tmp_path: Path, model: str, modes: tuple[str, ...], optimizers: tuple[str, ...]) -> MatrixResult:
    require_r_torch(availability)
    with MatrixRunner(WorkloadSpec.from_preset("tiny", model=model), ("python", "r"), timeout=300, availability=availability,
                      staging=tmp_path) as runner:
        return runner.run(modes, optimizers, measure=False)


def test_the_transformer_runs_in_both_languages_and_its_pair_names_the_encoder(availability: Availability, tmp_path: Path) -> None:
    """The transformer classifier: Python's cells pass against the float64 reference; R's do not (its cross-entropy
    shifts probability targets by -1, docs/bugs/cross-entropy-probability-targets-shifted), and the pair parts at step
    0 inside the model, at the encoder layer's output (R torch's multi-head attention is R code of its own), before the
    loss."""
    result = _run(availability, tmp_path, "transformer", ("default",), ("adam",))
    assert all(c.ok for c in result.cells), [(c.id, c.status, c.reason) for c in result.cells]
    assert {c.id for c in result.cells} == {f"{s}-default-adam@transformer-{f}-cpu" for s in ("with_autocast", "cuda_amp_grad_scaler")
                                            for f in ("python", "r")}
    python = [c for c in result.cells if c.frontend == "python"]
    assert all(c.verdict is not None and c.verdict.outcome == "pass" for c in python), [c.verdict for c in python]
    r_cells = [c for c in result.cells if c.frontend == "r"]
    assert all(c.verdict is not None and c.verdict.outcome == "fail" for c in r_cells)
    assert all(c.weights is not None and "encoder.self_attn.in_proj_weight" in c.weights.tensors for c in result.cells)
    for pair in result.pairs:
        assert pair.verdict == "diverged", pair.explain()
        assert "first differs at step 0, forward.encoder" in pair.explain()
