"""The report's markdown summary (``summary.md``), sized for a CI job summary (``$GITHUB_STEP_SUMMARY``).

``report.md`` lists every cell and pair of the matrix: 758 KB for the main job, past what a job summary holds (GitHub
refuses a step's summary over 1 MiB, and one that long is not read). The summary holds what a reviewer acts on: the
grid, why cells did not run, the pairs that are not identical (one row per known-difference entry for those it explains),
the targets missed (one row per target), and where the whole report is. It is
kept under :data:`SUMMARY_MAX_BYTES` whatever the matrix: past it, the longest list is cut and says how many it left
to the page.
"""

from __future__ import annotations

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


def render_summary(result: MatrixResult, page: str, report: str, plots: tuple[str, ...] = ()) -> str:
    """The summary of ``result``, naming the ``page`` and ``report`` files beside it and linking the ``plots``."""
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
        *[f"- **{r.who} {r.status}**: {cell_text(r.text)}" for r in reasons(result)],
        *[f"- **`{c.id}` fails on its own**: {_cut(c.verdict.reason)}" for c in result.cells if c.verdict and c.verdict.failed],
        f"- The whole report: `{page}` (one page, opens offline from the CI artifact) and `{report}` (every cell and pair).", "",
    ]
    if any(p.verdict != Verdict.SKIPPED for p in result.pairs):  # a grid of "skipped" says no more than the line above
        head += ["## At a glance", "", "| | " + " | ".join(grid.columns) + " |", "|---|" + ":---:|" * len(grid.columns)]
        head += [f"| {key} | " + " | ".join(entry or " " for entry in row) + " |" for key, row in grid.rows]
        head += ["", LEGEND + ".", ""]
    loud = [p for p in result.pairs if p.verdict not in _QUIET and p.verdict != Verdict.KNOWN_DIFFERENCE]
    pairs = [f"| `{p.pair}` | {' vs '.join(p.frontends)} | **{p.verdict}** | {_cut(p.cause)} |" for p in loud]
    known = _by_entry([p for p in result.pairs if p.verdict == Verdict.KNOWN_DIFFERENCE])
    explained = [f"| {entry} | {len(group)} | `{group[0].pair}` | {_cut(group[0].cause)} |" for entry, group in known.items()]
    missed = [t for t in result.targets if not t.met]
    by_target: dict[str, list[TargetCheck]] = {}
    for check in missed:
        by_target.setdefault(check.name, []).append(check)
    targets = [f"| {name} | {len(group)} | `{group[0].subject}` | {cell_text(group[0].measured)} | {cell_text(group[0].target)} | "
               f"{sum(c.machine_noise for c in group)} |" for name, group in by_target.items()]
    plot_lines = ["## Plots", "", *[f"![{name}]({name})" for name in plots], ""] if plots else []

    def assemble(shown_pairs: int, shown_targets: int) -> str:
        body = list(head)
        body += [f"## Pairs that need a look ({len(loud)}: not identical and not explained by a known difference)", ""]
        if loud:
            body += ["| pair | frontends | verdict | why |", "|---|---|---|---|", *pairs[:shown_pairs]]
            if shown_pairs < len(loud):
                body.append(f"| … and {len(loud) - shown_pairs} more | | | listed in `{page}` |")
        else:
            body.append("None.")
        if known:
            body += ["", f"## Known differences ({sum(len(g) for g in known.values())} pairs, each proven or matched by its entry)", "",
                     "| entry | pairs | the first | why |", "|---|---:|---|---|", *explained]
        body += ["", f"## Targets missed ({len(missed)} of {len(result.targets)})", ""]
        if missed:
            body += ["| target | missed | the first | measured | asks | by the machine's noise |", "|---|---:|---|---|---|---:|",
                     *targets[:shown_targets]]
            if shown_targets < len(targets):
                body.append(f"| … and {len(targets) - shown_targets} more targets | | | | | listed in `{page}` |")
        else:
            body.append("None." if result.targets else "No performance target applies to this preset and device.")
        return "\n".join([*body, "", *plot_lines])

    shown_pairs, shown_targets = len(pairs), len(targets)
    text = assemble(shown_pairs, shown_targets)
    while len(text.encode()) > SUMMARY_MAX_BYTES and (shown_pairs or shown_targets):
        if shown_pairs >= shown_targets:  # cut the longer list first, by a tenth at a time
            shown_pairs -= max(1, shown_pairs // 10)
        else:
            shown_targets -= max(1, shown_targets // 10)
        text = assemble(shown_pairs, shown_targets)
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
