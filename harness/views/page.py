"""The report as one self-contained HTML page (``report.html``): the grid, the pairs that need a look, the plots.

A maintainer opens it from a CI artifact, offline: every plot is inline SVG, the style is in the page, and nothing is
fetched (``tests/integration/test_report_page_browser.py`` opens it in headless Chromium with the network blocked). Its
parts: the at-a-glance grid (each symbol a link to its pair), each pair that is not identical with its first differing
point and the known-difference entries that explain it, the loss curves and time ratios as small multiples, then
targets, phases and provenance. The page is a Jinja2 template (``templates/report.html.j2``, autoescaped); this module
gathers what it shows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jinja2
from matplotlib.figure import Figure

from harness.model.pair_trace import PairTrace
from harness.model.result import MatrixResult
from harness.model.verdicts import PairVerdict, Verdict
from harness.views.formatting import num, provenance_lines
from harness.views.glance import LEGEND, glance, symbol
from harness.views.plots import figure_svg, loss_diff_figure, losses_figure, timing_figure
from harness.views.reasons import reasons

__all__ = ["PAGE_FIGURES", "PAGE_FILE", "REPOSITORY", "EntryText", "pair_anchor", "render_page"]

PAGE_FILE = "report.html"
#: Where a bug's report and reproducers are read (``docs/bugs/<id>/``): the project's repository, as pyproject.toml's
#: ``Repository`` URL names it. Links only: the page loads nothing from there.
REPOSITORY = "https://github.com/amp-parity/amp-parity/blob/main/"
#: The page's plots, by the name its template gives each (the report's PNGs are the same figures).
PAGE_FIGURES: dict[str, Callable[[MatrixResult], Figure]] = {
    "losses": losses_figure, "loss_diff": loss_diff_figure, "timing": timing_figure,
}
#: The verdicts a page lists in one line each (identical, or a pair a side did not run: its reason is in the summary); the
#: others in full.
_QUIET = (Verdict.IDENTICAL, Verdict.SKIPPED, Verdict.UNSUPPORTED)


@dataclass(frozen=True)
class EntryText:
    """A known-difference entry as a page shows it (the caller reads the list; views never judge)."""

    id: str
    kind: str
    title: str
    mechanism: str
    sources: tuple[str, ...]
    upstream: str


def pair_anchor(pair: PairVerdict) -> str:
    """The page's id of a pair: its id and its two frontends (one pair id has one verdict per frontend vs the baseline)."""
    return f"pair-{pair.pair}--{'-'.join(pair.frontends)}"


def render_page(result: MatrixResult, entries: Mapping[str, EntryText] | None = None, svgs: Mapping[str, str] | None = None) -> str:
    """The page of a judged result; ``entries`` (by id) gives each matched known difference's title, mechanism and sources,
    ``svgs`` the plots already drawn (by :data:`PAGE_FIGURES`' names; the others are drawn here)."""
    drawn = {name: (svgs or {}).get(name) or figure_svg(build(result)) for name, build in PAGE_FIGURES.items()}
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.views", "templates"), autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    return environment.get_template("report.html.j2").render(**_context(result, entries or {}), svgs=drawn)


def _context(result: MatrixResult, entries: Mapping[str, EntryText]) -> dict[str, Any]:
    spec = result.spec
    grid = glance(result)
    rows = []
    for key, texts in grid.rows:
        links = [[{"symbol": symbol(p), "verdict": p.verdict, "anchor": pair_anchor(p), "title": f"{p.pair} ({' vs '.join(p.frontends)}): "
                   f"{p.verdict}"} for p in grid.pairs.get((key, column), ())] for column in grid.columns]
        rows.append({"key": key, "entries": links, "texts": texts})
    pairs = list(result.pairs)
    seen: set[str] = set()  # an entry's whole text is open at the first pair it explains, folded at the others
    loud = [_pair_context(p, entries, seen) for p in pairs if p.verdict not in _QUIET]
    quiet = [{"anchor": pair_anchor(p), "pair": p.pair, "frontends": " vs ".join(p.frontends), "verdict": p.verdict,
              "cause": p.cause} for p in pairs if p.verdict in _QUIET]
    counts: dict[str, int] = {}
    own: dict[str, int] = {}
    for cell in result.cells:
        counts[str(cell.status)] = counts.get(str(cell.status), 0) + 1
        if cell.verdict is not None:
            own[cell.verdict.outcome.replace("_", " ")] = own.get(cell.verdict.outcome.replace("_", " "), 0) + 1
    return {
        "title": f"amp-parity · preset {spec.preset} · {spec.device} · {spec.amp_dtype} · {result.steps} steps",
        "spec_line": (f"Batch {spec.batch_size}, {spec.in_size}→{spec.out_size}, {spec.num_layers} layers, lr {spec.lr:g}, "
                      f"seed {spec.seed}, threads {spec.threads}; created {result.created}; spec digest {result.spec_digest}; "
                      f"matrix wall time {num(result.wall_seconds, '.1f')} s; judged {result.judging}."),
        "cell_counts": counts, "own_counts": own, "pair_counts": grid.counts,
        "failing": [(c.id, c.verdict.reason) for c in result.cells if c.verdict is not None and c.verdict.failed],
        "cells": len(result.cells), "pairs": len(pairs),
        "columns": [c.split(" · ") for c in grid.columns], "rows": rows, "legend": LEGEND,
        "reasons": reasons(result), "loud": loud, "quiet": quiet,
        "targets": list(result.targets), "missed": [t for t in result.targets if not t.met],
        "phases": [(name, seconds, seconds / max(result.phases.total, 1e-9)) for name, seconds in result.phases.seconds],
        "phases_total": result.phases.total, "wall_seconds": result.wall_seconds,
        "provenance": provenance_lines(result), "files": sorted(result.provenance.files.items()),
        "warnings": list(result.warnings),
        "reference": result.reference.reason if not result.reference.available else None,
    }


def _pair_context(pair: PairVerdict, entries: Mapping[str, EntryText], seen: set[str]) -> dict[str, Any]:
    """What a pair that is not identical shows: verdict, why, its first differing point, the entries that explain it."""
    details = pair.details
    first = None
    stored = details.get("trace")
    if isinstance(stored, Mapping):
        trace = PairTrace.from_json(stored)
        point = trace.first_difference
        if point is not None:
            first = {
                "step": point.step, "point": point.point, "kind": point.kind, "ulp": point.max_distance,
                "worst": point.worst_values, "index": point.worst_index, "differing": point.differing, "elements": point.elements,
                "describe": point.describe(pair.frontends),
            }
    ids = list(dict.fromkeys([*(details.get("known_difference") or ()), *(details.get("excused_by") or ())]))
    shown = []
    for entry_id in ids:
        entry = entries.get(entry_id)
        bug = entry.kind == "bug" if entry is not None else "bug" in (details.get("known_kinds") or ())
        shown.append({
            "id": entry_id, "entry": entry, "bug": bug, "first": entry_id not in seen,
            "links": [(name, f"{REPOSITORY}docs/bugs/{entry_id}/{name}") for name in ("report.md", "reproducer.R", "reproducer.py")]
            if bug else [],
        })
        seen.add(entry_id)
    return {
        "anchor": pair_anchor(pair), "pair": pair.pair, "frontends": pair.frontends, "verdict": pair.verdict, "symbol": symbol(pair),
        "cause": pair.cause, "first": first, "entries": shown, "explanation": "\n".join(pair.explanation),
        "statuses": details.get("statuses"),
    }
