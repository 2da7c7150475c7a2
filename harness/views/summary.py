"""The report's markdown summary (``summary.md``), sized for a CI job summary (``$GITHUB_STEP_SUMMARY``).

``report.md`` lists every cell and pair of the matrix: 758 KB for the main job, past what a job summary holds (GitHub
refuses a step's summary over 1 MiB, and one that long is not read). The summary holds what a reviewer acts on: the
grid, why cells did not run, the pairs that are not identical (one row per known-difference entry for those it explains),
the targets missed (one row per target), and where the whole report is. It is
kept under :data:`SUMMARY_MAX_BYTES` whatever the matrix: past it, the longest list is cut and says how many it left
to the page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.model.result import MatrixResult
from harness.model.verdicts import PairVerdict, TargetCheck, Verdict
from harness.views.formatting import cell_text
from harness.views.glance import LEGEND, glance
from harness.views.reasons import reasons

__all__ = ["SUMMARY_FILE", "SUMMARY_MAX_BYTES", "render_summary"]

SUMMARY_FILE = "summary.md"
#: The summary's size at most, in UTF-8 bytes: the issue's budget (50 KB), so a job summary holds several runs' summaries.
SUMMARY_MAX_BYTES = 50_000
#: Pairs the summary counts but does not list: identical, or a side did not run (its reason is listed once, above).
_QUIET = (Verdict.IDENTICAL, Verdict.SKIPPED, Verdict.UNSUPPORTED)
#: A pair's or target's "why" is cut to this many characters (the page and report.md have it whole): the main job's
#: longest, a diverged pair's trace, runs to several thousand.
_WHY_CHARS = 280


@dataclass(frozen=True)
class _Listing:
    """One list of the summary (reasons, failing cells, grid rows, pairs, entries, targets): its rows, and the row that
    replaces those cut (``more(n)``: n rows left to the page)."""

    rows: list[str]
    more: Callable[[int], str]


def render_summary(result: MatrixResult, page: str, report: str, plots: tuple[str, ...] = ()) -> str:
    """The summary of ``result``, naming the ``page`` and ``report`` files beside it and linking the ``plots``.

    At most :data:`SUMMARY_MAX_BYTES` whatever the matrix: every row is cut to a few hundred characters, and every list (why
    cells did not run, the cells failing on their own, the grid's rows, the pairs, the entries, the targets) is cut, the
    longest first, each saying how many rows it left to the page; what is left is a fixed head a few lines long."""
    spec = result.spec
    grid = glance(result)
    statuses: dict[str, int] = {}
    own: dict[str, int] = {}  # what the Python cells say when R did not run: the reason someone opened the summary
    for cell in result.cells:
        statuses[str(cell.status)] = statuses.get(str(cell.status), 0) + 1
        if cell.verdict is not None:
            own[cell.verdict.outcome] = own.get(cell.verdict.outcome, 0) + 1
    head = [
        f"# amp-parity · preset {spec.preset} · {spec.device} · {spec.amp_dtype} · {result.steps} steps", "",
        f"- Cells: {len(result.cells)} ({', '.join(f'{n} {s}' for s, n in statuses.items()) or 'none'}).",
        f"- Pairs: {len(result.pairs)} ({', '.join(f'{n} {v}' for v, n in grid.counts.items()) or 'none: one frontend only'}).",
        f"- Cells on their own (float64 bound; scaler cells: GradScaler's rule): "
        f"{', '.join(f'{n} {o.replace(chr(95), chr(32))}' for o, n in own.items()) or 'none judged'}.",
    ]
    why_not = _Listing([f"- **{_cut(f'{r.who} {r.status}')}**: {_cut(r.text)}" for r in reasons(result)],
                       lambda n: f"- … and {n} more reasons cells did not run: listed in `{page}`")
    failing = [c for c in result.cells if c.verdict and c.verdict.failed]
    on_own = _Listing([f"- **`{_cut(c.id)}` fails on its own**: {_cut(c.verdict.reason)}" for c in failing if c.verdict],
                      lambda n: f"- … and {n} more cells fail on their own: listed in `{page}`")
    whole = [f"- The whole report: `{page}` (one page, opens offline from the CI artifact) and `{report}` (every cell and pair).", ""]
    # a grid of "skipped" says no more than the lines above
    gridded = any(p.verdict != Verdict.SKIPPED for p in result.pairs)
    grid_head = (["## At a glance", "", "| | " + " | ".join(_cut(c) for c in grid.columns) + " |", "|---|" + ":---:|" * len(grid.columns)]
                 if gridded else [])
    rows = _Listing([f"| {_cut(key)} | " + " | ".join(entry or " " for entry in row) + " |" for key, row in grid.rows] if gridded else [],
                    lambda n: f"| … and {n} more rows (listed in `{page}`) |" + " |" * len(grid.columns))
    grid_tail = ["", LEGEND + ".", ""] if gridded else []
    loud = [p for p in result.pairs if p.verdict not in _QUIET and p.verdict != Verdict.KNOWN_DIFFERENCE]
    pairs = _Listing([f"| `{_cut(p.pair)}` | {_cut(' vs '.join(p.frontends))} | **{p.verdict}** | {_cut(p.cause)} |" for p in loud],
                     lambda n: f"| … and {n} more | | | listed in `{page}` |")
    known = _by_entry([p for p in result.pairs if p.verdict == Verdict.KNOWN_DIFFERENCE])
    explained = _Listing([f"| {_cut(entry)} | {len(group)} | `{_cut(group[0].pair)}` | {_cut(group[0].cause)} |"
                          for entry, group in known.items()], lambda n: f"| … and {n} more entries | | | listed in `{page}` |")
    missed = [t for t in result.targets if not t.met]
    by_target: dict[str, list[TargetCheck]] = {}
    for check in missed:
        by_target.setdefault(check.name, []).append(check)
    targets = _Listing([f"| {_cut(name)} | {len(group)} | `{_cut(group[0].subject)}` | {_cut(group[0].measured)} | "
                        f"{_cut(group[0].target)} | {sum(c.machine_noise for c in group)} |" for name, group in by_target.items()],
                       lambda n: f"| … and {n} more targets | | | | | listed in `{page}` |")
    plot_lines = ["## Plots", "", *[f"![{name}]({name})" for name in plots], ""] if plots else []
    listings = (why_not, on_own, rows, pairs, explained, targets)

    def shown(listing: _Listing, count: int) -> list[str]:
        return [*listing.rows[:count], *([listing.more(len(listing.rows) - count)] if count < len(listing.rows) else [])]

    def assemble(counts: list[int]) -> str:
        n_why, n_own, n_rows, n_pairs, n_known, n_targets = counts
        body = [*head, *shown(why_not, n_why), *shown(on_own, n_own), *whole]
        body += [*grid_head, *shown(rows, n_rows), *grid_tail]
        body += [f"## Pairs that need a look ({len(loud)}: not identical and not explained by a known difference)", ""]
        if loud:
            body += ["| pair | frontends | verdict | why |", "|---|---|---|---|", *shown(pairs, n_pairs)]
        else:
            body.append("None.")
        if known:
            body += ["", f"## Known differences ({sum(len(g) for g in known.values())} pairs, each proven or matched by its entry)", "",
                     "| entry | pairs | the first | why |", "|---|---:|---|---|", *shown(explained, n_known)]
        body += ["", f"## Targets missed ({len(missed)} of {len(result.targets)})", ""]
        if missed:
            body += ["| target | missed | the first | measured | asks | by the machine's noise |", "|---|---:|---|---|---|---:|",
                     *shown(targets, n_targets)]
        else:
            body.append("None." if result.targets else "No performance target applies to this preset and device.")
        return "\n".join([*body, "", *plot_lines])

    # Each list's rows' sizes (a line each), so the cutting is counted, not written again at each cut: a merge of many
    # results lists thousands of rows.
    sizes = [[len(row.encode()) + 1 for row in listing.rows] for listing in listings]
    counts = [len(listing.rows) for listing in listings]
    text = assemble(counts)
    excess = len(text.encode()) - SUMMARY_MAX_BYTES
    while excess > 0 and any(counts):
        # cut the list that takes the most room, by a tenth at a time
        longest = max(range(len(listings)), key=lambda k: sum(sizes[k][:counts[k]]))
        count, total = counts[longest], len(listings[longest].rows)
        cut = max(1, count // 10)
        before = len(listings[longest].more(total - count).encode()) + 1 if count < total else 0
        excess -= sum(sizes[longest][count - cut:count]) + before - len(listings[longest].more(total - count + cut).encode()) - 1
        counts[longest] = count - cut
        if excess <= 0:  # counted within the budget: written once to check
            text = assemble(counts)
            excess = len(text.encode()) - SUMMARY_MAX_BYTES
    text = assemble(counts)
    if len(text.encode()) > SUMMARY_MAX_BYTES:  # the head alone (the grid's columns, the plots): cut, saying so
        note = f"\n\n… the summary is cut here, at {SUMMARY_MAX_BYTES // 1000} KB: the rest is in `{_cut(page)}`.\n"
        room = SUMMARY_MAX_BYTES - len(note.encode())
        text = text.encode()[:room].decode(errors="ignore") + note
    return text


def _by_entry(pairs: list[PairVerdict]) -> dict[str, list[PairVerdict]]:
    """Known-difference pairs grouped by the entries that explain them (``a, b`` where several do)."""
    groups: dict[str, list[PairVerdict]] = {}
    for pair in pairs:
        ids = pair.details.get("known_difference") or pair.details.get("excused_by") or ["(no entry named)"]
        groups.setdefault(", ".join(ids), []).append(pair)
    return groups


def _cut(text: str) -> str:
    text = cell_text(text)
    return text if len(text) <= _WHY_CHARS else text[: _WHY_CHARS - 1].rstrip() + "…"
