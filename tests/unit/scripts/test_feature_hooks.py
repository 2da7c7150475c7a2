"""Each kind of loop feature (harness/workload/features.py's KINDS) is one set of hooks in each language and one entry of
the float64 reference, in one place each: a kind missing from any of the three fails here, before any cell could run it.

Python's hooks are read from the module (``py_scripts/features.py``: ``FEATURE_HOOKS``, ``PLAIN_LOOP``), R's from the
text of ``r_scripts/features.R`` (``feature_hooks <- list(...)``, ``plain_loop <- list(...)``: no R needed), the
reference's from :data:`harness.judge.loop_kinds.REFERENCE_HOOKS`.
"""

from __future__ import annotations

import re

import pytest

from harness.files.paths import script_path
from harness.judge.loop_kinds import REFERENCE_HOOKS, ReferenceLoop, reference_loop
from harness.workload.features import FEATURES, KINDS
from py_scripts.features import FEATURE_HOOKS, PLAIN_LOOP


def _r_list(name: str) -> dict[str, set[str]]:
    """R's ``name <- list(...)`` in features.R: each element's name and, where the element is a ``list(...)`` itself, the
    names inside it."""
    text = script_path("r", "features").read_text()
    body = text.split(f"\n{name} <- list(\n")[1].split("\n)\n")[0]
    entries: dict[str, set[str]] = {}
    for line in body.splitlines():
        found = re.match(r"\s*(\w+) = list\((.*)\),?\s*$", line)
        if found:
            entries[found.group(1)] = set(re.findall(r"(\w+) = ", found.group(2)))
        else:  # several elements on a line: their names, once what is inside parentheses is gone
            while re.search(r"\([^()]*\)", line):
                line = re.sub(r"\([^()]*\)", "", line)
            entries |= {key: set() for key in re.findall(r"(?:^|,)\s*(\w+) = ", line)}
    return entries


def test_every_kind_has_hooks_in_python_and_r_and_a_reference() -> None:
    assert set(FEATURE_HOOKS) == set(KINDS), "py_scripts/features.py FEATURE_HOOKS: a kind without hooks, or one not in KINDS"
    assert set(_r_list("feature_hooks")) == set(KINDS), "r_scripts/features.R feature_hooks: a kind without hooks"
    assert set(REFERENCE_HOOKS) == set(KINDS), "harness/judge/loop_kinds.py REFERENCE_HOOKS: a kind without a reference"


def test_each_kind_hooks_the_same_points_in_both_languages() -> None:
    """The points are the plain loop's (the same in both languages), and each kind acts at the same ones in both."""
    assert set(_r_list("plain_loop")) == set(PLAIN_LOOP)
    r_hooks = _r_list("feature_hooks")
    for kind, hooks in FEATURE_HOOKS.items():
        assert hooks and set(hooks) <= set(PLAIN_LOOP), kind
        assert r_hooks[kind] == set(hooks), kind


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_every_row_changes_the_reference_as_its_kind_says(name: str) -> None:
    """A row's reference loop is the plain one changed by its kind's entry (custom_function and resume: unchanged, their
    arithmetic is the plain loop's)."""
    row = FEATURES[name]
    changed = reference_loop(row) != ReferenceLoop()
    assert changed == (row.kind not in ("custom_function", "resume") and not (row.kind == "scheduler" and not row.groups)), name
