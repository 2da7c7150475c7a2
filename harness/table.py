"""The terminal view of a result: one rich table of cells, then reasons and warnings."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from harness.figures import check_figures
from harness.model import PairVerdict
from harness.text import num
from harness.timing import frontend_costs

__all__ = ["make_console", "print_result"]

_STATUS_STYLE = {"ok": "green", "skipped": "yellow", "unsupported": "magenta", "numerical_failure": "red", "error": "bold red"}


_OWN_STYLE = {"pass": "green", "fail": "bold red", "not_judged": "dim"}
_OWN_TEXT = {"pass": "pass", "fail": "FAIL", "not_judged": "—"}

_VERDICT_STYLE = {"identical": "green", "within_tolerance": "green", "skipped": "yellow", "unsupported": "magenta",
                  "diverged": "bold red", "error": "bold red"}


def make_console() -> Console:
    """A console as wide as the terminal, or 150 columns (the table has 12) when output goes to a file or pipe (CI logs)."""
    return Console(width=None if Console().is_terminal else 150)


def print_result(result: dict[str, Any], console: Console | None = None) -> None:
    """Print the cells of ``result``: status, its own verdict (float64 bound, scaler rule), final loss,
    distance from float64, seconds, speedup; then why any cell failed."""
    console = console or make_console()
    spec = result["spec"]
    table = Table(
        title=(f"amp-parity · preset {spec['preset']} · {spec['device']} · {spec['amp_dtype']} · "
               f"{spec['epochs'] * spec['num_batches']} steps"),
        header_style="bold",
    )
    for name, justify in [
        ("mode", "left"), ("frontend", "left"), ("status", "left"), ("own check", "left"), ("final loss", "right"),
        ("Δloss f64", "right"), ("Δweights f64", "right"), ("loop s", "right"), ("CV", "right"), ("×default", "right"),
        ("TFLOP/s", "right"), ("% peak", "right"),
    ]:
        table.add_column(name, justify=justify, no_wrap=name in ("mode", "final loss"))  # type: ignore[arg-type]
    for cell in result["cells"]:
        record = cell.get("record") or {}
        distance = cell.get("reference_distance") or {}
        timing = cell.get("timing") or {}
        loop = timing.get("loop") or {}
        efficiency = cell.get("efficiency") or {}
        status = cell["status"]
        time_vs_default = cell.get("time_vs_default")
        own = (cell.get("verdict") or {}).get("outcome", "not_judged")
        table.add_row(
            cell["mode"], cell["frontend"], f"[{_STATUS_STYLE.get(status, '')}]{status}[/]",
            f"[{_OWN_STYLE.get(own, '')}]{_OWN_TEXT.get(own, own)}[/]",
            num(record.get("final_loss"), ".7g"), num(distance.get("max_rel_loss_error"), ".1e"),
            num(distance.get("final_weights_rel_error"), ".1e"), num(loop.get("median"), ".3g"), num(loop.get("cv"), ".1%"),
            num(time_vs_default, ".2f") if time_vs_default or status != "ok" else "[yellow]noisy[/]",
            num(efficiency.get("tflops"), ".3g"), num(efficiency.get("share_of_peak"), ".0%"),
        )
    console.print(table)
    costs = frontend_costs(result["cells"])
    if costs:
        console.print(
            "per call: " + "; ".join(f"{name} script set-up {c['setup_seconds'] * 1e3:.2f} ms (its own cost), harness bridge "
                                     f"{c['bridge_seconds'] * 1e3:.2f} ms" for name, c in costs.items()),
            style="dim", soft_wrap=True,
        )
    if not result["reference"]["available"]:
        console.print(f"[dim]{result['reference']['reason']}[/]")
    reasons: dict[str, list[str]] = {}
    for cell in result["cells"]:
        if cell["status"] != "ok" and cell["reason"]:
            reasons.setdefault(cell["reason"], []).append(cell["id"])
    for reason, ids in reasons.items():
        who = ids[0] if len(ids) == 1 else f"{len(ids)} cells ({ids[0]}, ...)"
        console.print(f"[yellow]{who}[/]: {reason}", soft_wrap=True)
    for cell in result["cells"]:
        verdict = cell.get("verdict") or {}
        if verdict.get("outcome") == "fail":
            console.print(f"[bold red]{cell['id']} FAIL[/]: {verdict['reason']}", soft_wrap=True)
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
    noisy = [c["id"] for c in result["cells"] if c["status"] == "ok" and not c.get("time_vs_default")]
    if noisy:
        console.print(
            f"[yellow]×default noisy[/] for {len(noisy)} cell(s): the rounds' spread is too wide for a ratio "
            "(the report says why per cell); use --interleave, more --rounds, or --preset bench.", soft_wrap=True,
        )
    for cell in result["cells"]:  # "% peak" is blank there, not a share above 100 %
        note = (cell.get("efficiency") or {}).get("share_note")
        if note:
            console.print(f"[yellow]% peak[/] {cell['id']}: {note}", soft_wrap=True)
    checks = check_figures(result)
    if checks:
        met = sum(c.met for c in checks)
        console.print(f"figures: {met} of {len(checks)} met", style="green" if met == len(checks) else "yellow")
    for check in (c for c in checks if not c.met):
        console.print(f"[bold red]figure missed[/]: {check.figure} ({check.subject}): {check.measured}; target {check.target}; {check.why}",
                      soft_wrap=True)
    for warning in result["warnings"]:
        console.print(f"[bold yellow]warning:[/] {warning}", soft_wrap=True)
