"""The report of a judged result, in one folder: ``report.html`` (the page a maintainer opens: :mod:`harness.views.page`),
``summary.md`` (for a CI job summary: :mod:`harness.views.summary`), ``report.md`` (the parity tracker) and its PNG plots.

The markdown says, for every cell, how it ended and how it stands on its own (its float64 bound and,
for a scaler cell, GradScaler's rule: :mod:`harness.judge.cells`), for every pair, the verdict and why; then the
speedups (as the seeds report them: seconds per mode and AMP ÷ default), peak memory, versions and
threads, warnings and the float64 reference's status. It is written for a result with R skipped (it
says so, and why) as much as for one with both frontends. Every file is written atomically.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from harness.contract.modes import all_mode_names
from harness.errors import ResultError
from harness.files.atomic import atomic_path
from harness.model.provenance import Provenance, script_differences
from harness.model.record import RunRecord
from harness.model.result import CellResult, MatrixResult, Status
from harness.model.timing import ratio
from harness.model.verdicts import CELL_OUTCOMES, Outcome, PairVerdict, Verdict
from harness.views.formatting import cell_text, frontend_order, lift_footnote, num, provenance_lines, status_text
from harness.views.glance import LEGEND, glance, proven_known
from harness.views.page import PAGE_FIGURES, PAGE_FILE, EntryText, entry_ids, first_difference, render_page
from harness.views.plots import figure_png
from harness.views.summary import SUMMARY_FILE, render_summary
from harness.views.timing_sections import efficiency_section, phases_section, targets_section, timing_section

__all__ = ["PLOT_FILES", "REPORT_FILE", "REPORT_FILES", "REPORT_MAX_BYTES", "REPORT_MAX_SECONDS", "render_markdown", "write_report"]

REPORT_FILE = "report.md"
#: ``report.md`` of the main job stays below this (issue 47: it was 2.1 MB, a whole explanation per pair): every cell and
#: pair is a row, and what repeats (a known difference's text, a target's) is said once. A test holds it on a result of
#: the main job's shape (``tests/unit/views/test_report_sizes.py``).
REPORT_MAX_BYTES = 1_000_000
#: The seconds writing the main job's report may take (issue 47: 36 s): ``tests/benchmarks/test_report.py`` measures it.
REPORT_MAX_SECONDS = 5.0
#: How the summary names each judging policy (harness/judge/tolerances.py).
_JUDGING_TEXT = {
    "strict": "`strict`: a pair expected bitwise identical (one libtorch, CPU) that is not is diverged",
    "tolerance_only": "`tolerance_only` (--tolerance-only): every pair by the tolerance, bitwise identity only noted",
}
#: The PNG plots, in the order the report shows them, with the page's figure each is (drawn once, saved as both).
PLOT_FILES = {"losses.png": "losses", "loss_diff.png": "loss_diff", "timing.png": "timing"}
#: Every file a report is: the document first (what a report folder's claim guards: :class:`harness.store.report_claim.ReportClaim`).
REPORT_FILES = (REPORT_FILE, PAGE_FILE, SUMMARY_FILE, *PLOT_FILES)


def write_report(result: MatrixResult, out_dir: Path, entries: Mapping[str, EntryText] | None = None,
                 page_dir: Path | None = None) -> list[Path]:
    """Write ``report.md``, ``report.html``, ``summary.md`` and the plots of a judged ``result`` into ``out_dir`` (created if
    absent); return their paths, the markdown report first. ``entries`` gives each known difference's text; ``page_dir`` is
    where the page will be opened, if not ``out_dir`` (a claim's staging folder inside it): the page's links to the bugs'
    folders are relative to it.

    Each plot is drawn once, as PNG: the file, and the page's picture. The main job's report took 36 s and 21 MB when
    every plot was drawn twice (PNG and SVG) in one panel per optimizer × mode (:mod:`harness.views.plots`).

    Raises:
        ResultError: ``out_dir`` cannot be created or written.
    """
    out_dir = Path(out_dir)
    # before any file: a result it cannot render leaves nothing behind
    images = {name: figure_png(build(result)) for name, build in PAGE_FIGURES.items()}
    texts = {
        REPORT_FILE: render_markdown(result, entries),
        PAGE_FILE: render_page(result, entries, images, page_dir or out_dir),
        SUMMARY_FILE: render_summary(result, PAGE_FILE, REPORT_FILE, tuple(PLOT_FILES)),
    }
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for name, figure in PLOT_FILES.items():
            with atomic_path(out_dir / name) as tmp:
                tmp.write_bytes(images[figure])
            written.append(out_dir / name)
        for name, text in texts.items():
            with atomic_path(out_dir / name) as tmp:
                tmp.write_text(text, encoding="utf-8")
    except OSError as err:
        raise ResultError(
            f"cannot write the report to {out_dir}: {err.strerror or err}. Choose a writable folder (--out)."
        ) from err
    return [*(out_dir / name for name in texts), *written]


def render_markdown(result: MatrixResult, entries: Mapping[str, EntryText] | None = None) -> str:
    """The report of a judged result as markdown text."""
    verdicts = list(result.pairs)
    spec = result.spec
    devices = sorted({c.device for c in result.cells}) or [spec.device]
    out = [
        "# amp-parity report", "",
        f"Preset **{spec.preset}** on **{', '.join(devices)}**, AMP dtype **{spec.amp_dtype}**, {result.steps} steps "
        f"(batch {spec.batch_size}, {spec.in_size}→{spec.out_size}, {spec.num_layers} layers, lr {spec.lr:g}, "
        f"seed {spec.seed}, threads {spec.threads}). Created {result.created}; spec digest "
        f"`{result.spec_digest}`, fixture `{result.fixture.get('digest')}`; "
        f"matrix wall time {num(result.wall_seconds, '.1f')} s.", "",
        *[f"{line[0].upper()}{line[1:]}." for line in provenance_lines(result)], "",
    ]
    out += _summary(result, verdicts)
    out += _glance(result)
    out += _sources(result)
    out += _warnings(result)
    out += _cells_table(result)
    out += _pairs_table(result, verdicts)
    out += _speed(result)
    out += timing_section(result)
    out += efficiency_section(result)
    out += targets_section(result)
    out += phases_section(result)
    out += _versions(result)
    out += _provenance(result)
    out += ["## Plots", "", f"The page `{PAGE_FILE}` draws them too, and links each pair from its grid; `{SUMMARY_FILE}` is this "
            "report cut to what a CI job summary holds.", ""] + [f"![{name}]({name})" for name in PLOT_FILES] + [""]
    out += _cell_details(result)
    out += _pair_details(verdicts)
    out += _known_details(verdicts, entries or {})
    return "\n".join(out)


def _summary(result: MatrixResult, verdicts: list[PairVerdict]) -> list[str]:
    cells = result.cells
    statuses = Counter(str(c.status) for c in cells)
    counts = Counter(v.verdict for v in verdicts)
    lines = [
        "## Summary", "",
        f"- Cells: {len(cells)} ({', '.join(f'{n} {s}' for s, n in statuses.items())}).",
        f"- Pairs: {len(verdicts)} ({', '.join(f'{n} {v}' for v, n in counts.items()) or 'none: one frontend only'}).",
        f"- Judged {_JUDGING_TEXT.get(result.judging, f'`{result.judging}`')}.",
    ]
    alone = Counter(_own(c) for c in cells)
    lines.append(
        "- Cells on their own (float64 bound; scaler cells: GradScaler's rule): "
        + ", ".join(f"{alone[o]} {o.replace('_', ' ')}" for o in CELL_OUTCOMES if alone[o]) + "."
    )
    lines += [f"- **`{c.id}` fails on its own**: {cell_text(c.verdict.reason)}" for c in cells if c.verdict and c.verdict.failed]
    for frontend in sorted({c.frontend for c in cells}):
        own = [c for c in cells if c.frontend == frontend]
        if all(c.status == Status.SKIPPED for c in own):
            lines.append(f"- **{frontend} was not run** (every {frontend} cell skipped): {cell_text(own[0].reason)}")
    reference = result.reference
    if reference.available:
        optimizers = sorted({str(t["optimizer"]) for t in reference.trajectories})
        lines.append(f"- float64 reference: computed for {len(optimizers)} optimizer(s), plain and clipped "
                     f"({len(reference.trajectories)} trajectories, {result.steps} steps each).")
    else:
        lines.append(f"- float64 reference: not computed — {cell_text(reference.reason)}.")
    return [*lines, ""]


def _glance(result: MatrixResult) -> list[str]:
    """The pairs at a glance: optimizer × script · mode, one verdict symbol per pair (:mod:`harness.views.glance`)."""
    grid = glance(result)
    if not grid.rows or not any(any(row) for _, row in grid.rows):
        return []
    lines = ["## At a glance", "", "| optimizer | " + " | ".join(grid.columns) + " |", "|---|" + ":---:|" * len(grid.columns)]
    lines += [f"| {optimizer} | " + " | ".join(entry or " " for entry in row) + " |" for optimizer, row in grid.rows]
    return [*lines, "", LEGEND + ".", ""]


def _warnings(result: MatrixResult) -> list[str]:
    return ["## Warnings", "", *([f"- {cell_text(w)}" for w in result.warnings] or ["None."]), ""]


def _cells_table(result: MatrixResult) -> list[str]:
    lines = [
        "## Parity tracker", "", "### Cells", "",
        "| cell | status | on its own | final loss | Δloss vs f64 | Δweights vs f64 | skipped steps | reason |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for cell in result.cells:
        record, distance = cell.record, cell.reference_distance
        lines.append(
            f"| `{cell.id}` | {status_text(cell)} | {_OWN_TEXT[_own(cell)]} | {num(record and record.final_loss, '.7g')} | "
            f"{num(distance and distance.max_rel_loss_error, '.2e')} | {num(distance and distance.final_weights_rel_error, '.2e')} | "
            f"{num(record and record.skipped_steps, 'd')} | {cell_text(cell.reason)} |"
        )
    footnote = lift_footnote(result.cells)
    return [
        *lines, "", *([cell_text(footnote), ""] if footnote else []),
        "Δ vs f64: max relative loss error over steps; relative L2 error of all final weights. On its own: the cell against "
        "its float64 bound (the reference replays the steps the run skipped) and, in scaler modes, its scale history against "
        "GradScaler's rule; a **FAIL** fails the run (details below).", "",
    ]


#: How a cell's own verdict reads in the tracker.
_OWN_TEXT: dict[str, str] = {Outcome.PASS: Outcome.PASS, Outcome.FAIL: "**FAIL**", Outcome.EXCUSED: "fail: R torch bug (excused)",
                             Outcome.NOT_JUDGED: "—"}


def _own(cell: CellResult) -> str:
    return cell.verdict.outcome if cell.verdict else Outcome.NOT_JUDGED


def _cell_details(result: MatrixResult) -> list[str]:
    """Why each cell that does not pass its own check stands as it does (a cell that passes: its row in the tracker)."""
    lines = []
    for cell in result.cells:
        if cell.verdict and cell.verdict.outcome not in (Outcome.NOT_JUDGED, Outcome.PASS):
            verdict = cell.verdict
            lines += [f"### {cell.id}: {verdict.outcome}", "", "```text", *(line.strip() for line in verdict.lines()[1:]), "```", ""]
    return ["## Cell details", "", "Each cell that does not pass its own check (those that pass are rows of the tracker above).", "",
            *lines] if lines else []


def _pairs_table(result: MatrixResult, verdicts: list[PairVerdict]) -> list[str]:
    lines = ["### Pairs", ""]
    alone = unpaired_cells(result)
    if not verdicts and not alone:
        return [*lines, "No pairs: only one frontend was asked for.", ""]
    if verdicts:
        lines += [f"Every frontend is paired with the baseline, **{result.baseline}**, on each script × mode × device; one on "
                  "another libtorch build than the baseline's is also paired with the first frontend that loads its build.", "",
                  "| pair | frontends | verdict | why |", "|---|---|---|---|"]
    for v in verdicts:
        lines.append(f"| `{v.pair}` | {' vs '.join(v.frontends)} | **{v.verdict}** | {cell_text(v.cause)} |")
    if alone:
        lines += ["", "Not judged (no pair):", ""] + [f"- `{cell.id}`: {why}" for cell, why in alone]
    return [*lines, ""]


def unpaired_cells(result: MatrixResult) -> list[tuple[CellResult, str]]:
    """Cells alone on their script × mode × device (a merged result's, a one-frontend run's), each with why none judged it."""
    by_pair: dict[str, list[CellResult]] = {}
    for cell in result.cells:
        by_pair.setdefault(cell.pair, []).append(cell)
    if len(frontend_order(result)) < 2:
        return []
    return [(cells[0], f"no other frontend ran {cells[0].script} {cells[0].mode} on {cells[0].device} in this result")
            for cells in by_pair.values() if len(cells) == 1]


def _speed(result: MatrixResult) -> list[str]:
    cells = {(c.device, c.mode, c.frontend): c for c in result.cells}
    frontends = frontend_order(result)
    base = frontends[0] if frontends else result.baseline
    others = frontends[1:]
    devices = sorted({c.device for c in result.cells})
    rows = [(d, m) for d in devices for m in all_mode_names() if any(c.mode == m and c.device == d for c in result.cells)]
    label = "mode" if len(devices) < 2 else "device · mode"
    head = (f"| {label} | " + " | ".join(f"{f} loop s (median) | {f} ÷ default" for f in frontends)
            + "".join(f" | {f} ÷ {base}" for f in others) + " |")
    lines = ["## Speed", "", head, "|---|" + "---:|" * (2 * len(frontends) + len(others))]
    notes: list[str] = []
    for device, mode in rows:
        row = [mode if len(devices) < 2 else f"{device} · {mode}"]
        for f in frontends:
            cell = cells.get((device, mode, f))
            if cell is None:
                row += ["—", "—"]
                continue
            seconds = cell.timing.loop.median if cell.timing else None
            shown = num(seconds, ".4g") if cell.ok else str(cell.status)
            row += [shown, _ratio_text(cell.time_vs_default, cell.time_vs_default_note, notes)]
        baseline = cells.get((device, mode, base))
        for f in others:
            other = cells.get((device, mode, f))
            if baseline and other and baseline.ok and other.ok:
                row.append(_ratio_text(*ratio(other.timing, baseline.timing, result.protocol.interleave), notes))
            else:
                row.append("—")
        lines.append("| " + " | ".join(row) + " |")
    return [
        *lines, "", *[f"{k}. {note}" for k, note in enumerate(notes, 1)], *([""] if notes else []),
        "Loop: the script's own clock around its training loop, median of the timed rounds. ÷ default: this mode's loop "
        f"time over the same frontend's `default` (below 1: AMP is faster); ÷ {base}: above 1, that frontend is slower than "
        f"the baseline. A ratio is printed only where both sides' spread supports it; otherwise a numbered note says why. "
        "Cells of a merged result ran on other machines: compare their times only where the installations table says one host.",
        "",
    ]


def _ratio_text(value: float | None, note: str | None, notes: list[str]) -> str:
    """A ratio, or a reference to the note that says why there is none."""
    if value is not None:
        return f"{value:.2f}"
    if note is None or note.startswith("cell "):
        return "—"
    if note not in notes:
        notes.append(note)
    return f"no ratio ({notes.index(note) + 1})"


def _versions(result: MatrixResult) -> list[str]:
    lines = ["## Installations, versions and threads", "",
             "| frontend | installation | torch | libtorch (build) | language | threads | device | host |",
             "|---|---|---|---|---|---:|---|---|"]
    seen: dict[tuple[str, str], CellResult] = {}
    for cell in result.cells:
        if cell.record and (cell.frontend, cell.device) not in seen:
            seen[(cell.frontend, cell.device)] = cell
    for (frontend, _device), cell in sorted(seen.items(), key=lambda kv: _order_key(result, kv[0])):
        record: RunRecord = cell.record  # type: ignore[assignment]  # only cells with a record were kept
        facts = cell.installation or {}
        where = facts.get("python") or facts.get("activate") or facts.get("r_libs") or "this harness's own"
        build = str(facts.get("libtorch_build") or "")[:12]
        # What its worker measured a backward pass to run on (harness/worker_side/thread_probe.py; docs/determinism.md).
        backward = facts.get("backward_threads")
        threads = f"{record.threads}" + ("" if backward is None else f" (backward {', '.join(map(str, backward)) or '?'})")
        lines.append(
            f"| {frontend} | {facts.get('language', cell.language)}: `{where}` | {record.torch_version} | {record.libtorch_version}"
            f"{f' ({build})' if build else ''} | {record.language_version} | {threads} | {record.device_name} | "
            f"{facts.get('host', '—')}: {facts.get('cpu', '—')} |"
        )
    env = result.environment
    r_env = env.get("r") or {}
    lines += [
        "", f"Threads asked for: {result.spec.threads}. Harness: Python {env.get('python_version')}, torch "
        f"{env.get('torch_version')}, {env.get('platform')}. R: {r_env.get('r_version') or 'not found'}, R torch "
        f"{r_env.get('torch_version') or 'not installed'}.",
    ]
    missing = [f for f in ("python", "r") if env.get(f"{f}_unavailable")]
    lines += [f"{f} unavailable here: {cell_text(env[f'{f}_unavailable'])}." for f in missing]
    return [*lines, ""]


def _provenance(result: MatrixResult) -> list[str]:
    """Every file that ran with its SHA-256 (its first 16 hex digits), so two reports tell which script changed."""
    named = [(str(s.get("file")), Provenance.from_json(s["provenance"]) if isinstance(s.get("provenance"), dict)
              else Provenance.unknown()) for s in result.sources] or [("", result.provenance)]
    lines = ["## Provenance", ""]
    for name, provenance in named:
        lines += [f"{f'`{name}`: ' if name else ''}{provenance.describe()}"
                  + (f"; scripts from `{provenance.scripts_root}`" if provenance.scripts_root else "") + ".", ""]
        if provenance.files:
            lines += ["| file | sha256 |", "|---|---|", *[f"| `{f}` | `{d[:16]}` |" for f, d in sorted(provenance.files.items())], ""]
    differing = script_differences(named) if len(named) > 1 else []
    return lines + [f"- **{line}**" for line in differing] + ([""] if differing else [])


def _pair_details(verdicts: list[PairVerdict]) -> list[str]:
    """Each pair that needs a look, with its whole explanation. An identical pair is its row of the table above; a proven
    known difference is told under its entry (:func:`_known_details`): the main job's 340 explanations were 1.1 MB."""
    lines = []
    for v in verdicts:
        if v.verdict not in (Verdict.IDENTICAL, Verdict.SKIPPED, Verdict.UNSUPPORTED) and not proven_known(v):
            lines += [f"### {v.pair} ({' vs '.join(v.frontends)}): {v.verdict}", "", "```text", v.explain(), "```", ""]
    return ["## Pairs that need a look", "", *(lines or ["None.", ""])] if verdicts else []


def _known_details(verdicts: list[PairVerdict], entries: Mapping[str, EntryText]) -> list[str]:
    """The proven known differences by the entries that explain them: each entry's text once, then each pair and where it
    first parts (its verdict and why are its row of the pairs table)."""
    groups: dict[tuple[str, ...], list[PairVerdict]] = {}
    for v in verdicts:
        if v.verdict not in (Verdict.SKIPPED, Verdict.UNSUPPORTED) and proven_known(v):
            groups.setdefault(entry_ids(v), []).append(v)
    if not groups:
        return []
    lines = ["## Known differences and R torch bugs, proven", "",
             "Each pair below parts where its entries say, and is bitwise identical for the whole run once their switches remove "
             "their mechanisms (docs/known-differences.md).", ""]
    told: set[str] = set()
    for ids, members in groups.items():
        lines += [f"### {' + '.join(ids)} ({len(members)} pair{'' if len(members) == 1 else 's'})", ""]
        for entry_id in ids:
            entry = entries.get(entry_id)
            if entry is None or entry_id in told:
                continue
            told.add(entry_id)
            kind = "R torch bug" if entry.kind == "bug" else "known difference"
            folder = f" Its report and reproducers: `docs/bugs/{entry_id}/`." if entry.kind == "bug" else ""
            lines += [f"**{kind} {entry_id}**: {cell_text(entry.title)}. {cell_text(entry.mechanism)} Upstream: "
                      f"{cell_text(entry.upstream)}.{folder}", ""]
        lines += ["| pair | frontends | first differs | distance |", "|---|---|---|---:|"]
        for v in members:
            point = first_difference(v)
            where = f"step {point.step}, `{point.point}`" if point is not None else "—"
            distance = f"{point.max_distance} ULP" if point is not None and point.max_distance is not None else "—"
            lines.append(f"| `{v.pair}` | {' vs '.join(v.frontends)} | {where} | {distance} |")
        lines.append("")
    return lines


def _sources(result: MatrixResult) -> list[str]:
    """What a merged result was made of: each input, where it ran and which cells it gave."""
    if not result.sources:
        return []
    lines = ["## Merged from", "", "| result | created | host | cells |", "|---|---|---|---:|"]
    for source in result.sources:
        lines.append(f"| `{source.get('file')}` | {source.get('created')} | {source.get('host')} | {len(source.get('cells') or ())} |")
    return [*lines, ""]


def _order_key(result: MatrixResult, key: tuple[str, str]) -> tuple[int, str]:
    order = frontend_order(result)
    return (order.index(key[0]) if key[0] in order else len(order), key[1])
