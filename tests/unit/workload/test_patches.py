"""The patches of the bindings' functions, as data: what a run of each optimizer gets, in each language."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ExitCode, PatchesError
from harness.workload.patches import PATCHES_FILE, POINT_CALL, POINTS, SWITCHES, check_switch, load_patches, patches_for
from harness.workload.run_spec import run_spec_for
from harness.workload.spec import WorkloadSpec


def test_every_point_is_defined_in_both_languages() -> None:
    """A traced value exists on both sides or on neither: each point names a target, an anchor and a value per language."""
    for point in POINTS:
        assert set(point.sides) == {"python", "r"}
        for target, anchor, where, value, _index in point.sides.values():
            assert target and anchor and value and where in ("before", "after")


def test_a_point_and_a_switch_on_one_statement_make_one_replacement() -> None:
    """R's clip coefficient: the switch replaces the statement, and the norm and coefficient points follow the switched one."""
    (patch,) = patches_for("sgd", ("r-clip-coef-reciprocal",))["r"]
    assert patch["kind"] == "switch" and patch["old"] == "clip_coef <- max_norm/(total_norm + 1e-06)"
    assert patch["new"] == (f"{POINT_CALL}('clip.total_norm', total_norm); clip_coef <- (total_norm + 1e-06)$reciprocal() * "
                            f"max_norm; {POINT_CALL}('clip.coef', clip_coef)")


def test_without_switches_a_run_gets_only_points() -> None:
    """A plain run patches nothing but the trace's points (applied only when it is traced)."""
    patches = patches_for("sgd")
    assert {p["kind"] for language in patches.values() for p in language} == {"point"}


def test_a_switch_acts_only_on_the_optimizers_whose_functions_it_patches() -> None:
    """A switch scoped to some optimizers is not applied to a run of another (its function is never called there)."""
    scoped = [s for s in SWITCHES.values() if s.optimizers]
    for switch in scoped:
        other = next(o for o in ("sgd", "rprop", "adagrad", "ignite_sgd") if o not in switch.optimizers)
        assert all(p["id"].split("+")[0] != switch.id for p in patches_for(other, (switch.id,))[switch.side])


def test_the_run_spec_carries_each_languages_patches_and_the_switches() -> None:
    """The run spec names the switches a run applies and both languages' replacements (each script picks its own)."""
    spec = run_spec_for(WorkloadSpec.from_preset("tiny"), "cuda_amp_grad_scaler", "sgd", "fixture.safetensors", None,
                        switches=("r-clip-coef-reciprocal",)).to_json()
    assert spec["switches"] == ["r-clip-coef-reciprocal"] and set(spec["patches"]) == {"python", "r"}


def _switch_file(tmp_path: Path, side: str, old: str, new: str) -> Path:
    path = tmp_path / "patches.toml"
    path.write_text(f'[[switch]]\nid = "s"\nside = "{side}"\ntitle = "t"\ntarget = "optim_adam$step"\n'
                    f"old = '{old}'\nnew = '{new}'\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("side", "old", "new", "why"), [
    ("r", "exp_avg$mul_(beta1)$add_(grad, alpha = 1 - beta1)", "exp_avg$lerp_(grad, 1 - beta1); group$lr <- 0.05", "second statement"),
    ("r", "exp_avg$mul_(beta1)$add_(grad, alpha = 1 - beta1)", "exp_avg$lerp_(grad, (group$lr <- 0.05) * 0 + 1 - beta1)",
     "inside an expression"),
    ("r", "exp_avg$mul_(beta1)$add_(grad, alpha = 1 - beta1)", "{ exp_avg$lerp_(grad, 1 - beta1) }", "block"),
    ("r", "clip_coef <- max_norm/(total_norm + 1e-06)", "lr <- max_norm/(total_norm + 1e-06)", "'lr'"),
    ("python", "exp_avg.lerp_(grad, 1 - beta1)", "exp_avg.lerp_(grad, 1 - beta1); lr = 0.05", "2 statements"),
    ("python", "exp_avg.lerp_(grad, 1 - beta1)", "if True: exp_avg.lerp_(grad, 1 - beta1)", "compound"),
    ("python", "exp_avg.lerp_(grad, 1 - beta1)", "exp_avg.lerp_(grad, (lr := 0.05) * 0 + 1 - beta1)", "inside an expression"),
])
def test_a_switch_that_does_more_than_one_statement_is_refused_at_load(tmp_path: Path, side: str, old: str, new: str, why: str) -> None:
    """Issue 37 (4): a switch is one statement for one statement, writing only what the statement it replaces writes; a
    second statement hidden in its replacement (R's `...; group$lr <- 0.05`) is refused when patches.toml is loaded."""
    with pytest.raises(PatchesError, match=f"switch 's'.*{re.escape(why)}"):
        load_patches(_switch_file(tmp_path, side, old, new))


