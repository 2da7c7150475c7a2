"""Known differences: an entry covers its pairs, matches only its signature, explains a pair only when the reconciled runs
prove it (the whole run identical with its switches on), and an entry whose trigger held on an identical pair is stale."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.errors import KnownDifferencesError
from harness.judge.known_differences import DEFAULT_LIST, KnownDifference, load_known_differences
from harness.judge.pairs import FAILING_VERDICTS, compare_cells
from harness.model.cell_trace import CellTrace
from harness.model.pair_trace import PairTrace, PointDifference
from harness.model.record_points import record_points as points_of_record
from harness.model.result import CellResult
from harness.workload.features import FEATURES
from harness.workload.optimizers import OPTIMIZERS
from tests.twins import by_mode, golden, nudge_one_ulp, twin_cell, with_record

CLIP = "cuda_amp_grad_scaler-autocast_scaler_clip-sgd-cpu"
#: The switches the clip pair's R cell runs with to reconcile (every entry covering it on R's side, for plain SGD).
SWITCHES = ("r-clip-coef-reciprocal", "r-clip-nan-coef")


def _first(step: int = 0, point: str = "clip.coef", distance: int = 1) -> PointDifference:
    return PointDifference(step, point, "bytes", ("float32", "float32"), ((), ()), 1, 1, distance, (), (0.85, 0.8500001))


def _trace(step: int = 0, point: str = "clip.coef", distance: int = 1, clipped: tuple[int, ...] = (0, 1, 2),
           reconciled: bool | None = True, switches: tuple[str, ...] = SWITCHES) -> PairTrace:
    """The clip pair's trace: first parting at ``point``; ``reconciled``: whether the runs with ``switches`` on are identical
    (``None``: no reconciled runs)."""
    return PairTrace(CLIP, ("python", "r"), (300, 300), 22, _first(step, point, distance), (0, "clip.total_norm"),
                     {"clip_engaged": clipped, "always": (0, 1, 2)}, switches=switches if reconciled is not None else (),
                     reconciled_identical=reconciled, reconciled=None if reconciled in (True, None) else _first(1, "optim.param"))


def _identical_trace(clipped: tuple[int, ...]) -> PairTrace:
    return PairTrace(CLIP, ("python", "r"), (300, 300), 300, None, (7, "scaler.growth_tracker"),
                     {"clip_engaged": clipped, "always": (0, 1, 2)})


def _reconciled(cells: tuple[CellResult, CellResult], folder: Path, record_points: bool = True) -> tuple[CellResult, CellResult]:
    """The two cells with reconciled traces (the ``_trace`` PairTrace stands for their comparison) that carry their runs'
    records (``record_points``), as every trace the harness writes does since issue 37."""
    out = []
    for cell in cells:
        assert cell.record is not None
        points = points_of_record(cell.record, None) if record_points else ((0, "loss", "float32", (), "0" * 32, 1.0),)
        trace = CellTrace(points, "blake3", ("r-clip-coef-reciprocal",)).write(folder / f"{cell.frontend}.reconciled.trace.safetensors")
        out.append(dataclasses.replace(cell, reconciled=trace))
    return out[0], out[1]


def _entry(entry_id: str) -> KnownDifference:
    return next(k for k in load_known_differences() if k.id == entry_id)


@pytest.fixture(scope="module")
def clip_cell() -> CellResult:
    """The golden result's Python clip cell."""
    return by_mode(golden())["autocast_scaler_clip"]


