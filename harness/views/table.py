"""The terminal view of a result: one rich table of cells, then reasons and warnings.

Everything the result holds (names, paths, reasons, a libtorch message) is shown as plain text: it goes into rich's markup
only through :func:`escape` and into a table only as :class:`~rich.text.Text`, so a ``[/b]`` in an installation's path
is printed, never parsed (issue 48: it crashed the run's output).

Past :data:`FULL_TABLE_CELLS` cells it is for people: the main job printed 1,398 lines where 6 cells needed a look (a grid
of 137 rows, a table of 236 proven known differences, a line per note that holds by design). By default it prints the
verdict counts, the cells and pairs that need a look, the grid with each loop feature folded into one row, one line per
reason a cell did not run (the proven R torch bugs' in one), and one line for what holds by design; ``-v`` (``verbose``)
prints every row and note. The report has everything either way.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from harness.model.result import SIDE_BY_SIDE_NOTE, CellResult, MatrixResult, Status
from harness.model.timing import for_want_of_spread
from harness.model.verdicts import Outcome, TargetCheck, Verdict
from harness.views.formatting import lift_footnote, num, provenance_lines, status_text
from harness.views.glance import glance, legend_of, proven_known, row_key
from harness.views.reasons import Reason, reasons
from harness.views.timing_sections import bf16_note, frontend_costs

__all__ = ["FULL_PAIR_ROWS", "FULL_TABLE_CELLS", "QUIET_GLANCE_MAX_ROWS", "RUN_MAX_LINES", "make_console", "print_result", "print_trace"]

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
#: What ``run`` prints by default where no cell needs a look, its own lines included (issue 47: the main job printed 1,398):
#: the verdict counts, the grid with each loop feature folded, a line per reason and one for what holds by design, where
#: the result and the page are. ``tests/unit/views/test_quiet_terminal.py`` holds it on a result of the main job's shape.
RUN_MAX_LINES = 60
#: The most rows the quiet grid shows with each loop feature and each model one row: :data:`RUN_MAX_LINES` less the 17
#: lines the main job prints around it where no cell needs a look (6 above it, its header, borders and legend 6, 5 below
#: it), the main job's 17 optimizers, 23 loop features and 3 models. Past it, every loop feature's pairs are one row and
#: every model's one (:data:`harness.views.glance.FOLDED_KINDS`), so a row added to the matrix never pushes the terminal
#: past its budget; ``-v`` and the report keep every row.
QUIET_GLANCE_MAX_ROWS = 43


def make_console() -> Console:
    """A console as wide as the terminal, or 150 columns (the table has 12) when output goes to a file or pipe (CI logs)."""
    return Console(width=None if Console().is_terminal else 150)


def print_result(result: MatrixResult, console: Console | None = None, verbose: bool = False) -> None:
    """Print the cells of ``result``: status, its own verdict (float64 bound, scaler rule), final loss,
    distance from float64, seconds, time ÷ default; then why any cell failed.

    A cell that did not run is told by its reason, one line per reason (:mod:`harness.views.reasons`), not by a row; the
    table is cut to the console's width by leaving out the columns that matter least (:data:`_COLUMNS`). Past
    :data:`FULL_TABLE_CELLS` cells, what holds by design is counted, not listed, unless ``verbose``."""
    console = console or make_console()
    spec = result.spec
    cells = [c for c in result.cells if c.status not in _TOLD_BY_REASON]
    title = f"amp-parity · preset {spec.preset} · {spec.device} · {spec.amp_dtype} · {result.steps} steps"
    excused = result.excused()
    large = len(result.cells) > FULL_TABLE_CELLS
    if large:
        # a row is a cell that ran and needs a look; one that did not run (unsupported, or stopped before a record) is
        # its reason's line: a row of it says nothing more (a worker that cannot start made 340 such rows)
        shown = [c for c in cells if (c.record is not None and not c.ok and c.id not in excused)
                 or (c.verdict is not None and c.verdict.failed)]
        passing = sum(1 for c in cells if c.verdict is not None and c.verdict.outcome == Outcome.PASS)
        off = sum(1 for c in cells if c.verdict is not None and c.verdict.outcome == Outcome.EXCUSED)
        crashed = sum(1 for c in cells if not c.ok and c.id in excused)
        failed = sum(1 for c in cells if c.status in (Status.ERROR, Status.NUMERICAL_FAILURE) and c.id not in excused)
        ok = sum(1 for c in cells if c.ok)
        not_run = len(result.cells) - ok - crashed - failed
        console.print(f"[bold]{escape(title)}[/]: {len(result.cells)} cells, {ok} ran"
                      + (f" ({not_run} did not: why below)" if not_run else "")
                      + f", {passing} pass their own check (float64 bound, scaler rule)"
                      + (f", {off} fail it by a proven R torch bug (excused)" if off else "")
                      + (f", {crashed} stopped by one (excused)" if crashed else "")
                      + (f", {failed} failed (why below)" if failed else "")
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
    if costs and (verbose or not large):
        console.print(
            "per call: " + "; ".join(f"{name} script set-up {setup * 1e3:.2f} ms (its own cost), harness bridge "
                                     f"{bridge * 1e3:.2f} ms" for name, (setup, bridge) in costs.items()),
            style="dim", soft_wrap=True, markup=False,
        )
    if not result.reference.available:
        console.print(result.reference.reason, style="dim", markup=False)
    _print_reasons(reasons(result), console, fold=large and not verbose)
    for cell in result.cells:
        if cell.verdict and cell.verdict.failed:
            console.print(f"[bold red]{escape(cell.id)} FAIL[/]: {escape(str(cell.verdict.reason))}", soft_wrap=True)
    _print_pairs(result, console, quiet=large and not verbose)
    noisy = [c.id for c in result.cells if c.ok and not c.time_vs_default and for_want_of_spread(c.time_vs_default_note)]
    if noisy:
        console.print(
            f"[yellow]×default noisy[/] for {len(noisy)} cell(s): the rounds' spread is too wide for a ratio "
            f"(the report says why per cell); use {_noise_fixes(result)}.", soft_wrap=True,
        )
    _print_other_notes(result, console, one_line=large and not verbose)
    for cell in result.cells:  # "% peak" is blank there, not a share above 100 %
        if cell.efficiency and cell.efficiency.share_note:
            console.print(f"[yellow]% peak[/] {escape(cell.id)}: {escape(cell.efficiency.share_note)}", soft_wrap=True)
    _print_targets(result.targets, console, one_line=large and not verbose)
    for warning in result.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(warning)}", soft_wrap=True)


def _print_reasons(found: list[Reason], console: Console, fold: bool) -> None:
    """A line per reason a cell did not run; ``fold``: the crashes proven R torch bugs explain, and what a matrix cannot run
    by design (a binding's missing API, a model a feature cannot act on), each kind one line with its reasons counted (by
    bug; by the reason's first clause): -v and the report give each reason in full, with its error or its fix."""
    kinds: tuple[tuple[Callable[[Reason], bool], str, Callable[[Reason], str], str, str], ...] = (
        (lambda r: bool(r.bugs), "stopped by a proven R torch bug (excused)", lambda r: r.bugs, ", ", "each one's error"),
        (lambda r: set(r.statuses) == {Status.UNSUPPORTED}, str(Status.UNSUPPORTED), lambda r: r.headline.partition(": ")[0], "; ",
         "each one's reason and fix"))
    folded: list[Reason] = []
    for belongs, what, label, separator, where in kinds if fold else ():
        group = [r for r in found if belongs(r)]
        if len(group) > 1:
            counts = separator.join(f"{label(r)} {len(r.cells)}" for r in group)
            console.print(f"[yellow]{sum(len(r.cells) for r in group)} cells {what}[/]: {escape(counts)} (-v or the report: {where})",
                          soft_wrap=True)
            folded += group
    for reason in found:
        if reason in folded:
            continue
        more = " (the report has the rest)" if reason.detail else ""
        console.print(f"[yellow]{escape(reason.who)} {escape(str(reason.status))}[/]: {escape(reason.headline)}{more}", soft_wrap=True)


def _print_targets(checks: tuple[TargetCheck, ...], console: Console, one_line: bool) -> None:
    """How many targets were met; each one missed in a line (``one_line``: counted in the same line)."""
    if not checks:
        return
    met = sum(c.met for c in checks)
    by_machine = sum(c.machine_noise for c in checks)
    machine = f" ({by_machine} missed only by the machine's noise)" if by_machine else ""
    groups: dict[tuple[str, bool], list[TargetCheck]] = {}
    for check in (c for c in checks if not c.met):  # one line per target missed (the main job missed one on 137 cells)
        groups.setdefault((check.name, check.machine_noise), []).append(check)
    if one_line and groups:
        missed = "; ".join(f"{name}{' (the machine’s noise)' if noise else ''} on {len(group)}" for (name, noise), group in groups.items())
        console.print(f"[yellow]targets: {met} of {len(checks)} met{machine}[/]; missed: {escape(missed)} (-v or the report: each one)",
                      soft_wrap=True)
        return
    console.print(f"targets: {met} of {len(checks)} met{machine}", style="green" if met == len(checks) else "yellow")
    for (name, noise), group in groups.items():
        missed_text = "[yellow]target missed, the machine's noise[/]" if noise else "[bold red]target missed[/]"
        check = group[0]
        if len(group) == 1:
            console.print(f"{missed_text}: {escape(f'{name} ({check.subject}): {check.measured}; target {check.target}; {check.why}')}",
                          soft_wrap=True)
        else:
            console.print(f"{missed_text}: " + escape(f"{name}, on {len(group)} ({check.subject}, ...; the report lists each): the first "
                                                      f"{check.measured}; target {check.target}"), soft_wrap=True)


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
        Text(f"{cell.script} · {cell.mode}"), Text(row_key(cell)), Text(cell.frontend),
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


def _print_other_notes(result: MatrixResult, console: Console, one_line: bool) -> None:
    """Each note on why a cell has no ×default by design, with its cells; ``one_line``: all of them counted in one line (the
    main job printed 20: a loop feature's covering design leaves out its default cell, and ``tiny`` times one round)."""
    notes = _other_notes(result)
    if not one_line:
        for note, ids in notes.items():
            who = ids[0] if len(ids) == 1 else f"{len(ids)} cells ({ids[0]}, ...)"
            console.print(f"[yellow]×default[/] {escape(who)}: {escape(note)}", soft_wrap=True)
        return
    if not notes:
        return
    side_by_side = len(notes.get(SIDE_BY_SIDE_NOTE, ()))
    others = sum(len(ids) for note, ids in notes.items() if note != SIDE_BY_SIDE_NOTE)
    own = "one untraced run each: a round side by side, or its reconciled run"
    parts = [*([f"{side_by_side} not timed for a ratio ({own})"] if side_by_side else []),
             *([f"{others} without a default cell to divide by (no default cell of their script, optimizer and loop feature ran)"]
               if others else [])]
    console.print(f"×default: none, by design, for {'; '.join(parts)} (-v or the report: each cell)", style="dim", soft_wrap=True,
                  markup=False)


def _print_pairs(result: MatrixResult, console: Console, quiet: bool = False) -> None:
    """The stored pair verdicts, those a skipped frontend left uncompared counted on one line. ``quiet``: the grid with each
    loop feature folded into a row, and the pairs that are identical, a proven known difference or unsupported counted,
    not listed (the page and the report list them)."""
    compared = [p for p in result.pairs if p.verdict != Verdict.SKIPPED]
    not_compared = len(result.pairs) - len(compared)
    if not_compared:
        console.print(f"[yellow]parity:[/] {not_compared} pair(s) not compared: a frontend was skipped (reason above)")
    if len({p.optimizer for p in compared}) > 1 or len(compared) > FULL_PAIR_ROWS:
        _print_glance(result, console, folded=quiet)
    if quiet:
        told = [p for p in compared if p.verdict in (Verdict.IDENTICAL, Verdict.UNSUPPORTED) or proven_known(p)]
        counts = {"bitwise identical": sum(p.verdict == Verdict.IDENTICAL for p in told),
                  "a proven known difference or R torch bug": sum(proven_known(p) for p in told),
                  "unsupported (why above)": sum(p.verdict == Verdict.UNSUPPORTED for p in told)}
        compared = [p for p in compared if p not in told]
        if told:
            console.print("parity: " + ", ".join(f"{n} {what}" for what, n in counts.items() if n)
                          + ("; the others:" if compared else ""), soft_wrap=True, markup=False)
    elif len(compared) > FULL_PAIR_ROWS:
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


def _print_glance(result: MatrixResult, console: Console, folded: bool = False) -> None:
    """Every pair at a glance: optimizer × (script · mode), one symbol per pair (:mod:`harness.views.glance`); ``folded``:
    each loop feature's rows one row, its entries counted (past :data:`QUIET_GLANCE_MAX_ROWS` rows, every loop feature's one
    row and every model's one)."""
    grid = glance(result, folded=folded)
    by_kind = folded and len(grid.rows) > QUIET_GLANCE_MAX_ROWS
    if by_kind:
        grid = glance(result, folded=True, by_kind=True)
    kinds = {k[0] for k, _ in grid.rows if k[:1] in "+@"} if folded else set()
    folds = ({"+": ("+loop features", "every loop feature's"), "@": ("@models", "every model's")} if by_kind else
             {"+": ("+feature", "a loop feature's"), "@": ("@model", "a model's")})
    named = [folds[k] for k in "+@" if k in kinds]  # one clause for both, so the legend stays one line under the grid
    caption = legend_of(grid) + (f"; {', '.join(n for n, _ in named)}: {', '.join(w for _, w in named)} pairs, counted"
                                 if named else "")
    table = Table(title=None if folded else "parity at a glance (optimizer × script · mode)", header_style="bold",
                  caption=Text(caption))
    table.add_column("parity at a glance" if folded else "optimizer", no_wrap=True)
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
