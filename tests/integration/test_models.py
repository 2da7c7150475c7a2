"""The models beside the MLP (harness/contract/models.py), each run in both languages from its own fixtures: its cells
ran, its Python cells pass their own check against the model's float64 reference, and each pair's verdict is the one
its R torch findings explain (docs/bugs/), the trace naming the first differing tensor inside the model.

They need R torch: they skip with the reason when it is absent and fail under ``AMP_PARITY_REQUIRE_R=1``.
"""

from __future__ import annotations

from pathlib import Path

from harness.judge.assess import assess_result
from harness.model.result import MatrixResult
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.spec import FIXTURE_FIELDS, WorkloadSpec
from tests.support import require_r_torch


def _run(availability: Availability, tmp_path: Path, model: str, modes: tuple[str, ...], optimizers: tuple[str, ...]) -> MatrixResult:
    require_r_torch(availability)
    with MatrixRunner(WorkloadSpec.from_preset("tiny", model=model), ("python", "r"), timeout=300, availability=availability,
                      staging=tmp_path) as runner:
        return runner.run(modes, optimizers, measure=False)


def test_the_transformer_runs_in_both_languages_and_its_pair_names_the_encoder(availability: Availability, tmp_path: Path) -> None:
    """The transformer classifier: Python's cells pass against the float64 reference; R's do not (its cross-entropy
    shifts probability targets by -1, docs/bugs/cross-entropy-probability-targets), and the pair parts at step
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


def test_the_convnet_pairs_bitwise_with_both_optimizer_families(availability: Availability, tmp_path: Path) -> None:
    """The conv net (reflect and circular padding, batch norm, group norm, max pool, bilinear interpolation, average
    pool): with an R-code optimizer and an ignite one, in float32 and under autocast, every SGD pair is bitwise identical
    (the batch norm's running statistics traced at each step) and every ignite Adam pair is the optimizer's known
    difference, proven by its switch (its trace names a conv net parameter, its final weights compared by name), and
    every float32 cell passes its float64 check. Under
    bfloat16 autocast the two languages' verdicts are the same (the conv net's bound is the MLP's times its row's measured
    factor: PyTorch's own autocast cells are up to 5.9x the MLP's from float64)."""
    result = _run(availability, tmp_path, "convnet", ("default", "autocast"), ("sgd", "ignite_adam"))
    assert len(result.cells) == 12 and all(c.ok and c.verdict is not None for c in result.cells), [
        (c.id, c.status, c.reason) for c in result.cells]
    assert all(c.verdict is not None and c.verdict.outcome == "pass" for c in result.cells if c.mode == "default"), [
        (c.id, c.verdict and c.verdict.reason) for c in result.cells]
    assert len(result.pairs) == 6 and all(p.verdict == "identical" for p in result.pairs if p.optimizer == "sgd"), [
        p.explain() for p in result.pairs]
    ignite = [p for p in result.pairs if p.optimizer == "ignite_adam"]
    assert len(ignite) == 3 and all(p.verdict == "known_difference" and "proven" in p.explain() for p in ignite), [
        p.explain() for p in ignite]
    by_pair: dict[str, set[str]] = {}
    for c in result.cells:
        assert c.verdict is not None
        by_pair.setdefault(c.cell.pair, set()).add(c.verdict.outcome)
    assert all(len(outcomes) == 1 for outcomes in by_pair.values()), by_pair
    assert all(c.id.split("-")[2].endswith("@convnet") for c in result.cells)
    traced = result.pairs[0].details["trace"]["points"][0]
    assert traced > 0


def test_the_gru_pairs_with_both_optimizer_families(availability: Availability, tmp_path: Path) -> None:
    """The recurrent model (a GRU, whose parameters R torch names from layer 1: copied in order): every cell passes its
    float64 check; SGD's pairs are bitwise identical, ignite Adam's the optimizer's known difference, proven."""
    result = _run(availability, tmp_path, "gru", ("default", "autocast"), ("sgd", "ignite_adam"))
    assert len(result.cells) == 12 and all(c.ok and c.verdict is not None and c.verdict.outcome == "pass" for c in result.cells), [
        (c.id, c.status, c.reason, c.verdict and c.verdict.reason) for c in result.cells]
    assert all(p.verdict == "identical" for p in result.pairs if p.optimizer == "sgd"), [p.explain() for p in result.pairs]
    assert all(p.verdict == "known_difference" and "proven" in p.explain() for p in result.pairs if p.optimizer == "ignite_adam")
    assert all(c.weights is not None and "gru.weight_hh_l0" in c.weights.tensors for c in result.cells)


def test_a_matrix_of_several_models_trains_each_from_its_own_fixtures(tmp_path: Path) -> None:
    """One run of the MLP and the GRU (Python alone: no R torch needed): the fixtures are built once per model, the MLP's
    with the digest they always had; each cell trains its model (the GRU's weights are its own tensors) and passes against
    its own model's float64 reference (a GRU cell judged against the MLP's losses would fail); the result stores the
    GRU's trajectories with their model, reads back byte for byte, and judges each cell with its model's spec."""
    spec = WorkloadSpec.from_preset("tiny", num_batches=4, epochs=1)  # 4 steps: the float64 references cost little
    cache = tmp_path / "fixtures"
    with MatrixRunner(spec, ("python",), staging=tmp_path, fixture_cache=cache) as runner:
        result = runner.run(("default",), ("sgd",), models=("mlp", "gru"), measure=False)
        assert runner.fixture.digest == spec.digest(FIXTURE_FIELDS)
        assert set(runner.pool.model_fixtures) == {"gru"}
        assert runner.pool.model_fixtures["gru"].digest == spec.for_model("gru").digest(FIXTURE_FIELDS) != runner.fixture.digest
    assert sorted(p.name for p in cache.iterdir()) == sorted({runner.fixture.digest, spec.for_model("gru").digest(FIXTURE_FIELDS)})
    assert [c.id for c in result.cells] == ["with_autocast-default-sgd-python-cpu", "cuda_amp_grad_scaler-default-sgd-python-cpu",
                                            "with_autocast-default-sgd@gru-python-cpu", "cuda_amp_grad_scaler-default-sgd@gru-python-cpu"]
    assert result.spec_digest == spec.digest()
    for cell in result.cells:
        assert cell.ok and cell.verdict is not None and cell.verdict.outcome == "pass", (cell.id, cell.reason, cell.verdict)
        assert cell.weights is not None and ("gru.weight_ih_l0" in cell.weights.tensors) == (cell.cell.model == "gru")
        assert result.run_of(cell).spec.model == cell.cell.model
    models = [t.get("model", "mlp") for t in result.reference.trajectories]
    assert "gru" in models and "mlp" in models
    again = MatrixResult.from_json(result.to_json())
    assert again.to_json() == result.to_json()
    assert [c.verdict for c in assess_result(again).cells] == [c.verdict for c in result.cells]
