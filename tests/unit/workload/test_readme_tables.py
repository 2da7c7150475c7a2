"""README.md's tables of modes, optimizers, loop features and models are the declarations' (harness/workload/docs.py), as
docs/contract.md's are (tests/unit/contract/test_contract_docs.py)."""

from __future__ import annotations

from harness.workload.docs import README, README_TABLES, readme_with_tables


def test_the_readme_tables_are_the_declarations() -> None:
    text = README.read_text()
    assert all(f"<!-- BEGIN {name}" in text for name in README_TABLES)
    assert text == readme_with_tables(text), "README.md is stale: run `python -m harness.workload.docs`"
