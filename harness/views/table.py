"""The terminal view of a result: one rich table of cells, then reasons and warnings.

Everything the result holds (names, paths, reasons, a libtorch message) is shown as plain text: it goes into rich's markup
only through :func:`escape` and into a table only as :class:`~rich.text.Text`, so a ``[/b]`` in an installation's path
is printed, never parsed (issue 48: it crashed the run's output)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from harness.model.result import CellResult, MatrixResult, Status
from harness.model.timing import for_want_of_spread
from harness.model.verdicts import Outcome, TargetCheck, Verdict
from harness.views.formatting import lift_footnote, num, provenance_lines, status_text
from harness.views.glance import LEGEND, glance
from harness.views.reasons import reasons
from harness.views.timing_sections import bf16_note, frontend_costs

__all__ = ["make_console", "print_result", "print_trace"]

_STATUS_STYLE: dict[str, str] = {Status.OK: "green", Status.SKIPPED: "yellow", Status.UNSUPPORTED: "magenta",
                                 Status.NUMERICAL_FAILURE: "red", Status.ERROR: "bold red"}


#: The columns shown whole whatever the terminal's width.
_WHOLE = ("script · mode", "optimizer", "frontend", "status", "final loss")
_OWN_STYLE: dict[str, str] = {Outcome.PASS: "green", Outcome.FAIL: "bold red", Outcome.EXCUSED: "cyan", Outcome.NOT_JUDGED: "dim"}
_OWN_TEXT: dict[str, str] = {Outcome.PASS: Outcome.PASS, Outcome.FAIL: "FAIL", Outcome.EXCUSED: "fail: R bug", Outcome.NOT_JUDGED: "—"}

_VERDICT_STYLE: dict[str, str] = {Verdict.IDENTICAL: "green", Verdict.WITHIN_TOLERANCE: "green", Verdict.KNOWN_DIFFERENCE: "cyan",
                  Verdict.SKIPPED: "yellow", Verdict.UNSUPPORTED: "magenta", Verdict.DIVERGED: "bold red",
                  Verdict.STALE_KNOWN_DIFFERENCE: "bold red", Verdict.ERROR: "bold red"}


#: Up to this many cells the terminal lists every one (the four-mode matrix of one optimizer is eight); past it, the
#: cells that need a look (not ok, or failing their own check), then the grid of pairs: the report lists them all.
FULL_TABLE_CELLS = 24
#: Likewise for pairs: past this many, the terminal lists the pairs that are not identical; the grid shows them all.
FULL_PAIR_ROWS = 12


def make_console() -> Console:
    """A console as wide as the terminal, or 150 columns (the table has 12) when output goes to a file or pipe (CI logs)."""
    return Console(width=None if Console().is_terminal else 150)


def print_result(result: MatrixResult, console: Console | None = None) -> None:
    """Print the cells of ``result``: status, its own verdict (float64 bound, scaler rule), final loss,
    distance from float64, seconds, time ÷ default; then why any cell failed.

    A cell that did not run is told by its reason, one line per reason (:mod:`harness.views.reasons`), not by a row; the
    table is cut to the console's width by leaving out the columns that matter least (:data:`_COLUMNS`)."""
    console = console or make_console()
    spec = result.spec
    cells = [c for c in result.cells if c.status not in _TOLD_BY_REASON]
    title = f"amp-parity · preset {spec.preset} · {spec.device} · {spec.amp_dtype} · {result.steps} steps"
    excused = result.excused()
    if len(result.cells) > FULL_TABLE_CELLS:
        shown = [c for c in cells if (not c.ok and c.id not in excused) or (c.verdict is not None and c.verdict.failed)]
        passing = sum(1 for c in cells if c.verdict is not None and c.verdict.outcome == Outcome.PASS)
        off = sum(1 for c in cells if c.verdict is not None and c.verdict.outcome == Outcome.EXCUSED)
        crashed = sum(1 for c in cells if not c.ok and c.id in excused)
        ok = sum(1 for c in cells if c.ok)
        not_run = len(result.cells) - len(cells)
        console.print(f"[bold]{escape(title)}[/]: {len(result.cells)} cells, {ok} ran"
                      + (f" ({not_run} did not: why below)" if not_run else "")
                      + f", {passing} pass their own check (float64 bound, scaler rule)"
                      + (f", {off} fail it by a proven R torch bug (excused)" if off else "")
                      + (f", {crashed} stopped by one (excused)" if crashed else "")
                      + (f"; the {len(shown)} that need a look:" if shown else "; the report lists each one"), soft_wrap=True)
        cells = shown
        title = ""
    if cells:
        console.print(_cell_table(cells, title, console))
    note = bf16_note(result.environment.get("bf16_instructions"))
    if note and any(c.timing for c in result.cells):  # beside the speed columns
        console.print(f"[yellow]speed:[/] {escape(note)}", soft_wrap=True)
    for line in provenance_lines(result):
        console.print(line, style="dim", soft_wrap=True, markup=False, highlight=False)
    footnote = lift_footnote(result.cells)
    if footnote:
        console.print(footnote, style="magenta", soft_wrap=True, markup=False)
    costs = frontend_costs(result.cells)
    if costs:
        console.print(
            "per call: " + "; ".join(f"{name} script set-up {setup * 1e3:.2f} ms (its own cost), harness bridge "
                                     f"{bridge * 1e3:.2f} ms" for name, (setup, bridge) in costs.items()),
            style="dim", soft_wrap=True, markup=False,
        )
    if not result.reference.available:
        console.print(result.reference.reason, style="dim", markup=False)
    for reason in reasons(result):
        more = " (the report has the rest)" if reason.detail else ""
        console.print(f"[yellow]{escape(reason.who)} {escape(str(reason.status))}[/]: {escape(reason.headline)}{more}", soft_wrap=True)
    for cell in result.cells:
        if cell.verdict and cell.verdict.failed:
            console.print(f"[bold red]{escape(cell.id)} FAIL[/]: {escape(str(cell.verdict.reason))}", soft_wrap=True)
    _print_pairs(result, console)
    noisy = [c.id for c in result.cells if c.ok and not c.time_vs_default and for_want_of_spread(c.time_vs_default_note)]
    if noisy:
        console.print(
            f"[yellow]×default noisy[/] for {len(noisy)} cell(s): the rounds' spread is too wide for a ratio "
            f"(the report says why per cell); use {_noise_fixes(result)}.", soft_wrap=True,
        )
    for note, ids in _other_notes(result).items():
        who = ids[0] if len(ids) == 1 else f"{len(ids)} cells ({ids[0]}, ...)"
        console.print(f"[yellow]×default[/] {escape(who)}: {escape(note)}", soft_wrap=True)
    for cell in result.cells:  # "% peak" is blank there, not a share above 100 %
        if cell.efficiency and cell.efficiency.share_note:
            console.print(f"[yellow]% peak[/] {escape(cell.id)}: {escape(cell.efficiency.share_note)}", soft_wrap=True)
    checks = result.targets
    if checks:
        met = sum(c.met for c in checks)
        by_machine = sum(c.machine_noise for c in checks)
        machine = f" ({by_machine} missed only by the machine's noise)" if by_machine else ""
        console.print(f"targets: {met} of {len(checks)} met{machine}", style="green" if met == len(checks) else "yellow")
    groups: dict[tuple[str, bool], list[TargetCheck]] = {}
    for check in (c for c in checks if not c.met):  # one line per target missed (the main job missed one on 137 cells)
        groups.setdefault((check.name, check.machine_noise), []).append(check)
    for (name, noise), group in groups.items():
        missed = "[yellow]target missed, the machine's noise[/]" if noise else "[bold red]target missed[/]"
        check = group[0]
        if len(group) == 1:
            console.print(f"{missed}: {escape(f'{name} ({check.subject}): {check.measured}; target {check.target}; {check.why}')}",
                          soft_wrap=True)
        else:
            console.print(f"{missed}: " + escape(f"{name}, on {len(group)} ({check.subject}, ...; the report lists each): the first "
                                                 f"{check.measured}; target {check.target}"), soft_wrap=True)
    for warning in result.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(warning)}", soft_wrap=True)


