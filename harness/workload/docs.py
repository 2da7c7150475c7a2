"""README.md's tables of the script pairs and their modes, the optimizers and the loop features, from their declarations
(:data:`harness.contract.modes.SCRIPTS`, :data:`harness.workload.optimizers.OPTIMIZERS`,
:data:`harness.workload.features.FEATURES`): ``python -m harness.workload.docs`` rewrites them in place, and
tests/unit/workload/test_readme_tables.py fails when the README differs from what this would write, as
:mod:`harness.contract.docs` does for docs/contract.md."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path

from harness.contract.docs import with_tables
from harness.contract.modes import SCRIPTS
from harness.workload.features import FEATURES
from harness.workload.optimizers import OPTIMIZERS

__all__ = ["README", "README_TABLES", "feature_table", "mode_table", "optimizer_table", "readme_with_tables"]

#: The README, from the repository root.
README = Path(__file__).resolve().parents[2] / "README.md"


def mode_table() -> str:
    """Each script pair, its modes and what each runs."""
    rows = ["| script pair | mode | what runs |", "|---|---|---|"]
    for pair in SCRIPTS.values():
        for k, mode in enumerate(pair.modes):
            files = f"`py_scripts/{pair.stem}.py` ↔ `r_scripts/{pair.stem}.R`" if k == 0 else ""
            rows.append(f"| {files} | `{mode.name}` | {mode.title} |")
    return "\n".join(rows)


def optimizer_table() -> str:
    """Each PyTorch class, the R torch functions that mirror it (the R-code family's and the libtorch one's) and its rows."""
    rows = ["| PyTorch | R torch | rows |", "|---|---|---|"]
    for python in dict.fromkeys(o.python for o in OPTIMIZERS.values()):
        mine = [o for o in OPTIMIZERS.values() if o.python == python]
        functions = ", ".join(f"`{r}()`" for r in dict.fromkeys(o.r for o in mine))
        rows.append(f"| `torch.optim.{python}` | {functions} | {', '.join(f'`{o.name}`' for o in mine)} |")
    return "\n".join(rows)


def feature_table() -> str:
    """Each kind of loop feature and its rows, two kinds a row (the README is the front page: it stays short)."""
    kinds = [(kind, ", ".join(f"`{f.name}`" for f in FEATURES.values() if f.kind == kind))
             for kind in dict.fromkeys(f.kind for f in FEATURES.values())]
    rows = ["| kind | rows | kind | rows |", "|---|---|---|---|"]
    for left, right in itertools.zip_longest(kinds[0::2], kinds[1::2], fillvalue=("", "")):
        rows.append(f"| {left[0]} | {left[1]} | {right[0]} | {right[1]} |")
    return "\n".join(rows)


#: Each generated table of README.md: the name its markers carry, and what writes it.
README_TABLES: dict[str, Callable[[], str]] = {
    "mode table": mode_table, "optimizer table": optimizer_table, "feature table": feature_table,
}


def readme_with_tables(text: str) -> str:
    """README.md's ``text`` with its generated tables written from the declarations."""
    return with_tables(text, README_TABLES, "README.md")


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else README
    path.write_text(readme_with_tables(path.read_text()))
