"""The search's engine, strategies and spaces, with the pair's run replaced by a judge of the test's own (no worker):
what it draws comes from the rows' declared spaces, the same seed draws the same examples, a finding is shrunk to the
smallest spec that shows it and is kept in the example database, replayed first by the next search, and the budget
holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.search.engine import Budget, Search
from harness.search.example import Example, drawn_feature
from harness.search.strategies import examples, value_of
from harness.search.verdict import Judged
from harness.workload.features import FEATURES
from harness.workload.optimizers import OPTIMIZERS, check_optimizer_args
from harness.workload.space import Space
from harness.workload.spec import SEARCH_SPACE

PAIRS = [("with_autocast", "default"), ("with_autocast", "autocast"), ("cuda_amp_grad_scaler", "autocast_scaler")]


class FakeSearch(Search):
    """A search whose examples are judged by ``verdict`` (an example → its Judged) instead of run in workers."""

    def __init__(self, verdict: Any, budget: str, seed: int, database: Path, optimizers: tuple[str, ...] = ("sgd", "adam"),
                 features: tuple[str, ...] = ("none", "lr_step")) -> None:
        super().__init__(None, examples(PAIRS, optimizers, features), Budget.parse(budget), seed, database)  # type: ignore[arg-type]
        self.verdict, self.seen = verdict, []

    def judge(self, example: Example) -> Judged:
        self.seen.append(example)
        return self.verdict(example)


def _identical(example: Example) -> Judged:
    return Judged("identical")


def _dampening_plant(example: Example) -> Judged:
    """A planted difference: an SGD row's dampening above 0.5, where no row sets it."""
    if example.optimizer == "sgd" and float(example.optimizer_args.get("dampening", 0.0)) > 0.5:
        return Judged("pair", "pair: optim.momentum_buffer.{param}", "planted", "step 1, optim.momentum_buffer.layer0.weight")
    return Judged("identical")


def test_the_same_seed_draws_the_same_examples_and_another_seed_others(tmp_path: Path) -> None:
    runs = [FakeSearch(_identical, "30", seed, tmp_path / f"db{i}") for i, seed in enumerate((5, 5, 6))]
    for search in runs:
        report = search.run()
        assert report.searched + report.repeated == 30 and not report.findings  # an example drawn twice runs once
    assert runs[0].seen == runs[1].seen
    assert runs[0].seen != runs[2].seen


def test_every_example_lies_in_the_declared_spaces(tmp_path: Path) -> None:
    search = FakeSearch(_identical, "60", 1, tmp_path / "db", optimizers=tuple(OPTIMIZERS), features=("none", *FEATURES))
    search.run()
    for example in search.seen:
        spec = example.spec()  # every drawn point is a valid spec
        check_optimizer_args({example.optimizer: dict(example.optimizer_args)})
        for name, value in example.fields.items():
            _inside(SEARCH_SPACE[name], value)
        for name, value in example.optimizer_args.items():
            _inside(OPTIMIZERS[example.optimizer].space[name], value)
        for name, value in example.feature_args.items():
            _inside(FEATURES[example.feature].space[name], value)
        assert spec.steps <= 12
    moved = {f"{e.optimizer}.{k}" for e in search.seen for k in e.optimizer_args}
    assert len(moved) > 10, moved  # the search moves hyperparameters, not only sizes


def _inside(space: Space, value: Any) -> None:
    if space.choices:
        assert value in space.choices
    elif space.dtype == "pair":
        assert space.low[0] <= value[0] <= space.low[1] and space.high[0] <= value[1] <= space.high[1]
    else:
        assert (value == 0 and space.zero) or space.low <= value <= space.high


def test_a_finding_is_shrunk_to_the_smallest_spec_that_shows_it_and_replayed_first_next_time(tmp_path: Path) -> None:
    search = FakeSearch(_dampening_plant, "300", 0, tmp_path / "db")
    report = search.run()
    assert [f.judged.signature for f in report.findings] == ["pair: optim.momentum_buffer.{param}"]
    minimal = report.findings[0].example
    # only what the difference needs moved from the rows' points; every size at the smallest its space has
    assert minimal.optimizer == "sgd" and list(minimal.optimizer_args) == ["dampening"], minimal
    assert 0.5 < minimal.optimizer_args["dampening"], minimal  # in the planted region (Hypothesis's simplest float there)
    assert minimal.feature == "none" and (minimal.script, minimal.mode) == PAIRS[0]
    assert minimal.fields == {name: _simplest(space) for name, space in SEARCH_SPACE.items()}
    assert report.searched <= 300
    again = FakeSearch(_dampening_plant, "1", 9, tmp_path / "db")  # another seed, one example: the database's comes first
    assert [f.example for f in again.run().findings] == [minimal]
    assert again.seen[0] == minimal


def _simplest(space: Space) -> Any:
    return space.choices[0] if space.choices else space.low


def test_a_seconds_budget_ends_the_search(tmp_path: Path) -> None:
    report = FakeSearch(_identical, "1s", 0, tmp_path / "db").run()
    assert not report.findings and report.searched > 0 and report.seconds < 30


