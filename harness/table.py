"""The terminal view of a result: one rich table of cells, then reasons and warnings."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from harness.compare import PairVerdict

__all__ = ["make_console", "print_result"]

_STATUS_STYLE = {"ok": "green", "skipped": "yellow", "unsupported": "magenta", "numerical_failure": "red", "error": "bold red"}


_VERDICT_STYLE = {"identical": "green", "within_tolerance": "green", "skipped": "yellow", "unsupported": "magenta",
                  "diverged": "bold red", "error": "bold red"}


def make_console() -> Console:
    """A console as wide as the terminal, or 120 columns when output goes to a file or pipe (CI logs)."""
    return Console(width=None if Console().is_terminal else 120)


def _num(value: float | None, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def print_result(result: dict[str, Any], console: Console | None = None) -> None:
    """Print the cells of ``result``: status, final loss, distance from float64, seconds, speedup."""
    console = console or make_console()
    spec = result["spec"]
    table = Table(
        title=(f"amp-parity · preset {spec['preset']} · {spec['device']} · {spec['amp_dtype']} · "
               f"{spec['epochs'] * spec['num_batches']} steps"),
        header_style="bold",
    )
    for name, justify in [
        ("mode", "left"), ("frontend", "left"), ("status", "left"), ("final loss", "right"),
        ("Δloss f64", "right"), ("Δweights f64", "right"), ("seconds", "right"), ("×default", "right"),
    ]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for cell in result["cells"]:
        record = cell.get("record") or {}
        distance = cell.get("reference_distance") or {}
        status = cell["status"]
        table.add_row(
            cell["mode"], cell["frontend"], f"[{_STATUS_STYLE.get(status, '')}]{status}[/]",
            _num(record.get("final_loss"), ".7g"), _num(distance.get("max_rel_loss_error"), ".2e"),
            _num(distance.get("final_weights_rel_error"), ".2e"), _num(record.get("seconds_total"), ".4f"),
            _num(cell.get("speedup_vs_default"), ".2f"),
        )
    console.print(table)
    if not result["reference"]["available"]:
        console.print(f"[dim]{result['reference']['reason']}[/]")
    reasons: dict[str, list[str]] = {}
    for cell in result["cells"]:
        if cell["status"] != "ok" and cell["reason"]:
            reasons.setdefault(cell["reason"], []).append(cell["id"])
    for reason, ids in reasons.items():
        who = ids[0] if len(ids) == 1 else f"{len(ids)} cells ({ids[0]}, ...)"
        console.print(f"[yellow]{who}[/]: {reason}", soft_wrap=True)
    compared = [p for p in result.get("pairs", []) if p["verdict"] != "skipped"]
    not_compared = len(result.get("pairs", [])) - len(compared)
    if not_compared:
        console.print(f"[yellow]parity:[/] {not_compared} pair(s) not compared: a frontend was skipped (reason above)")
    if compared:
        pairs = Table(title="parity (python vs r)", header_style="bold")
        pairs.add_column("pair")
        pairs.add_column("verdict")
        pairs.add_column("why", overflow="fold")
        for pair in compared:
            verdict = pair["verdict"]
            pairs.add_row(pair["pair"], f"[{_VERDICT_STYLE.get(verdict, '')}]{verdict}[/]", PairVerdict.from_dict(pair).cause)
        console.print(pairs)
    for warning in result["warnings"]:
        console.print(f"[bold yellow]warning:[/] {warning}", soft_wrap=True)
