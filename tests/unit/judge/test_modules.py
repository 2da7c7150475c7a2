"""The module sweep's judge on facts made by hand: each verdict, the first differing tensor, a bug that excuses, the
same-seed module's order and names."""

from __future__ import annotations

from typing import Any

from harness.judge.modules import ModuleDifference, judge_sweep, load_module_differences
from harness.run.modules import SweepFacts
from harness.workload.modules import MODULE_MODES, MODULE_ROWS

MODES = MODULE_MODES[:1]


def _fact(identical: bool = True, shape: list[int] | None = None) -> dict[str, Any]:
    return {"python_dtype": "float32", "r_dtype": "float32", "python_shape": [2], "r_shape": shape or [2],
            "identical": identical, "max_abs": 0.0 if identical else 0.5}


def _facts(tensors: dict[str, dict[str, Any]], r_answer: dict[str, Any] | None = None,
           sample: dict[str, Any] | None = None, entry: str = "nn.Linear", cls: str = "Linear") -> SweepFacts:
    prepared = {"index": 0, "desc": "", "modes": {"float32": {"status": "ok"}}, "parameters": ["weight", "bias"],
                "buffers": [], "state_dict": ["weight", "bias"], **(sample or {})}
    answer = {"index": 0, "modes": {"float32": {"status": "ok"}}, "parameters": ["weight", "bias"],
              "state_dict": ["weight", "bias"], **(r_answer or {})}
    compared = {"index": 0, "modes": {"float32": {"tensors": tensors, "missing": {"python": [], "r": []}}},
                "init": {"tensors": {"weight": _fact(), "bias": _fact()}, "missing": {"python": [], "r": []}}}
    return SweepFacts(entries=[{"name": entry, "class": cls}], prepared={entry: {"samples": [prepared]}},
                      r={entry: [answer]}, compared={entry: {"samples": [compared]}}, rows=MODULE_ROWS, modes=MODES)


def test_bitwise_equal_tensors_are_identical() -> None:
    result = judge_sweep(_facts({"out": _fact(), "grad.weight": _fact()}), [])
    assert [s.verdict for s in result.samples] == ["identical"]
    assert [i.verdict for i in result.inits] == ["identical"]
    assert not result.failed
    assert result.coverage[0].row()["identical"] == 1


def test_a_difference_is_named_where_it_begins_the_forward_first() -> None:
    result = judge_sweep(_facts({"buffer.running_mean": _fact(False), "grad.weight": _fact(False), "out": _fact(False, [3])}), [])
    (sample,) = result.samples
    assert sample.verdict == "diverged" and sample.why == "out: shape [2] in PyTorch, [3] in R"
    assert result.failed


def test_a_bug_entry_excuses_only_the_tensors_it_names() -> None:
    bug = ModuleDifference(id="x", bug="some-bug", entries=("nn.Lin*",), tensors=("buffer.*",))
    assert judge_sweep(_facts({"buffer.running_mean": _fact(False)}), [bug]).samples[0].verdict == "excused"
    assert judge_sweep(_facts({"buffer.running_mean": _fact(False), "out": _fact(False)}), [bug]).samples[0].verdict == "diverged"


def test_r_refusing_is_unsupported_in_its_words_and_pytorch_refusing_is_not_run() -> None:
    refused = judge_sweep(_facts({}, {"unsupported": "object 'nn_mish' not found", "modes": {}}), [])
    assert refused.samples[0].verdict == "unsupported" and refused.samples[0].why == "R: object 'nn_mish' not found"
    mode = judge_sweep(_facts({}, {"modes": {"float32": {"status": "unsupported", "message": "unused argument (bias = FALSE)"}}}), [])
    assert mode.samples[0].why == "R: unused argument (bias = FALSE)"
    python = judge_sweep(_facts({}, sample={"modes": {"float32": {"status": "python_error", "message": "no BFloat16"}}}), [])
    assert python.samples[0].verdict == "not_run"


def test_the_same_seed_module_parts_by_its_parameter_order_and_names() -> None:
    reordered = judge_sweep(_facts({"out": _fact()}, {"parameters": ["bias", "weight"]}), [])
    assert reordered.inits[0].verdict == "diverged"
    assert reordered.inits[0].why == "parameters order: #1 of 2 is weight in PyTorch, bias in R"
    one = judge_sweep(_facts({"out": _fact()}, {"parameters": "weight", "state_dict": "weight"},
                             {"parameters": ["weight"], "state_dict": ["weight"]}), [])
    assert one.inits[0].verdict == "identical"  # R's JSON writes a one-element vector as a scalar