#: The cell table's columns, most needed first: (name, justify, priority). A terminal too narrow for all of them leaves out
#: those of the highest priority number first (efficiency, then the spread, then the distances); the key columns and
#: the status (priority 0) always stay, whole.
_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("script · mode", "left", 0), ("optimizer", "left", 0), ("frontend", "left", 0), ("status", "left", 0),
    ("own check", "left", 1), ("final loss", "right", 1), ("Δloss f64", "right", 2), ("Δweights f64", "right", 3),
    ("loop s", "right", 2), ("CV", "right", 4), ("floor", "right", 5), ("×default", "right", 3), ("TFLOP/s", "right", 6),
    ("% peak", "right", 6),
)
#: Statuses told by their reason alone (a line per reason), never by a row: nothing of the cell ran.
_TOLD_BY_REASON = (Status.SKIPPED,)


def _cell_table(cells: list[CellResult], title: str, console: Console) -> Table:
    """The table of ``cells``, with as many columns as the console's width holds (by :data:`_COLUMNS`' priority)."""
    rows = [_cell_row(cell) for cell in cells]
    for most in sorted({p for _, _, p in _COLUMNS}, reverse=True):
        kept = [k for k, (_, _, p) in enumerate(_COLUMNS) if p <= most]
        table = Table(title=Text(title) if title else None, header_style="bold")
        for k in kept:
            name, justify, _ = _COLUMNS[k]
            # the key columns and the status never wrap nor shorten: a narrow terminal shortens the numbers instead
            table.add_column(name, justify=justify, no_wrap=name in _WHOLE)  # type: ignore[arg-type]
        for row in rows:
            table.add_row(*(row[k] for k in kept))
        if Measurement.get(console, console.options.update_width(10_000), table).maximum <= console.width or most == 0:
            return table
    return table