def test_the_clip_entry_covers_the_clip_pair_with_every_optimizer_on_cpu(clip_cell: CellResult, tmp_path: Path) -> None:
    """The clip coefficient is computed before any optimizer's step: the entry covers the clip mode with every optimizer,
    python vs r in either order, on CPU only (and the scaler modes, where the clip_norm_inf row clips), and names its
    mechanism's sources on both sides."""
    entry = _entry("clip-coef-reciprocal")
    twin = twin_cell(clip_cell, tmp_path)
    assert entry.applies(clip_cell, twin) and entry.applies(twin, clip_cell)
    for optimizer in ("sgd", "adam", "ignite_adagrad"):
        assert entry.covers("cuda_amp_grad_scaler", "autocast_scaler_clip", optimizer, "cpu")
    assert not entry.covers("cuda_amp_grad_scaler", "autocast_scaler_clip", "sgd", "cuda")
    # the scaler modes without the clip: where the loop feature clip_norm_inf clips (the trigger needs a clip.coef below 1)
    assert entry.covers("cuda_amp_grad_scaler", "autocast_scaler", "sgd", "cpu")
    assert not entry.covers("with_autocast", "lowp_weights", "sgd", "cpu")  # bf16 gradients: clip-coef-number-divide
    python_twin = twin_cell(clip_cell, tmp_path / "py", frontend="python")
    assert not entry.applies(clip_cell, python_twin)  # python vs python: not the entry's languages
    assert (entry.trigger, entry.signature.first_point, entry.signature.first_step, entry.signature.max_distance) == (
        "clip_engaged", "clip.coef", "trigger", 1)
    assert any("torch/_tensor.py" in s for s in entry.sources) and any("R/" in s for s in entry.sources)


def test_only_the_exact_signature_matches() -> None:
    """The same point at a clipped step within 1 ULP matches; 2 ULPs, another point or an unclipped step do not."""
    entry = _entry("clip-coef-reciprocal")
    assert entry.mismatch(_trace()) is None
    assert entry.mismatch(_trace(distance=2)) == "its first difference is 2 apart, beyond the entry's 1"
    assert entry.mismatch(_trace(point="clip.total_norm")) == "it first differs at clip.total_norm, not clip.coef"
    assert entry.mismatch(_trace(step=5)) == "it first differs at step 5, not at a step where clip_engaged holds"
    assert entry.mismatch(_identical_trace((0,))) == "the trace shows no difference"


def test_a_matching_difference_proven_by_its_reconciled_runs_is_known(clip_cell: CellResult, tmp_path: Path) -> None:
    """A 1-ULP weight difference whose trace has the signature, and whose runs are identical with the switches on:
    ``known_difference`` (not failing), proven, with the entry and the trace shown."""
    twin = twin_cell(clip_cell, tmp_path, edit=nudge_one_ulp("layer0.weight", (1, 1)))
    verdict = compare_cells(*_reconciled((clip_cell, twin), tmp_path), trace=_trace(), known=load_known_differences())
    assert verdict.verdict == "known_difference" and verdict.verdict not in FAILING_VERDICTS, verdict.explain()
    assert verdict.details["known_difference"] == ["clip-coef-reciprocal"] and verdict.details["proven"] is True
    assert "known difference clip-coef-reciprocal: first differs at step 0, clip.coef (1 ULP)" in verdict.summary
    assert "trace: last identical point: step 0, clip.total_norm" in verdict.explain()
    assert "upstream:" in verdict.explain()


@pytest.mark.parametrize(("trace", "why"), [
    (_trace(reconciled=None), "the cells have no reconciled runs"),
    (_trace(reconciled=False), "with the switches r-clip-coef-reciprocal, r-clip-nan-coef on, the runs still differ"),
    (_trace(switches=("r-clip-nan-coef",)), "the reconciled runs did not apply the switch r-clip-coef-reciprocal"),
    # Issue 37 (5): a run reconciled under another list, judged again under this one, used a switch no entry here names.
    (_trace(switches=(*SWITCHES, "r-sgd-weight-decay-param")), "the reconciled runs applied the switch r-sgd-weight-decay-param, "
                                                               "which no entry that applies here names"),
], ids=["no-reconciled-runs", "still-differs", "switch-missing", "switch-unnamed"])
def test_a_matching_difference_not_proven_is_diverged_where_identity_is_expected(
    clip_cell: CellResult, tmp_path: Path, trace: PairTrace, why: str
) -> None:
    """The signature alone proves nothing: without reconciled runs, with runs that still part once the switches are on, or
    with a switch the entry needs left off, the pair is ``diverged`` and says which."""
    twin = twin_cell(clip_cell, tmp_path, edit=nudge_one_ulp("layer0.weight", (1, 1)))
    verdict = compare_cells(clip_cell, twin, trace=trace, known=load_known_differences())
    assert verdict.verdict == "diverged" and verdict.details["known_difference"] is None, verdict.explain()
    assert "which clip-coef-reciprocal describes, but it does not explain the whole difference" in verdict.summary
    assert why in verdict.summary


