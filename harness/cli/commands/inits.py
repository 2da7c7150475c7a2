"""``python -m harness inits``: every ``nn_init_*`` function of R torch against ``torch.nn.init``, bitwise, after the same seed.

The cases are declared once (:mod:`harness.contract.nn_init`), both twin scripts run them
(:mod:`harness.run.init_parity`), and each is judged and explained (:mod:`harness.judge.init_parity`). It exits 0 when
every case is identical, refused by both, or covered by its explanation (proven, for a difference in the values), and 1
otherwise, naming the cases. ``--out DIR`` keeps the cases, both scripts' files, ``init-parity.json`` and
``init-parity.md`` (the table docs/init-parity.md holds).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from harness.judge.init_parity import InitParity

__all__ = ["add_parser", "command", "markdown_table", "print_summary"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], switches: argparse.ArgumentParser) -> None:
    """The ``inits`` command: ``--out DIR`` and ``--overwrite``."""
    inits = commands.add_parser("inits", parents=[switches],
                                help="compare every nn_init_* function of R torch with torch.nn.init, bitwise, after the same seed")
    inits.add_argument("--out", type=Path, help="keep the cases, both scripts' files and the judgement (JSON, Markdown) here")
    inits.add_argument("--overwrite", action="store_true", help="write into --out even if it holds files")


def command(args: argparse.Namespace) -> ExitCode:
    """``harness inits``: run both scripts, judge, print the table and what is not identical; FAILED if anything is unexplained."""
    import json

    from harness.errors import UsageError
    from harness.run.init_parity import run_init_parity
    from harness.views.table import make_console

    out: Path | None = args.out
    if out is not None and out.exists() and (not out.is_dir() or (any(out.iterdir()) and not args.overwrite)):
        raise UsageError("--out", str(out), "a new or empty folder (or pass --overwrite to write into it)")
    console = make_console()
    with tempfile.TemporaryDirectory(prefix="amp-parity-inits-") as scratch:
        folder = out or Path(scratch)
        with console.status("running the nn_init cases in PyTorch and in R torch..."):
            parity = run_init_parity(folder)
        table = markdown_table(parity)
        if out is not None:
            (out / "init-parity.json").write_text(json.dumps(parity.to_json(), indent=1) + "\n", encoding="utf-8")
            (out / "init-parity.md").write_text(table, encoding="utf-8")
    print_summary(parity, console)
    for name in parity.stale:
        console.print(f"stale: the explanation {name} matches no case: remove or update it (harness/judge/init_parity.py)",
                      markup=False, highlight=False)
    for o in parity.unexplained:
        why = "its explanation's switch does not give R's bytes" if o.explanation else "no explanation"
        console.print(f"unexplained: {o.case['id']}: {o.verdict}, {o.detail} ({why})", markup=False, highlight=False)
    return ExitCode.OK if parity.ok else ExitCode.FAILED


def print_summary(parity: InitParity, console: Console) -> None:
    """The counts by function and verdict, then each explanation with the cases it covers (the cases: ``--out``'s Markdown)."""
    from rich.table import Table

    from harness.judge.init_parity import INIT_EXPLANATIONS, VERDICTS

    console.print(markdown_table(parity).split("\n", 1)[0], markup=False, highlight=False)
    table = Table(header_style="bold")
    table.add_column("function")
    for verdict in VERDICTS:
        table.add_column(verdict, justify="right")
    for name, row in parity.counts().items():
        table.add_row(name, *(str(row[v]) if row[v] else "" for v in VERDICTS))
    console.print(table)
    covered = {e.id: [o for o in parity.outcomes if o.explanation == e.id] for e in INIT_EXPLANATIONS}
    for e in INIT_EXPLANATIONS:
        if covered[e.id]:
            proof = ", proven by its switch" if e.switch else ""
            console.print(f"{e.id} ({e.kind}): {len(covered[e.id])} {e.verdict} cases{proof}: {e.title}", markup=False,
                          highlight=False)


def markdown_table(parity: InitParity) -> str:
    """The per-function counts, then every case that is not identical with its verdict, what was seen and why."""
    from harness.contract.nn_init import InitVerdict
    from harness.judge.init_parity import VERDICTS

    python, r = (parity.versions.get(k, {}).get("binding", "?") for k in ("python", "r"))
    lines = [f"{python} vs {r}, libtorch {parity.versions.get('r', {}).get('libtorch', '?')}, CPU: "
             f"{len(parity.outcomes)} cases, {sum(o.verdict is InitVerdict.IDENTICAL for o in parity.outcomes)} identical.", "",
             "| function | " + " | ".join(VERDICTS) + " |", "|---|" + "---:|" * len(VERDICTS)]
    lines += [f"| `{name}` | " + " | ".join(str(row[v]) for v in VERDICTS) + " |" for name, row in parity.counts().items()]
    lines += ["", "| case | verdict | seen | explanation |", "|---|---|---|---|"]
    for o in parity.outcomes:
        if o.verdict is InitVerdict.IDENTICAL:
            continue
        why = o.explanation or ("(both refuse)" if o.verdict is InitVerdict.BOTH_REFUSE else "**unexplained**")
        if o.proven is False:
            why += " (**not proven**)"
        lines.append(f"| `{o.case['id']}` | {o.verdict} | {o.detail.replace('|', '/')} | {why} |")
    return "\n".join(lines) + "\n"