def _cell_row(cell: CellResult) -> list[str | Text]:
    record, distance, efficiency = cell.record, cell.reference_distance, cell.efficiency
    loop = cell.timing.loop if cell.timing else None
    floor = cell.timing.floor if cell.timing else None
    own = cell.verdict.outcome if cell.verdict else Outcome.NOT_JUDGED
    return [
        Text(f"{cell.script} · {cell.mode}"), Text(cell.optimizer), Text(cell.frontend),
        Text(status_text(cell), style=_STATUS_STYLE.get(cell.status, "")),
        f"[{_OWN_STYLE.get(own, '')}]{_OWN_TEXT.get(own, own)}[/]",
        num(record and record.final_loss, ".7g"), num(distance and distance.max_rel_loss_error, ".1e"),
        num(distance and distance.final_weights_rel_error, ".1e"), num(loop and loop.median, ".3g"), num(loop and loop.cv, ".1%"),
        num(floor and floor.cv, ".1%"), _vs_default(cell),
        num(efficiency and efficiency.tflops, ".3g"), num(efficiency and efficiency.share_of_peak, ".0%"),
    ]


def _vs_default(cell: CellResult) -> str:
    """The ×default cell: the ratio, ``noisy`` where the rounds' spread denied one, ``—`` where there is nothing to divide by."""
    if cell.time_vs_default or not cell.ok:
        return num(cell.time_vs_default, ".2f")
    return "[yellow]noisy[/]" if for_want_of_spread(cell.time_vs_default_note) else "—"


def _noise_fixes(result: MatrixResult) -> str:
    """What may give noisy cells a ratio, leaving out what the run already used (its interleaving, the bench preset)."""
    fixes = ["--interleave" if not result.protocol.interleave else "", "more --rounds",
             "--preset bench" if result.spec.preset != "bench" else ""]
    kept = [f for f in fixes if f]
    return ", or ".join(kept) if len(kept) < 3 else f"{kept[0]}, {kept[1]}, or {kept[2]}"


def _other_notes(result: MatrixResult) -> dict[str, list[str]]:
    """Why an ``ok`` cell has no ×default for another reason than noise (no default cell ran), cells grouped by note."""
    notes: dict[str, list[str]] = {}
    for cell in result.cells:
        note = cell.time_vs_default_note
        if cell.ok and not cell.time_vs_default and note and not for_want_of_spread(note):
            notes.setdefault(note, []).append(cell.id)
    return notes