def test_a_look_alike_with_a_larger_distance_stays_diverged(clip_cell: CellResult, tmp_path: Path) -> None:
    """The same point 3 ULPs apart, whose reconciled runs still part, is not the known difference: ``diverged``, saying why
    the entry does not apply."""
    twin = twin_cell(clip_cell, tmp_path, edit=nudge_one_ulp("layer0.weight", (1, 1)))
    verdict = compare_cells(clip_cell, twin, trace=_trace(distance=3, reconciled=False), known=load_known_differences())
    assert verdict.verdict == "diverged", verdict.explain()
    assert "first differs at step 0, clip.coef" in verdict.summary
    assert "not known difference clip-coef-reciprocal: its first difference is 3 apart, beyond the entry's 1" in verdict.explain()


def test_a_difference_the_record_check_finds_is_known_only_when_proven(clip_cell: CellResult, tmp_path: Path) -> None:
    """A loss-scale history that differs (a must-be-equal finding) is ``diverged`` when the trace's first point has the
    signature but nothing proves the entry; only the reconciled runs (identical at every point, scaler's included, with
    the switches on) can put it down to the entry, as they can an R torch bug beyond the tolerance."""
    assert clip_cell.record is not None and clip_cell.record.loss_scale is not None
    scales = [s * 2 if i == 3 else s for i, s in enumerate(clip_cell.record.loss_scale)]
    twin = twin_cell(clip_cell, tmp_path, loss_scale=scales)
    unproven = compare_cells(clip_cell, twin, trace=_trace(reconciled=None), known=load_known_differences())
    assert unproven.verdict == "diverged" and unproven.details["known_difference"] is None, unproven.explain()
    assert "MISMATCH loss scale differs first at step 3" in unproven.explain()
    proven = compare_cells(*_reconciled((clip_cell, twin), tmp_path), trace=_trace(), known=load_known_differences())
    assert proven.verdict == "known_difference" and proven.details["proven"] is True, proven.explain()


def test_reconciled_runs_whose_records_were_never_compared_prove_nothing(clip_cell: CellResult, tmp_path: Path) -> None:
    """Issue 37 (1): reconciled traces identical at every traced point, but holding no record of their runs (losses,
    final weights), cannot prove the entry: a change after the loop shows only in the records. ``diverged``, saying so."""
    twin = twin_cell(clip_cell, tmp_path, edit=nudge_one_ulp("layer0.weight", (1, 1)))
    verdict = compare_cells(*_reconciled((clip_cell, twin), tmp_path, record_points=False), trace=_trace(),
                            known=load_known_differences())
    assert verdict.verdict == "diverged" and verdict.details["proven"] is False, verdict.explain()
    assert "holds no record of its run" in verdict.summary


def test_an_entry_whose_trigger_held_on_an_identical_pair_is_stale(clip_cell: CellResult, tmp_path: Path) -> None:
    """Clipping engaged and every point equal: the entry no longer describes the bindings, and the run fails naming it."""
    twin = twin_cell(clip_cell, tmp_path)
    stale = compare_cells(clip_cell, twin, trace=_identical_trace((0, 1)), known=[_entry("clip-coef-reciprocal")])
    assert stale.verdict == "stale_known_difference" and stale.verdict in FAILING_VERDICTS, stale.explain()
    assert ("remove or update entry clip-coef-reciprocal (harness/judge/known_differences.toml): its trigger clip_engaged held"
            in stale.summary)


def test_where_the_trigger_never_held_an_identical_pair_is_simply_identical(clip_cell: CellResult, tmp_path: Path) -> None:
    """At bench clipping never engages: identical, and the entry is not stale."""
    twin = twin_cell(clip_cell, tmp_path)
    verdict = compare_cells(clip_cell, twin, trace=_identical_trace(()), known=[_entry("clip-coef-reciprocal")])
    assert verdict.verdict == "identical" and verdict.details["stale_known_difference"] is None