def test_two_bugs_excuse_a_pair_together_each_for_the_names_it_gives() -> None:
    shape = ModuleDifference(id="a", bug="bug-a", entries=("nn.Linear",), tensors=("buffer.*",))
    out = ModuleDifference(id="b", bug="bug-b", entries=("nn.Linear",), tensors=("out",), samples=("other*",))
    facts = _facts({"buffer.running_mean": _fact(False), "out": _fact(False)})
    assert judge_sweep(facts, [shape, out]).samples[0].verdict == "diverged"  # bug-b is of other samples
    both = ModuleDifference(id="b", bug="bug-b", entries=("nn.Linear",), tensors=("out",))
    (sample,) = judge_sweep(facts, [shape, both]).samples
    assert sample.verdict == "excused" and sample.why == "R torch bug bug-b (b), bug-a (a)"  # where each begins: the output first


def test_every_module_difference_names_a_bug_with_its_reproducers() -> None:
    """load_module_differences refuses an entry whose docs/bugs/<bug>/ lacks reproducer.R and reproducer.py."""
    assert {d.bug for d in load_module_differences()} >= {"cross-entropy-probability-targets", "softmax2d-batch-dim"}


def test_a_switch_proves_a_pair_only_when_the_switched_run_is_bitwise_r() -> None:
    """A known difference without a bug: the pair is proven when PyTorch's run with the switch on matches R bitwise."""
    switch = ModuleDifference(id="sdpa", bug=None, entries=("nn.Linear",), tensors=("out",), switch="explicit")
    facts = _facts({"out": _fact(False)})
    assert judge_sweep(facts, [switch]).samples[0].verdict == "diverged"  # not run with the switch: not proven
    from harness.judge.modules import switch_candidates

    assert switch_candidates(facts, [switch]) == {("nn.Linear", "explicit"): {0: ["float32"]}}
    facts.switched["nn.Linear"] = {"explicit": {"samples": [
        {"index": 0, "modes": {"float32": {"tensors": {"out": _fact()}, "missing": {"python": [], "r": []}}}}]}}
    (sample,) = judge_sweep(facts, [switch]).samples
    assert sample.verdict == "proven" and sample.why == "known difference sdpa: bitwise identical with switch explicit"
    facts.switched["nn.Linear"]["explicit"]["samples"][0]["modes"]["float32"]["tensors"]["out"] = _fact(False)
    assert judge_sweep(facts, [switch]).samples[0].verdict == "diverged"


def test_a_switch_proves_a_pair_whose_rest_a_bug_excuses() -> None:
    """With the switch on, what still differs must be excused by bugs, name by name, for the pair to be proven."""
    switch = ModuleDifference(id="sdpa", bug=None, entries=("nn.Linear",), tensors=("out", "grad.*"), switch="explicit")
    bug = ModuleDifference(id="nw", bug="no-weight", entries=("nn.Linear",), tensors=("grad.weight (R lacks it)",))
    facts = _facts({"out": _fact(False)})
    still = {"tensors": {"out": _fact()}, "missing": {"python": [], "r": ["grad.weight"]}}
    facts.switched["nn.Linear"] = {"explicit": {"samples": [{"index": 0, "modes": {"float32": still}}]}}
    assert judge_sweep(facts, [switch]).samples[0].verdict == "diverged"
    (sample,) = judge_sweep(facts, [switch, bug]).samples
    assert sample.verdict == "proven" and sample.why.endswith("; the rest: R torch bug no-weight (nw)")


def test_a_refusal_that_is_a_bug_stays_unsupported_and_names_the_bug() -> None:
    refusal = ModuleDifference(id="mp", bug="max-pool-bug", entries=("nn.Linear",), tensors=(), message="one of the variables*")
    facts = _facts({}, {"modes": {"float32": {"status": "unsupported", "message": "one of the variables needed ..."}}})
    (sample,) = judge_sweep(facts, [refusal]).samples
    assert sample.verdict == "unsupported" and sample.why == "R: one of the variables needed ... (R torch bug max-pool-bug)"


def test_the_summary_says_where_r_is_farther_from_float64() -> None:
    from harness.views.modules import summary_lines, sweep_markdown

    bug = ModuleDifference(id="x", bug="some-bug", entries=("nn.Linear",), tensors=("out",))
    far = _fact(False) | {"python_f64": 1e-7, "r_f64": 1e-3}
    result = judge_sweep(_facts({"out": far}), [bug])
    assert result.samples[0].r_farther
    assert "R is the farther from float64 (more than twice PyTorch's distance) in 1" in "\n".join(summary_lines(result))
    assert "| 1e-07 | 0.001 |" in sweep_markdown(result)
    near = judge_sweep(_facts({"out": _fact(False) | {"python_f64": 1e-3, "r_f64": 1e-3}}), [bug])
    assert not near.samples[0].r_farther
