"""A known-differences list is data with bounds: an entry that is too broad or cannot match anything is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import KnownDifferencesError
from harness.judge.known_differences import DEFAULT_LIST, MAX_DISTANCE, load_known_differences
from tests.support import KNOWN_DIFFERENCE_ENTRY

ENTRY = KNOWN_DIFFERENCE_ENTRY


def load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "list.toml"
    path.write_text(text, encoding="utf-8")
    load_known_differences.cache_clear()
    return load_known_differences(path)


def test_the_committed_list_loads() -> None:
    """The project's own list passes every check."""
    assert load_known_differences(DEFAULT_LIST)


def test_a_valid_entry_loads_with_its_languages_in_either_order(tmp_path: Path) -> None:
    """Languages are a set: an entry written r-first covers a python-first pair too."""
    (entry,) = load(tmp_path, ENTRY)  # type: ignore[misc]
    assert entry.languages == frozenset({"python", "r"}) and entry.switches == ("r-clip-coef-reciprocal",)


@pytest.mark.parametrize(("old", "new", "field"), [
    ('first_point = "clip.coef"', 'first_point = "*"', "signature.first_point"),
    ('first_point = "clip.coef"', 'first_point = "optim.*.{param}"', "signature.first_point"),
    ("max_distance = 1", "max_distance = -5", "signature.max_distance"),
    ("max_distance = 1", f"max_distance = {MAX_DISTANCE + 1}", "signature.max_distance"),
    ("max_distance = 1\n", "", "signature.max_distance"),
    ('first_step = "trigger"', "first_step = []", "signature.first_step"),
    ('scripts = ["cuda_amp_grad_scaler"]', 'scripts = ["cuda_amp_grad_scalr"]', "scripts"),
    ('modes = ["autocast_scaler_clip"]', 'modes = ["autocast"]', "modes"),
    ('modes = ["autocast_scaler_clip"]', "modes = []", "modes"),
    ('optimizers = "all"', 'optimizers = ["adamm"]', "optimizers"),
    ('languages = ["r", "python"]', 'languages = ["r", "julia"]', "languages"),
    ('languages = ["r", "python"]', 'languages = ["r", "r"]', "languages"),
    ('devices = ["cpu"]', 'devices = ["tpu"]', "devices"),
    ('trigger = "clip_engaged"', 'trigger = "sometimes"', "trigger"),
    ('switches = ["r-clip-coef-reciprocal"]', 'switches = ["no-such-switch"]', "switches"),
    ('kind = "difference"', 'kind = "feature"', "kind"),
    ('title = "t"', 'title = "t"\nfrontends = ["python", "r"]', "frontends"),
])
def test_an_entry_that_cannot_match_or_matches_too_much_is_refused(tmp_path: Path, old: str, new: str, field: str) -> None:
    """Each broken field is refused in one line naming the list, the entry and the field."""
    assert old in ENTRY
    with pytest.raises(KnownDifferencesError) as raised:
        load(tmp_path, ENTRY.replace(old, new, 1))
    message = str(raised.value)
    assert "list.toml" in message and "clip-coef-reciprocal" in message and f"`{field}`" in message
    assert "\n" not in message


def test_an_entry_whose_switches_cannot_prove_one_of_its_optimizers_is_refused(tmp_path: Path) -> None:
    """An entry must name, for every optimizer it covers, a switch that acts on it: otherwise it can never be proven."""
    scoped = ENTRY.replace('optimizers = "all"', 'optimizers = ["sgd", "adam"]').replace(
        'switches = ["r-clip-coef-reciprocal"]', 'switches = ["r-sgd-weight-decay-param"]')
    with pytest.raises(KnownDifferencesError, match="none acts on adam"):
        load(tmp_path, scoped)


def test_a_bug_needs_its_reproducers_and_report(tmp_path: Path) -> None:
    """A bug entry without docs/bugs/<id>/ (reproducers in both languages and the report) is refused."""
    with pytest.raises(KnownDifferencesError, match="needs docs/bugs/clip-coef-reciprocal/reproducer.R"):
        load(tmp_path, ENTRY.replace('kind = "difference"', 'kind = "bug"'))


#: R torch's R-code optimizer rows: each inherits Optimizer$zero_grad (R/optim.R:91-93), the mechanism of zero-grad-default.
_R_CODE = ("sgd", "sgd_momentum", "sgd_nesterov", "rmsprop", "rmsprop_centered", "adam", "adam_amsgrad", "adamw", "adagrad",
           "adadelta", "asgd", "rprop")


def test_the_seed_0_searchs_findings_are_in_their_entries_scope() -> None:
    """The 1,000-example seed-0 search (issue 49) found clip_norm_inf in bf16 weights (R's infinity norm float32, then
    its division float32: both entries and their switches) and sometimes_used_default beyond the scaler mode and the main
    job's three optimizers (each binding's zero_grad() default acts in every script, mode and R-code optimizer)."""
    load_known_differences.cache_clear()
    known = {k.id: k for k in load_known_differences()}
    for mode in ("lowp_weights", "lowp_weights_scaled"):
        for entry in ("clip-inf-norm-float32", "clip-coef-number-divide"):
            assert known[entry].covers("with_autocast", mode, "sgd", "cpu", "clip_norm_inf"), (entry, mode)
    assert set(known["clip-inf-norm-float32"].switches_for("sgd", "r")) == {"r-clip-inf-norm-grad-dtype", "r-clip-coef-reciprocal"}
    assert not known["clip-inf-norm-float32"].covers("with_autocast", "default", "sgd", "cpu", "clip_norm_inf")
    zero_grad = known["zero-grad-default"]
    modes = {"with_autocast": ("default", "autocast", "lowp_weights", "lowp_weights_scaled"),
             "cuda_amp_grad_scaler": ("default", "autocast_scaler", "autocast_scaler_clip")}
    for script, script_modes in modes.items():
        for mode in script_modes:
            for optimizer in _R_CODE:
                assert zero_grad.covers(script, mode, optimizer, "cpu", "sometimes_used_default"), (script, mode, optimizer)
                assert zero_grad.switches_for(optimizer, "r") == ("r-zero-grad-default-set-to-none",), optimizer
    assert not zero_grad.covers("cuda_amp_grad_scaler", "autocast_scaler", "ignite_adam", "cpu", "sometimes_used_default")
    assert not zero_grad.covers("cuda_amp_grad_scaler", "autocast_scaler", "sgd_momentum", "cpu", "sometimes_used")
    # plain sgd given momentum in bf16 weights: by its arguments, or by a scheduler that cycles momentum (OneCycleLR)
    plain = known["mul-scalar-overload-plain-sgd"]
    assert plain.covers("with_autocast", "lowp_weights", "sgd", "cpu", "lr_one_cycle")
    assert plain.inert({"lr": 0.05}) == "momentum = 0, so its mechanism cannot act"
    assert plain.inert({"lr": 0.05, "momentum": 0.188}) is None and plain.inert({"lr": 0.05}, "lr_one_cycle") is None