def test_the_lifted_check_is_named_in_the_pair(clip_cell: CellResult, tmp_path: Path) -> None:
    """A side that ran with a lifted check says so in the pair's explanation."""
    twin = with_record(twin_cell(clip_cell, tmp_path), lifted_check="cuda_amp_grad_scaler()$scale(): CUDA-only check lifted on CPU")
    verdict = compare_cells(clip_cell, twin)
    assert "lifted: r ran cuda_amp_grad_scaler()$scale(): CUDA-only check lifted on CPU" in verdict.explanation


@pytest.mark.parametrize(("text", "message"), [
    ("[[difference]]\nid = 'x'\n", "`kind` must be a non-empty string"),
    ("not toml = = 1", "is not valid TOML"),
    (DEFAULT_LIST.read_text().replace('trigger = "clip_engaged"', 'trigger = "moon_phase"', 1), "`trigger` must be one of"),
    (DEFAULT_LIST.read_text().replace("max_distance = 1\n", "max_distance = -1\n", 1), "`signature.max_distance` must be a whole number"),
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


def test_an_entry_of_another_optimizer_does_not_cover_the_pair() -> None:
    """An entry scoped to some optimizers covers only their pairs (SGD's weight-decay bug is not Adam's)."""
    entry = _entry("sgd-weight-decay-index")
    assert entry.covers("with_autocast", "default", "sgd_momentum", "cpu")
    assert not entry.covers("with_autocast", "default", "adam", "cpu")
    narrowed = dataclasses.replace(entry, optimizers=frozenset({"sgd_nesterov"}))
    assert not narrowed.covers("with_autocast", "default", "sgd_momentum", "cpu")


def test_a_bug_that_cannot_act_is_inert_not_stale(tmp_path: Path) -> None:
    """Issue 37 (9): `--optimizer-arg sgd_momentum.weight_decay=0` makes SGD's weight-decay bug unable to act: the identical
    pair (its trigger, "always", held) is ``identical`` with the entry named inert, not ``stale_known_difference``; with
    weight decay on, the same trace makes the entry stale."""
    cell = next(c for c in golden().cells if c.frontend == "python" and c.mode == "default")
    cell = dataclasses.replace(cell, cell=dataclasses.replace(cell.cell, optimizer="sgd_momentum"), weights=None, trace=None,
                               reconciled=None)
    twin = twin_cell(cell, tmp_path)
    trace = PairTrace(cell.pair, ("python", "r"), (300, 300), 300, None, (19, "optim.momentum_buffer.layer2.bias"), {"always": (0, 1)})
    entry = _entry("sgd-weight-decay-index")
    inert = compare_cells(cell, twin, trace=trace, known=[entry], optimizer_args={"weight_decay": 0, "momentum": 0.9})
    assert inert.verdict == "identical" and inert.details["inert"] == ["sgd-weight-decay-index"], inert.explain()
    assert "inert: R torch bug sgd-weight-decay-index cannot act here: weight_decay = 0" in inert.explain()
    stale = compare_cells(cell, twin, trace=trace, known=[entry], optimizer_args={"weight_decay": 1e-2, "momentum": 0.9})
    assert stale.verdict == "stale_known_difference", stale.explain()


def test_a_weight_decay_bug_acts_where_only_the_second_param_group_decays(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search drew plain SGD a weight decay of 0 and the ``param_groups`` row's biases one of 0.0625 (its finding, seed
    54): both scripts give the biases that decay, so sgd-weight-decay-index acts on them, and judged inert it left the pair
    ``diverged``. Inert only where the second group's decay is 0 too, or where the optimizer is given no weight decay at
    all (the scripts then give the biases none), or where the loop has one group."""
    entry = _entry("sgd-weight-decay-index")
    drawn = {**OPTIMIZERS["sgd"].args, "weight_decay": 0}
    monkeypatch.setitem(FEATURES, "param_groups", dataclasses.replace(
        FEATURES["param_groups"], args={**FEATURES["param_groups"].args, "bias_weight_decay": 0.0625}))
    assert entry.inert(drawn, "param_groups") is None
    assert entry.inert(drawn, "lr_lambda_groups") is None  # a scheduler over the same two groups
    assert entry.inert(drawn, "lr_step") == "weight_decay = 0, so its mechanism cannot act"  # one group
    assert entry.inert(dict(OPTIMIZERS["sgd"].args), "param_groups") == "weight_decay = 0, so its mechanism cannot act"
    monkeypatch.setitem(FEATURES, "param_groups", dataclasses.replace(
        FEATURES["param_groups"], args={**FEATURES["param_groups"].args, "bias_weight_decay": 0.0}))
    assert entry.inert(drawn, "param_groups") == "weight_decay = 0, so its mechanism cannot act"


def test_an_argument_the_run_does_not_set_is_at_its_default_so_plain_sgd_is_inert(tmp_path: Path) -> None:
    """Issue 49: sgd-weight-decay-index covers plain SGD (the search gives it weight decay), whose row sets none: there the
    entry cannot act (neither matched nor stale, and its switch is not run), and with weight decay it acts."""
    entry = _entry("sgd-weight-decay-index")
    assert entry.covers("with_autocast", "default", "sgd", "cpu")
    assert entry.inert(OPTIMIZERS["sgd"].args) == "weight_decay = 0, so its mechanism cannot act"
    assert entry.inert({**OPTIMIZERS["sgd"].args, "weight_decay": 0.1}) is None
    cell = next(c for c in golden().cells if c.frontend == "python" and c.mode == "default")
    twin = twin_cell(cell, tmp_path)
    trace = PairTrace(cell.pair, ("python", "r"), (300, 300), 300, None, (19, "param.stepped.layer2.bias"), {"always": (0, 1)})
    identical = compare_cells(cell, twin, trace=trace, known=[entry], optimizer_args=dict(OPTIMIZERS["sgd"].args))
    assert identical.verdict == "identical" and identical.details["inert"] == ["sgd-weight-decay-index"], identical.explain()


def test_an_entry_names_the_loop_features_it_covers() -> None:
    """``features`` narrows an entry to those loop features; without it an entry covers every feature and the plain loop."""
    entries = {k.id: k for k in load_known_differences()}
    scaler = entries["scaler-unscale-undefined-grad"]
    assert scaler.covers("cuda_amp_grad_scaler", "autocast_scaler", "sgd", "cpu", "frozen")
    assert not scaler.covers("cuda_amp_grad_scaler", "autocast_scaler", "sgd", "cpu")
    assert not scaler.covers("cuda_amp_grad_scaler", "autocast_scaler", "sgd", "cpu", "lr_step")
    sgd = entries["sgd-weight-decay-index"]
    assert sgd.features is None and sgd.covers("with_autocast", "default", "sgd_momentum", "cpu", "accumulate")


def test_an_entry_names_the_models_it_covers(clip_cell: CellResult) -> None:
    """``models`` narrows an entry to those models (a module of theirs is its mechanism): the transformer's attention
    entry covers its cells and no MLP cell, and asks for its switch only there; an entry without it (an optimizer's)
    covers every model."""
    attention = _entry("attention-sdpa-vs-explicit")
    assert attention.models == ("transformer",)
    assert attention.covers("with_autocast", "default", "adam", "cpu", model="transformer")
    assert not attention.covers("with_autocast", "default", "adam", "cpu")
    assert not attention.covers("with_autocast", "default", "adam", "cpu", model="transformer_smoothing")
    mlp = dataclasses.replace(clip_cell.cell, frontend="python")
    assert attention.reconciling(mlp, "python") == ()
    assert attention.reconciling(dataclasses.replace(mlp, model="transformer"), "python") == ("py-attention-explicit",)
    assert _entry("first-moment-lerp").models is None
    assert _entry("first-moment-lerp").covers("with_autocast", "default", "adam", "cpu", model="gru")


def test_an_entry_naming_an_unknown_model_is_refused(tmp_path: Path) -> None:
    """A model that is not a row of harness/contract/models.py is refused in one line, as any other field."""
    path = tmp_path / "known.toml"
    path.write_text(DEFAULT_LIST.read_text().replace('models = ["transformer"]', 'models = ["transfromer"]', 1))
    with pytest.raises(KnownDifferencesError, match="`models` must be one of") as refused:
        load_known_differences(path)
    assert "\n" not in str(refused.value)


def _momentum_pair(tmp_path: Path) -> tuple[CellResult, CellResult]:
    """An sgd_momentum pair whose R side differs (1 ULP in a weight), each cell with a reconciled trace of its run."""
    cell = next(c for c in golden().cells if c.frontend == "python" and c.mode == "default")
    cell = dataclasses.replace(cell, cell=dataclasses.replace(cell.cell, optimizer="sgd_momentum"), trace=None, reconciled=None)
    twin = twin_cell(cell, tmp_path, edit=nudge_one_ulp("layer0.weight", (1, 1)))
    return _reconciled((cell, twin), tmp_path)


def _momentum_trace(cell: CellResult, point: str, reconciled: bool, switches: tuple[str, ...] = ("r-sgd-weight-decay-param",)) -> PairTrace:
    first = PointDifference(0, point, "bytes", ("float32", "float32"), ((128,), (128,)), 3, 3, 1, (), None)
    return PairTrace(cell.pair, ("python", "r"), (300, 300), 12, first, (0, "grad.layer0.weight"), {"always": (0, 1, 2)},
                     switches=switches, reconciled_identical=reconciled, reconciled=None if reconciled else _first(1, "optim.param"))


def test_a_difference_its_switch_proves_is_known_wherever_it_first_shows(tmp_path: Path) -> None:
    """Issue 48 (6): with ``sgd_momentum.momentum=0`` there is no momentum buffer, so SGD's weight-decay bug first shows in
    the parameter, not at its signature's ``optim.momentum_buffer``; its reconciled runs are bitwise identical with its
    switch on. The proof, not the point's name, decides: ``known_difference``, proven, the R cell excused, and the line
    says the signature was not met."""
    a, b = _momentum_pair(tmp_path)
    trace = _momentum_trace(a, "param.layer0.weight", reconciled=True)
    entry = _entry("sgd-weight-decay-index")
    verdict = compare_cells(a, b, trace=trace, known=[entry], optimizer_args={"momentum": 0, "weight_decay": 0.01})
    assert verdict.verdict == "known_difference" and verdict.details["proven"] is True, verdict.explain()
    assert verdict.details["known_difference"] == ["sgd-weight-decay-index"] and verdict.details["excused"] == [b.id]
    assert "not where its signature says; proven: with the switches r-sgd-weight-decay-param on" in verdict.summary
    assert ("R torch bug sgd-weight-decay-index: its signature is not met (it first differs at param.layer0.weight, not "
            f"{entry.signature.first_point}), but its switches prove it") in verdict.explain()


@pytest.mark.parametrize(("reconciled", "switches"), [(False, ("r-sgd-weight-decay-param",)), (True, ()),
                                                      (True, ("r-sgd-weight-decay-param", "r-clip-coef-reciprocal"))],
                         ids=["still-differs", "switch-off", "another-switch"])
def test_without_the_proof_a_difference_off_the_signature_stays_diverged(tmp_path: Path, reconciled: bool,
                                                                          switches: tuple[str, ...]) -> None:
    """The proof must be whole: reconciled runs that still part, that ran without the entry's switch, or with a switch no
    applicable entry names, explain nothing; the pair stays ``diverged``, each entry saying why its signature is not met."""
    a, b = _momentum_pair(tmp_path)
    trace = _momentum_trace(a, "param.layer0.weight", reconciled=reconciled, switches=switches)
    verdict = compare_cells(a, b, trace=trace, known=[_entry("sgd-weight-decay-index")], optimizer_args={"momentum": 0})
    assert verdict.verdict == "diverged" and verdict.details["known_difference"] is None, verdict.explain()
    assert "not R torch bug sgd-weight-decay-index: it first differs at param.layer0.weight" in verdict.explain()


def test_the_same_proof_holds_whatever_the_entry_differs_by(clip_cell: CellResult, tmp_path: Path) -> None:
    """A distance, a step or a point off the clip entry's signature: proven by identical reconciled runs all the same."""
    twin = twin_cell(clip_cell, tmp_path, edit=nudge_one_ulp("layer0.weight", (1, 1)))
    cells = _reconciled((clip_cell, twin), tmp_path)
    for trace in (_trace(distance=3), _trace(step=1, clipped=(0,)), _trace(point="clip.total_norm")):
        verdict = compare_cells(*cells, trace=trace, known=load_known_differences())
        assert verdict.verdict == "known_difference" and verdict.details["proven"] is True, verdict.explain()
