"""The loss comparison of ``--benchmark-compare-losses``: each verdict, its line, and when it fails the session."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.benchmarks.loss_compare import LossPolicy, compare_losses, compare_saved, parse_policy, same_build

NAME = "test_cell_time[with_autocast-default-python-cpu]"
AUTO = LossPolicy()


def info(**changes: Any) -> dict[str, Any]:
    """A cell's ``extra_info`` as ``test_cells.py`` saves it (the fields the comparison reads), with ``changes``."""
    base: dict[str, Any] = {
        "spec_digest": "abc123", "torch_version": "2.13.0+cpu", "libtorch_version": "2.13.0",
        "losses": [1.0, 0.75, 0.5], "final_loss": 0.5, "weights_digest": "d" * 64, "loss_scale": None,
    }
    return {**base, **changes}


def test_identical_runs_say_identical_and_pass() -> None:
    """The same losses and weights digest are ``identical``, named as such, and never fail."""
    result = compare_losses(NAME, info(), info(), AUTO)
    assert (result.verdict, result.fails) == ("identical", False)
    assert result.line == f"{NAME}: losses identical (3 steps), weights digest identical"


def test_a_changed_loss_on_the_same_build_fails_naming_the_change() -> None:
    """On the same torch and libtorch versions, a changed loss fails with both final losses, exactly, and the first step."""
    result = compare_losses(NAME, info(losses=[1.0, 0.75, 0.5000001]), info(), AUTO)
    assert (result.verdict, result.fails) == ("changed", True)
    assert "losses changed at step 2 (of steps 0–2: 0.5 → 0.5000001;" in result.line
    assert "final loss changed from 0.5 to 0.5000001" in result.line
    assert "FAILED: same libtorch build (torch 2.13.0+cpu, libtorch 2.13.0; build id unknown, compared by version)" in result.line


def test_an_intermediate_step_changed_with_the_same_final_loss_still_fails() -> None:
    """A trajectory that differs mid-run but ends on the same loss is a change, said as such."""
    result = compare_losses(NAME, info(losses=[1.0, 0.7500001, 0.5]), info(), AUTO)
    assert result.fails and "losses changed at step 1" in result.line and "final loss unchanged at 0.5" in result.line


def test_a_changed_weights_digest_alone_fails_on_the_same_build() -> None:
    """Identical losses with other final weights still fail: the run is not the same."""
    result = compare_losses(NAME, info(weights_digest="e" * 64), info(), AUTO)
    assert result.fails and f"weights digest changed ({'d' * 12} → {'e' * 12})" in result.line


def test_a_changed_loss_scale_history_is_named() -> None:
    """A scaler mode's loss-scale history that differs is named with its first differing step."""
    result = compare_losses(NAME, info(loss_scale=[65536.0, 32768.0]), info(loss_scale=[65536.0, 65536.0]), AUTO)
    assert result.fails and "loss scale history changed (first differing step 1)" in result.line


def test_another_libtorch_is_reported_not_failed() -> None:
    """Where the torch version differs, the default reports the change and says why it does not fail."""
    result = compare_losses(NAME, info(losses=[1.0, 0.75, 0.6], torch_version="2.14.0+cpu"), info(), AUTO)
    assert (result.verdict, result.fails) == ("changed", False)
    assert "reported, not failed: libtorch build differs (torch_version 2.13.0+cpu → 2.14.0+cpu)" in result.line


def test_the_build_field_decides_where_both_runs_have_it() -> None:
    """``libtorch_build`` is compared where both runs recorded it; where one lacks it, the versions decide."""
    assert same_build(info(libtorch_build="b1"), info(libtorch_build="b1")) == (
        True, "same libtorch build (torch 2.13.0+cpu, libtorch 2.13.0, build b1)")
    assert same_build(info(libtorch_build="b2"), info(libtorch_build="b1")) == (
        False, "libtorch build differs (libtorch_build b1 → b2)")
    assert same_build(info(libtorch_build="b2"), info())[0] is True
    assert same_build(info(), {"losses": [1.0]}) == (False, "libtorch build differs (torch_version None → 2.13.0+cpu, "
                                                            "libtorch_version None → 2.13.0)")