@pytest.mark.parametrize("text", ["0", "-3", "ten", "1.5", "0s", "s", ""])
def test_a_budget_is_examples_or_seconds(text: str) -> None:
    from harness.errors import UsageError

    with pytest.raises(UsageError, match="--budget must be a number of examples"):
        Budget.parse(text)
    assert Budget.parse("200") == Budget(examples=200) and Budget.parse("90s") == Budget(seconds=90.0)


def test_a_drawn_feature_row_is_the_tables_again_after_its_example() -> None:
    row = FEATURES["lr_step"]
    example = Example("with_autocast", "default", "sgd", "lr_step", feature_args={"gamma": 0.5})
    with pytest.raises(RuntimeError), drawn_feature(example):
        assert FEATURES["lr_step"].args["gamma"] == 0.5 and FEATURES["lr_step"].args["step_size"] == row.args["step_size"]
        raise RuntimeError
    assert FEATURES["lr_step"] is row


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_every_space_draws_its_dtype(data: st.DataObject) -> None:
    spaces = [*SEARCH_SPACE.values(), *(s for r in OPTIMIZERS.values() for s in r.space.values()),
              *(s for r in FEATURES.values() for s in r.space.values())]
    space = data.draw(st.sampled_from(spaces))
    value = data.draw(value_of(space))
    kinds = {"float": float, "int": int, "bool": bool, "pair": tuple}
    assert isinstance(value, kinds[space.dtype]), (space, value)
    _inside(space, value)


def test_an_example_round_trips_through_its_json() -> None:
    example = Example("cuda_amp_grad_scaler", "autocast_scaler", "adam", "lr_step", {"batch_size": 2, "seed": 3},
                      {"betas": (0.5, 0.9), "amsgrad": True}, {"gamma": 0.5})
    assert Example.from_json(example.to_json()) == example


def test_an_interrupted_search_keeps_what_it_saw(tmp_path: Path) -> None:
    """Ctrl-C while a finding shrinks: the search ends, says it was interrupted, and the finding's smallest example so far
    is what ``on_seen`` last heard (the command writes it) and is in the database, replayed first next time."""
    calls: list[Example] = []

    def judge(example: Example) -> Judged:
        calls.append(example)
        if len(calls) > 40 and any(_dampening_plant(e).finding for e in calls[:-1]):
            raise KeyboardInterrupt
        return _dampening_plant(example)

    seen: dict[str, Example] = {}
    search = FakeSearch(judge, "300", 0, tmp_path / "db")
    search._on_seen = lambda example, judged: seen.__setitem__(judged.signature, example)
    report = search.run()
    assert report.interrupted and not report.findings and list(seen) == ["pair: optim.momentum_buffer.{param}"]
    again = FakeSearch(_dampening_plant, "1", 3, tmp_path / "db")
    assert [f.judged.signature for f in again.run().findings] == list(seen)


def test_the_search_does_not_draw_what_r_cannot_run_nor_a_clip_feature_in_a_clip_mode() -> None:
    """ignite_adagrad with a second param group, an ignite optimizer's zero_grad(set_to_none) (R torch bugs no switch
    reconciles: UNRUNNABLE_IN_R), a clip feature where the mode clips already: never drawn; the rest still is."""
    pairs = [("with_autocast", "default"), ("cuda_amp_grad_scaler", "autocast_scaler_clip")]
    strategy = examples(pairs, ("sgd", "ignite_adagrad", "ignite_sgd"), ("param_groups", "sometimes_used", "clip_norm_inf"))
    seen: list[Example] = []

    @settings(max_examples=150, database=None, derandomize=True)
    @given(strategy)
    def draw(example: Example) -> None:
        seen.append(example)

    draw()
    assert not [e for e in seen if e.optimizer == "ignite_adagrad" and e.feature == "param_groups"]
    assert not [e for e in seen if e.optimizer.startswith("ignite") and e.feature == "sometimes_used"]
    assert not [e for e in seen if e.feature == "clip_norm_inf" and e.mode == "autocast_scaler_clip"]
    assert {e.optimizer for e in seen} == {"sgd", "ignite_adagrad", "ignite_sgd"} and {e.mode for e in seen} == {m for _, m in pairs}


def test_stop_at_first_ends_the_search_with_the_first_finding_shrunk_alone(tmp_path: Path) -> None:
    """Two planted differences: ``stop_at_first`` reports one, shrunk, and stops; without it both are reported."""
    def two(example: Example) -> Judged:
        if example.optimizer == "adam":
            return Judged("pair", "pair: optim.exp_avg.{param}", "planted adam", "step 0, optim.exp_avg.layer0.weight")
        return _dampening_plant(example)

    both = FakeSearch(two, "300", 0, tmp_path / "db1").run()
    first = FakeSearch(two, "300", 0, tmp_path / "db2")
    first.stop_at_first = True
    one = first.run()
    assert len(both.findings) == 2 and len(one.findings) == 1, (both.findings, one.findings)
    assert one.searched < both.searched
