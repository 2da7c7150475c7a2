"""The models beside the MLP (harness/contract/models.py), each run in both languages from its own fixtures: its cells
ran, its Python cells pass their own check against the model's float64 reference, and each pair's verdict is the one
its R torch findings explain (docs/bugs/), the trace naming the first differing tensor inside the model.

They need R torch: they skip with the reason when it is absent and fail under ``AMP_PARITY_REQUIRE_R=1``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.judge.assess import assess_result
from harness.judge.known_differences import load_known_differences
from harness.model.result import MatrixResult
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.spec import FIXTURE_FIELDS, WorkloadSpec
from tests.support import kept_workers, require_r_torch


def _run(availability: Availability, tmp_path: Path, model: str, modes: tuple[str, ...], optimizers: tuple[str, ...]) -> MatrixResult:
    require_r_torch(availability)
    with MatrixRunner(WorkloadSpec.from_preset("tiny", model=model), ("python", "r"), timeout=300, availability=availability,
                      staging=tmp_path, kept=kept_workers()) as runner:
        return runner.run(modes, optimizers, measure=False)


def test_the_transformer_pairs_are_proven_by_its_three_entries(availability: Availability, tmp_path: Path) -> None:
    """The transformer classifier: Python's cells pass against the float64 reference; R's fail it, excused (its
    cross-entropy shifts probability targets by -1, docs/bugs/cross-entropy-probability-targets). Each pair parts at
    step 0 at the encoder layer's output (PyTorch's scaled_dot_product_attention against R torch's written-out
    attention) and is proven: with the attention's switch (Python) and the two bugs' (R: the embedding's padding row,
    the cross-entropy's probability targets) the whole run is bitwise identical; under the gradient-norm clip, with R's
    modules listing their own parameters first too (the clip's norm sums in PyTorch's order)."""
    result = _run(availability, tmp_path, "transformer", ("default", "autocast_scaler_clip"), ("adam",))
    assert all(c.ok for c in result.cells), [(c.id, c.status, c.reason) for c in result.cells]
    assert {c.id for c in result.cells} == {f"{s}-{m}-adam@transformer-{f}-cpu" for s, m in (
        ("with_autocast", "default"), ("cuda_amp_grad_scaler", "default"), ("cuda_amp_grad_scaler", "autocast_scaler_clip"))
        for f in ("python", "r")}
    python = [c for c in result.cells if c.frontend == "python"]
    assert all(c.verdict is not None and c.verdict.outcome == "pass" for c in python), [c.verdict for c in python]
    r_cells = [c for c in result.cells if c.frontend == "r"]
    assert all(c.verdict is not None and c.verdict.outcome == "excused" for c in r_cells), [c.verdict for c in r_cells]
    assert all(c.weights is not None and "encoder.self_attn.in_proj_weight" in c.weights.tensors for c in result.cells)
    for pair in result.pairs:
        assert pair.verdict == "known_difference", pair.explain()
        explained = pair.explain()
        assert "attention-sdpa-vs-explicit: first differs at step 0, forward.encoder" in explained, explained
        assert all(s in explained for s in ("py-attention-explicit", "r-embedding-padding-idx-zero-based",
                                            "r-cross-entropy-probability-targets", "the whole run is bitwise identical")), explained
        assert ("r-module-parameters-own-first" in explained) == (pair.mode == "autocast_scaler_clip"), explained


@pytest.mark.parametrize(("left_out", "mode", "still_differs"), [
    ("embedding-padding-idx", "default", "step 0, grad.backward.embed.weight"),
    ("cross-entropy-probability-targets", "default", "step 0, loss"),
    ("multihead-attention-parameter-order", "autocast_scaler_clip", "step 0, clip.total_norm"),
])
def test_each_transformer_entry_is_needed_for_its_proof(availability: Availability, tmp_path: Path, left_out: str, mode: str,
                                                        still_differs: str) -> None:
    """Without one of the bugs' entries (and so its switch) the reconciled runs still differ where that bug acts, and
    the pair is ``diverged``, naming it: each entry explains a part of the difference the others do not."""
    known = tuple(k for k in load_known_differences() if k.id != left_out)
    require_r_torch(availability)
    with MatrixRunner(WorkloadSpec.from_preset("tiny", model="transformer"), ("python", "r"), timeout=300,
                      availability=availability, staging=tmp_path, known=known, kept=kept_workers()) as runner:
        result = runner.run((mode,), ("sgd",), measure=False)
    pair = next(p for p in result.pairs if p.mode == mode)
    assert pair.verdict == "diverged", pair.explain()
    assert f"the runs still differ at {still_differs}" in pair.explain(), pair.explain()


def test_label_smoothing_is_unsupported_in_r_in_its_own_words(availability: Availability, tmp_path: Path) -> None:
    """The ``transformer_smoothing`` row (both cross-entropies with ``label_smoothing = 0.1``, as PyTorch users pass
    it): Python's cells train and pass their float64 check (the reference smooths as ``CrossEntropyLoss`` documents);
    R torch's ``nn_cross_entropy_loss()`` has no such argument, so R's cells are ``unsupported``, in R's words."""
    result = _run(availability, tmp_path, "transformer_smoothing", ("default",), ("sgd",))
    python = [c for c in result.cells if c.frontend == "python"]
    assert python and all(c.ok and c.verdict is not None and c.verdict.outcome == "pass" for c in python), [
        (c.id, c.status, c.reason, c.verdict) for c in python]
    r_cells = [c for c in result.cells if c.frontend == "r"]
    assert r_cells and all(c.status == "unsupported" for c in r_cells), [(c.id, c.status, c.reason) for c in r_cells]
    assert all("unused argument (label_smoothing = 0.1)" in (c.reason or "") for c in r_cells), [c.reason for c in r_cells]


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


def test_two_param_groups_train_every_transformer_parameter(availability: Availability, tmp_path: Path) -> None:
    """The loop feature ``param_groups`` (weights in one group, every other parameter in a second): the transformer's
    ``in_proj_weight`` is named neither ``.weight`` nor ``.bias``, and Python's second group once left it out of both
    (R's twin trained it), so the pair diverged at ``param.stepped.encoder.self_attn.in_proj_weight``; now it is the
    model's own entries, proven."""
    require_r_torch(availability)
    with MatrixRunner(WorkloadSpec.from_preset("tiny", model="transformer"), ("python", "r"), timeout=300,
                      availability=availability, staging=tmp_path, kept=kept_workers()) as runner:
        result = runner.run(("default",), ("sgd",), measure=False, features=("param_groups",))
    assert result.pairs and all(p.verdict == "known_difference" and "the whole run is bitwise identical" in p.explain()
                                for p in result.pairs), [p.explain() for p in result.pairs]


def test_a_matrix_of_several_models_trains_each_from_its_own_fixtures(tmp_path: Path) -> None:
    """One run of the MLP and the GRU (Python alone: no R torch needed): the fixtures are built once per model, the MLP's
    with the digest they always had; each cell trains its model (the GRU's weights are its own tensors) and passes against
    its own model's float64 reference (a GRU cell judged against the MLP's losses would fail); the result stores the
    GRU's trajectories with their model, reads back byte for byte, and judges each cell with its model's spec."""
    spec = WorkloadSpec.from_preset("tiny", num_batches=4, epochs=1)  # 4 steps: the float64 references cost little
    cache = tmp_path / "fixtures"
    with MatrixRunner(spec, ("python",), staging=tmp_path, fixture_cache=cache, kept=kept_workers()) as runner:
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