def test_identity_fails_whatever_the_build() -> None:
    """``identity`` fails a change even across libtorch builds."""
    result = compare_losses(NAME, info(losses=[1.0, 0.75, 0.6], torch_version="2.14.0"), info(), parse_policy("identity"))
    assert result.fails and result.line.endswith("FAILED: identity required (--benchmark-compare-losses=identity)")


def test_tolerance_passes_within_and_fails_beyond() -> None:
    """``tolerance:REL`` judges the largest per-step relative change of the losses."""
    changed = info(losses=[1.0, 0.75, 0.5 * (1 + 1e-7)])
    within = compare_losses(NAME, changed, info(), parse_policy("tolerance:1e-6"))
    assert (within.verdict, within.fails) == ("within tolerance", False) and "within tolerance 1e-06" in within.line
    beyond = compare_losses(NAME, changed, info(), parse_policy("tolerance:1e-8"))
    assert beyond.fails and "FAILED: relative change 1e-07 beyond tolerance 1e-08" in beyond.line


def test_tolerance_reports_a_weights_digest_it_cannot_judge() -> None:
    """Under a tolerance, a changed weights digest with unchanged losses is reported, not failed."""
    result = compare_losses(NAME, info(weights_digest="e" * 64), info(), parse_policy("tolerance:0"))
    assert not result.fails and "weights digest reported, not judged by a tolerance" in result.line


def test_a_step_count_change_fails_under_a_tolerance() -> None:
    """Runs of different lengths are beyond any tolerance."""
    result = compare_losses(NAME, info(losses=[1.0, 0.75]), info(), parse_policy("tolerance:1"))
    assert result.fails and "losses changed at step 2 (step count 3 → 2;" in result.line
    assert result.line.endswith("FAILED: step count changed, beyond any tolerance")


@pytest.mark.parametrize("saved", [{"final_loss": 0.5, "spec_digest": "abc123"}, {}], ids=["older-save", "empty"])
def test_an_older_save_is_not_comparable(saved: dict[str, Any]) -> None:
    """A saved run without per-step losses says to re-save it, and fails nothing."""
    result = compare_losses(NAME, info(), saved, AUTO)
    assert (result.verdict, result.fails) == ("not comparable", False)
    assert result.line == f"{NAME}: not comparable: saved run has no per-step losses (re-save it)"


def test_a_save_without_weights_digest_still_compares_losses() -> None:
    """Losses saved without a weights digest are compared, and the line says the digest is missing."""
    saved = info()
    del saved["weights_digest"]
    result = compare_losses(NAME, info(), saved, AUTO)
    assert result.verdict == "identical" and result.line.endswith("weights digest not in the saved run")


def test_another_workload_is_not_compared() -> None:
    """A different spec digest is another workload: losses are not compared."""
    result = compare_losses(NAME, info(spec_digest="fff000", losses=[2.0]), info(), AUTO)
    assert (result.verdict, result.fails) == ("different workload", False)
    assert result.line.endswith("different workload (spec digest abc123 → fff000); losses not compared")


def test_a_benchmark_missing_from_the_save_is_new() -> None:
    """A cell the saved run lacks is new, never a failure."""
    assert compare_losses(NAME, info(), None, AUTO).verdict == "new"


@pytest.mark.parametrize(("text", "policy"), [
    ("auto", LossPolicy("auto")), ("identity", LossPolicy("identity")), ("off", LossPolicy("off")),
    ("tolerance:1e-6", LossPolicy("tolerance", 1e-6)), ("tolerance:0", LossPolicy("tolerance", 0.0)),
])
def test_policies_parse(text: str, policy: LossPolicy) -> None:
    """Each written policy parses to its value, and prints as a policy that parses back to it."""
    assert parse_policy(text) == policy
    assert parse_policy(str(policy)) == policy


