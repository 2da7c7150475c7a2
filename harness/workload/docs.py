"""README.md's tables of the script pairs and their modes, the optimizers and the loop features, from their declarations
(:data:`harness.contract.modes.SCRIPTS`, :data:`harness.workload.optimizers.OPTIMIZERS`,
:data:`harness.workload.features.FEATURES`): ``python -m harness.workload.docs`` rewrites them in place, and
tests/unit/workload/test_readme_tables.py fails when the README differs from what this would write, as
:mod:`harness.contract.docs` does for docs/contract.md."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from harness.contract.docs import with_tables
from harness.contract.models import MODELS
from harness.contract.modes import SCRIPTS
from harness.workload.features import FEATURES
from harness.workload.optimizers import OPTIMIZERS

__all__ = ["README", "README_TABLES", "feature_table", "mode_table", "model_table", "optimizer_table", "readme_with_tables"]

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
    """Each optimizer: its R torch family, the PyTorch class and the R torch function it pairs."""
    rows = ["| optimizer | R torch family | PyTorch | R torch | what it is |", "|---|---|---|---|---|"]
    rows += [f"| `{o.name}` | {o.family} | `torch.optim.{o.python}` | `{o.r}()` | {o.title} |" for o in OPTIMIZERS.values()]
    return "\n".join(rows)


def feature_table() -> str:
    """Each loop feature: its kind and what it changes in the loop."""
    rows = ["| feature | kind | what it changes |", "|---|---|---|"]
    rows += [f"| `{f.name}` | {f.kind} | {f.title} |" for f in FEATURES.values()]
    return "\n".join(rows)


def model_table() -> str:
    """Each model a workload trains."""
    rows = ["| model | what it is |", "|---|---|"]
    rows += [f"| `{m.name}` | {m.title} |" for m in MODELS.values()]
    return "\n".join(rows)


#: Each generated table of README.md: the name its markers carry, and what writes it.
README_TABLES: dict[str, Callable[[], str]] = {
    "mode table": mode_table, "optimizer table": optimizer_table, "feature table": feature_table, "model table": model_table,
}


def readme_with_tables(text: str) -> str:
    """README.md's ``text`` with its generated tables written from the declarations."""
    return with_tables(text, README_TABLES, "README.md")


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else README
    path.write_text(readme_with_tables(path.read_text()))
