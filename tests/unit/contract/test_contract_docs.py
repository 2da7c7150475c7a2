"""docs/contract.md says what the declaration says: its generated tables are current, and its run-spec table names every
field a run spec has."""

from __future__ import annotations

import re

from harness.contract.docs import CONTRACT_DOC, with_tables
from harness.contract.modes import SCRIPTS
from harness.workload.run_spec import run_spec_for
from harness.workload.spec import WorkloadSpec


def test_the_generated_tables_are_the_declarations() -> None:
    text = CONTRACT_DOC.read_text()
    assert text == with_tables(text), "docs/contract.md is stale: run `python -m harness.contract.docs`"


def test_the_run_spec_table_names_every_field_of_a_run_spec() -> None:
    section = CONTRACT_DOC.read_text().split("## The run spec")[1].split("\n## ")[0]
    documented = {name for row in section.splitlines() if row.startswith("| `") for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    run_spec = run_spec_for(WorkloadSpec.from_preset("tiny"), "with_autocast", "sgd", "f.safetensors", None).to_json()
    assert documented == set(run_spec)


def test_each_script_pairs_modes_are_listed() -> None:
    rows = {row.split("|")[1].strip(" `"): row for row in CONTRACT_DOC.read_text().splitlines() if row.startswith("| `")}
    for stem, pair in SCRIPTS.items():
        assert all(f"`{mode}`" in rows[stem] for mode in pair.mode_names), stem