@pytest.mark.parametrize(("text", "message"), [
    ("fast", "--benchmark-compare-losses must be one of auto, identity, tolerance:REL (e.g. tolerance:1e-6) or off, got 'fast'"),
    ("identity:1", "must be one of auto, identity"),
    ("tolerance:", "needs REL a finite number ≥ 0 (e.g. tolerance:1e-6), got ''"),
    ("tolerance:-1", "got '-1'"),
    ("tolerance:nan", "got 'nan'"),
])
def test_a_bad_policy_is_refused_in_one_line(text: str, message: str) -> None:
    """A malformed policy raises one ValueError saying what is accepted and what was got."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        parse_policy(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("losses", ["1.0,0.75", [1.0, "0.75", 0.5], {"0": 1.0}, [True, False, True]], ids=["text", "a-text-step",
                                                                                                          "object", "booleans"])
def test_corrupted_saved_losses_are_said_to_be_corrupted_and_fail(losses: Any) -> None:
    """Saved losses that are there but not a list of numbers passed as "saved run has no per-step losses": now the line says
    the save is corrupted, what it holds, and the comparison fails (it compared nothing)."""
    result = compare_losses(NAME, info(), info(losses=losses), AUTO)
    assert (result.verdict, result.fails) == ("not comparable", True)
    assert result.line.startswith(f"{NAME}: not comparable: the saved run is corrupted: its losses are not a list of numbers (")
    assert result.line.endswith("); re-save it")


def test_a_corrupted_saved_loss_scale_is_said_too() -> None:
    """The same for the loss-scale history: corrupted is not "unchanged"."""
    result = compare_losses(NAME, info(loss_scale=[1.0, 2.0]), info(loss_scale="big"), AUTO)
    assert result.fails and "its loss_scale are not a list of numbers ('big')" in result.line


def test_a_nan_saved_loss_is_a_change_beyond_any_tolerance() -> None:
    """A NaN saved where this run has a number printed "largest relative change 0" and passed a tolerance: it is infinitely
    far, and fails every policy that judges losses."""
    saved = info(losses=[1.0, math.nan, 0.5])
    for policy in (AUTO, parse_policy("tolerance:1")):
        result = compare_losses(NAME, info(), saved, policy)
        assert result.fails and "losses changed at step 1 (of steps 0–2: nan → 0.75; largest relative change inf)" in result.line


def test_nan_at_the_same_step_in_both_runs_is_no_change() -> None:
    """Two runs that both diverged to NaN at a step did not change there (NaN equals NaN here)."""
    both = [1.0, math.nan, math.nan]
    result = compare_losses(NAME, info(losses=both, final_loss=math.nan), info(losses=both, final_loss=math.nan), AUTO)
    assert (result.verdict, result.fails) == ("identical", False)


@pytest.mark.parametrize(("value", "expected"), [("0", None), ("-2", None), ("abc", None), ("", 10), ("3", 3)])
def test_bench_rounds_are_a_whole_number_of_one_or_more(monkeypatch: pytest.MonkeyPatch, value: str, expected: int | None) -> None:
    """``AMP_PARITY_BENCH_ROUNDS=0`` failed in pytest-benchmark with a raw ValueError: it is refused in one line naming the
    variable (unset or empty: the harness's default)."""
    from harness.model.timing import DEFAULT_ROUNDS
    from tests.benchmarks.settings import rounds

    monkeypatch.setenv("AMP_PARITY_BENCH_ROUNDS", value)
    if expected is None:
        with pytest.raises(ValueError, match=f"^AMP_PARITY_BENCH_ROUNDS must be a whole number of timed rounds ≥ 1, got '{value}'$"):
            rounds()
    else:
        assert rounds() == (DEFAULT_ROUNDS if value == "" else expected)
def test_the_scripts_that_differ_from_the_saved_run_are_named() -> None:
    """A run of other scripts says which files differ (its verdict unchanged); the same scripts add nothing; a saved run that
    recorded none is said to be unknown."""
    scripts = {"py_scripts/with_autocast.py": "a" * 64, "py_scripts/common.py": "b" * 64}
    same = compare_losses(NAME, info(scripts=scripts), info(scripts=scripts), AUTO)
    assert same.line == f"{NAME}: losses identical (3 steps), weights digest identical"
    changed = compare_losses(NAME, info(scripts={**scripts, "py_scripts/with_autocast.py": "c" * 64}), info(scripts=scripts), AUTO)
    assert (changed.verdict, changed.fails) == ("identical", False)
    assert changed.line.endswith("weights digest identical; ran different scripts than the saved run: py_scripts/with_autocast.py")
    older = compare_losses(NAME, info(scripts=scripts, losses=[1.0, 0.75, 0.25]), info(), AUTO)
    assert older.fails and older.line.endswith("; whether the scripts changed is unknown (the saved run recorded none)")


#: Every field of a saved benchmark the comparison reads, malformed one way each (issue 48, defect 12).
_MALFORMED_FIELDS = [
    ("spec_digest", 5), ("spec_digest", None), ("weights_digest", ["d"]), ("weights_digest", None),
    ("torch_version", 2.13), ("libtorch_version", {"v": 1}), ("libtorch_build", 7),
    ("scripts", "py_scripts/common.py"), ("scripts", {"py_scripts/common.py": 1}), ("scripts", ["a"]),
    ("losses", "1.0"), ("loss_scale", {"0": 1.0}),
]


@pytest.mark.parametrize(("key", "value"), _MALFORMED_FIELDS, ids=[f"{k}-{type(v).__name__}" for k, v in _MALFORMED_FIELDS])
def test_every_malformed_field_of_a_saved_benchmark_is_one_corrupted_line_that_fails(key: str, value: Any) -> None:
    """Whatever field is of another kind, the line says the saved run is corrupted, names the field, and fails the session:
    never a traceback (the timing table was lost with it), never "nothing to compare"."""
    for policy in (AUTO, parse_policy("identity"), parse_policy("tolerance:1")):
        result = compare_saved(NAME, info(scripts={"py_scripts/common.py": "a" * 64}),
                               {"fullname": NAME, "extra_info": info(**{key: value})}, policy)
        assert (result.verdict, result.fails) == ("not comparable", True), result.line
        assert result.line.startswith(f"{NAME}: not comparable: the saved run is corrupted: its {key} ") and "\n" not in result.line


@pytest.mark.parametrize("extra_info", ["losses", None, [1.0, 0.5], 3], ids=["text", "null", "list", "number"])
def test_an_extra_info_that_is_not_a_mapping_is_corrupted_and_fails(extra_info: Any) -> None:
    """Issue 48 (12): an ``extra_info`` that is a string raised AttributeError in the session's finish; ``null`` read as
    "nothing to compare" and the session passed. Both, and any other kind, are one corrupted line that fails."""
    result = compare_saved(NAME, info(), {"fullname": NAME, "extra_info": extra_info}, AUTO)
    assert (result.verdict, result.fails) == ("not comparable", True)
    assert result.line == (f"{NAME}: not comparable: the saved run is corrupted: its extra_info is not a mapping ({extra_info!r}); "
                           "re-save it")


def test_a_saved_benchmark_without_extra_info_is_corrupted_and_one_not_saved_is_new() -> None:
    """pytest-benchmark always writes ``extra_info``: one without it is corrupted; a benchmark the saved run lacks is new."""
    missing = compare_saved(NAME, info(), {"fullname": NAME}, AUTO)
    assert missing.fails and "the saved run is corrupted: it has no extra_info" in missing.line
    assert compare_saved(NAME, info(), None, AUTO).verdict == "new"
    assert compare_saved(NAME, info(), {"fullname": NAME, "extra_info": info()}, AUTO).verdict == "identical"


@pytest.mark.parametrize("extra_info", ["corrupted", None], ids=["text", "null"])
def test_the_session_fails_on_a_corrupted_saved_run_and_keeps_going(extra_info: Any) -> None:
    """The benchmarks' session finish (tests/benchmarks/conftest.py) hands each saved benchmark to :func:`compare_saved`:
    an ``extra_info`` that is a string fails the session with the corrupted line, where it raised AttributeError (and the
    timing table printed after it was lost), and a ``null`` one, read as "nothing to compare", passed."""
    from types import SimpleNamespace

    from tests.benchmarks import conftest

    bench = SimpleNamespace(name=NAME, fullname=f"tests/benchmarks/test_cells.py::{NAME}", extra_info=info())
    saved = {"/storage/0001_base.json": {bench.fullname: {"fullname": bench.fullname, "extra_info": extra_info}}}
    benchmarks = SimpleNamespace(compare=True, benchmarks=[bench], compared_mapping=saved, storage=None)
    config = SimpleNamespace(_benchmarksession=benchmarks, stash=pytest.Stash(),
                             getoption=lambda name, default=None: default)
    session = SimpleNamespace(config=config, exitstatus=pytest.ExitCode.OK)
    conftest.pytest_sessionfinish(session)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    ((file, (compared,)),) = config.stash[conftest._COMPARED]
    assert file == "0001_base.json" and compared.fails and "the saved run is corrupted: its extra_info is not a mapping" in compared.line
