"""docs/contract.md's tables, from the declaration: ``python -m harness.contract.docs`` rewrites them in place, and
tests/unit/contract/test_contract_docs.py fails when the file differs from what this would write."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from harness.contract.dtypes import dtype_markdown
from harness.contract.record import record_table

__all__ = ["GENERATED", "CONTRACT_DOC", "with_tables"]

#: The contract's page, from the repository root.
CONTRACT_DOC = Path(__file__).resolve().parents[2] / "docs" / "contract.md"
#: Each generated table: the name its markers carry, and what writes it.
GENERATED: dict[str, Callable[[], str]] = {"record table": record_table, "dtype table": dtype_markdown}


def with_tables(text: str, generated: Mapping[str, Callable[[], str]] = GENERATED, page: str = "docs/contract.md") -> str:
    """``text`` with every ``generated`` table between its markers written from the declaration (``page`` names the
    page in the error; README.md's tables are :mod:`harness.workload.docs`'s).

    Raises:
        ValueError: a table's markers are missing (the page must keep them).
    """
    for name, table in generated.items():
        pattern = re.compile(rf"(<!-- BEGIN {name}[^>]*-->\n).*?(<!-- END {name} -->)", re.S)
        found = pattern.search(text)
        if found is None:
            raise ValueError(f"{page} lost the markers of its {name} (<!-- BEGIN {name} ... --> and <!-- END {name} -->)")
        text = text[:found.end(1)] + table() + "\n" + text[found.start(2):]
    return text


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else CONTRACT_DOC
    path.write_text(with_tables(path.read_text()))