def _print_pairs(result: MatrixResult, console: Console) -> None:
    """The stored pair verdicts, those a skipped frontend left uncompared counted on one line."""
    compared = [p for p in result.pairs if p.verdict != Verdict.SKIPPED]
    not_compared = len(result.pairs) - len(compared)
    if not_compared:
        console.print(f"[yellow]parity:[/] {not_compared} pair(s) not compared: a frontend was skipped (reason above)")
    if len({p.optimizer for p in compared}) > 1 or len(compared) > FULL_PAIR_ROWS:
        _print_glance(result, console)
    if len(compared) > FULL_PAIR_ROWS:
        identical = [p for p in compared if p.verdict == Verdict.IDENTICAL]
        compared = [p for p in compared if p.verdict != Verdict.IDENTICAL]
        console.print(f"parity: {len(identical)} pair(s) bitwise identical" + (", the others:" if compared else ""))
    if compared:
        many = len({p.frontends for p in compared}) > 1
        title = f"parity (each frontend vs {result.baseline})" if many else f"parity ({' vs '.join(compared[0].frontends)})"
        pairs = Table(title=Text(title), header_style="bold")
        pairs.add_column("pair")
        if many:
            pairs.add_column("vs")
        pairs.add_column("verdict")
        pairs.add_column("why", overflow="fold")
        for pair in compared:
            first, second = pair.frontends
            vs = ([second if first == result.baseline else f"{first} vs {second}"]) if many else []
            pairs.add_row(Text(pair.pair), *(Text(v) for v in vs), Text(str(pair.verdict), style=_VERDICT_STYLE.get(pair.verdict, "")),
                      Text(pair.cause))
        console.print(pairs)


def _print_glance(result: MatrixResult, console: Console) -> None:
    """Every pair at a glance: optimizer × (script · mode), one symbol per pair (:mod:`harness.views.glance`)."""
    grid = glance(result)
    table = Table(title="parity at a glance (optimizer × script · mode)", header_style="bold", caption=LEGEND)
    table.add_column("optimizer", no_wrap=True)
    for column in grid.columns:
        table.add_column(Text(column.replace(" · ", "\n")), justify="center")
    for optimizer, entries in grid.rows:
        table.add_row(Text(optimizer), *(_style_symbols(e) for e in entries))
    console.print(table)


def _style_symbols(text: str) -> Text:
    styles = {"=": "green", "≈": "green", "K": "cyan", "B": "bold cyan", "k": "cyan", "✗": "bold red", "S": "bold red",
              "E": "bold red", "U": "magenta", "·": "yellow"}
    return Text.assemble(*((ch, styles.get(ch, "")) for ch in text))


def print_trace(result: MatrixResult, console: Console | None = None) -> None:
    """What ``harness trace`` prints: each cell's status in one line, then every pair's whole explanation, trace included."""
    console = console or make_console()
    spec = result.spec
    console.print(f"amp-parity trace · preset {spec.preset} · {spec.device} · {spec.amp_dtype} · {result.steps} steps", style="bold",
                  markup=False)
    for line in provenance_lines(result):
        console.print(line, style="dim", soft_wrap=True, markup=False, highlight=False)
    for cell in result.cells:
        reason = f" — {cell.reason}" if cell.reason and not cell.ok else ""
        console.print(Text.assemble(f"  {cell.id}: ", (status_text(cell), _STATUS_STYLE.get(cell.status, "")), reason), soft_wrap=True)
    footnote = lift_footnote(result.cells)
    if footnote:
        console.print(footnote, style="magenta", soft_wrap=True, markup=False)
    if not result.pairs:
        console.print("no pair to trace: no two frontends ran one script × mode × device (name two or more with --frontend)",
                      style="yellow", soft_wrap=True)
    for pair in result.pairs:
        console.print()
        console.print(pair.summary, style=_VERDICT_STYLE.get(pair.verdict, ""), soft_wrap=True, markup=False)
        for line in pair.explanation[1:]:
            console.print(f"  {line}", soft_wrap=True, markup=False, highlight=False)
    for warning in result.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(warning)}", soft_wrap=True)