def test_every_committed_switch_is_one_statement_for_one_statement(tmp_path: Path) -> None:
    """The committed switches pass the check, R's step read as a double included (it assigns the name it changed in place)."""
    assert check_switch("r", "step$add_(1)", "step <- step$add_(1)$item()") is None
    assert load_patches(PATCHES_FILE)[0].keys() == SWITCHES.keys()


def test_a_switch_on_a_method_every_optimizer_inherits_targets_the_rows_own_optimizer() -> None:
    """A switch whose R target is ``$method`` (zero_grad, which the R-code optimizers inherit) patches that method of the
    optimizer each row builds, as a point's ``$method`` does."""
    targets = {o: [p["target"] for p in patches_for(o, ("r-zero-grad-default-set-to-none",))["r"] if p["kind"] == "switch"]
               for o in ("sgd_momentum", "adam")}
    assert targets == {"sgd_momentum": ["optim_sgd$zero_grad"], "adam": ["optim_adam$zero_grad"]}


def _toml(value: Any) -> str:
    """``value`` as TOML (strings, booleans, whole numbers, lists and inline tables: what a patches entry holds)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are TOML's basic string's
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"


def _patches_file(tmp_path: Path, data: dict[str, Any]) -> Path:
    """``data`` (``switch`` and ``point`` lists of entries, any other key a table) written as a patches file."""
    text = []
    for kind, entries in data.items():
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            text.append(f"{kind} = {_toml(entries)}")
            continue
        for entry in entries:
            text.append(f"[[{kind}]]\n" + "".join(f"{json.dumps(k)} = {_toml(v)}\n" for k, v in entry.items()))
    path = tmp_path / "patches.toml"
    path.write_text("\n".join(text), encoding="utf-8")
    return path


_COMMITTED = tomllib.loads(PATCHES_FILE.read_text(encoding="utf-8"))
#: One committed switch (with optimizers) and one committed point (with an index), the entries each malformation starts from.
_SWITCH = next(s for s in _COMMITTED["switch"] if "optimizers" in s)
_POINT = next(p for p in _COMMITTED["point"] if "index" in p["python"])


def _malformed() -> list[tuple[str, str, Any]]:
    """(what, which entry's label the line must name, the data): every field of a switch and of a point missing, of another
    kind, unknown or out of its values, and the file's own shape."""
    cases: list[tuple[str, str, Any]] = []
    sid, pname = repr(_SWITCH["id"]), repr(_POINT["name"])
    for key in ("id", "side", "title", "target", "old", "new"):
        label = "1 (its id missing)" if key == "id" else sid
        cases.append((f"switch without {key}", label, {"switch": [{k: v for k, v in _SWITCH.items() if k != key}]}))
        for bad in (5, ["x"], "", True):
            cases.append((f"switch {key}={bad!r}", "1 (its id missing)" if key == "id" else sid, {"switch": [{**_SWITCH, key: bad}]}))
    for bad in ("julia",):
        cases.append((f"switch side={bad}", sid, {"switch": [{**_SWITCH, "side": bad}]}))
    for bad in ("sgd", ["nadam"], [3], {"a": "b"}):
        cases.append((f"switch optimizers={bad!r}", sid, {"switch": [{**_SWITCH, "optimizers": bad}]}))
    cases.append(("switch with an unknown field", sid, {"switch": [{**_SWITCH, "optimisers": ["sgd"]}]}))
    cases.append(("switch whose new is two statements", sid, {"switch": [{**_SWITCH, "new": _SWITCH["new"] + "; x <- 1"}]}))
    cases.append(("a switch twice", sid, {"switch": [_SWITCH, _SWITCH]}))
    cases.append(("switch not a table", "1", {"switch": ["r-clip-coef-reciprocal"]}))
    for key in ("name", "python", "r"):
        label = "1 (its name missing)" if key == "name" else pname
        cases.append((f"point without {key}", label, {"point": [{k: v for k, v in _POINT.items() if k != key}]}))
        cases.append((f"point {key}=5", "1 (its name missing)" if key == "name" else pname, {"point": [{**_POINT, key: 5}]}))
    for language in ("python", "r"):
        side = _POINT[language]
        anchor = "before" if "before" in side else "after"
        for key in ("target", "value", anchor):
            without = {k: v for k, v in side.items() if k != key}
            cases.append((f"point {language} without {key}", pname, {"point": [{**_POINT, language: without}]}))
            cases.append((f"point {language}.{key}=[]", pname, {"point": [{**_POINT, language: {**side, key: []}}]}))
        both = {**side, "before": "x", "after": "y"}
        cases.append((f"point {language} before and after", pname, {"point": [{**_POINT, language: both}]}))
        cases.append((f"point {language}.index=1", pname, {"point": [{**_POINT, language: {**side, "index": 1}}]}))
        cases.append((f"point {language} unknown field", pname, {"point": [{**_POINT, language: {**side, "where": "x"}}]}))
    cases.append(("point clip='yes'", pname, {"point": [{**_POINT, "clip": "yes"}]}))
    unindexed = {k: v for k, v in _POINT["r"].items() if k != "index"}
    cases.append(("point {param} without an index", pname, {"point": [{**_POINT, "r": unindexed}]}))
    cases.append(("point with an index but no {param}", "'clip.norm'", {"point": [{**_POINT, "name": "clip.norm"}]}))
    cases.append(("point that no run records", pname, {"point": [{k: v for k, v in _POINT.items() if k != "optimizers"}]}))
    cases.append(("point optimizers=['nadam']", pname, {"point": [{**_POINT, "optimizers": ["nadam"]}]}))
    cases.append(("point unknown field", pname, {"point": [{**_POINT, "clip_mode": True}]}))
    cases.append(("switch a table, not an array", "", {"switch": {"id": "x"}}))
    cases.append(("an unknown table", "", {"switches": [_SWITCH]}))
    return cases


@pytest.mark.parametrize(("what", "label", "data"), _malformed(), ids=[c[0] for c in _malformed()])
def test_every_malformed_entry_is_one_line_naming_the_file_and_the_entry(tmp_path: Path, what: str, label: str, data: Any) -> None:
    """Issue 48 (13): a malformed patches.toml was a ValueError (or KeyError, TypeError) traceback at import, exit 1. Every
    malformed entry, whichever field, is one PatchesError line naming the file and the switch or point (by its id, or its
    place where it has none), which the command line turns into its own exit status."""
    path = _patches_file(tmp_path, data)
    with pytest.raises(PatchesError) as refused:
        load_patches(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message
    kind = "point" if "point" in data else "switch"
    if label:
        assert message.startswith(f"{path}: {kind} {label}"), message
    assert ExitCode.for_error(refused.value) is ExitCode.BROKEN_PATCHES


@pytest.mark.parametrize("text", ["[[switch]\nid = 1", "\x00\x01binary", "a = 1\n" * 10])
def test_a_file_that_is_not_a_patches_table_is_one_line_too(tmp_path: Path, text: str) -> None:
    """Not TOML, not text, another table, or no file at all: one line naming the file."""
    path = tmp_path / "patches.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PatchesError, match=f"^{re.escape(str(path))}: "):
        load_patches(path)
    with pytest.raises(PatchesError, match=f"^{re.escape(str(tmp_path / 'none.toml'))}: cannot be read"):
        load_patches(tmp_path / "none.toml")


def test_the_committed_file_is_named_by_its_place_in_the_project(tmp_path: Path) -> None:
    """The written entries load back as the committed ones, and messages name the committed file by its project path."""
    assert load_patches(_patches_file(tmp_path, {"switch": [_SWITCH], "point": [_POINT]}))[0].keys() == {_SWITCH["id"]}
    assert load_patches(PATCHES_FILE) == (SWITCHES, POINTS)
