"""The report as one self-contained HTML page (``report.html``): the grid, the pairs that need a look, the plots.

A maintainer opens it from a CI artifact, offline: every plot is an inline PNG (a ``data:`` URI: its size follows its
pixels, not the number of lines in it, where the SVG it was grew with the matrix), the style is in the page, and nothing
is fetched (``tests/integration/test_report_page_browser.py`` opens it in headless Chromium with the network blocked).
Its parts: the at-a-glance grid (each symbol a link to its pair), each pair that needs a look with its first differing
point, each known difference and R torch bug once with the pairs it explains (a bug linked to its ``docs/bugs/<id>/``
folder by a path relative to the page), the loss curves and time ratios, then targets (each counted, its misses listed),
phases and provenance; ``report.md`` (linked) lists every cell and pair. The main job's page was 9.5 MB, one article
and one explanation per pair: it is bounded by :data:`PAGE_MAX_BYTES` (``tests/unit/views/test_report_sizes.py``). The
page is a Jinja2 template (``templates/report.html.j2``, autoescaped); this module gathers what it shows.
"""

from __future__ import annotations

import base64
import os
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from matplotlib.figure import Figure

from harness.files.paths import CHECKOUT
from harness.model.pair_trace import PairTrace, PointDifference
from harness.model.result import MatrixResult
from harness.model.verdicts import PairVerdict, TargetCheck, Verdict
from harness.views.formatting import num, provenance_lines
from harness.views.glance import LEGEND, glance, proven_known, symbol
from harness.views.plots import figure_png, loss_diff_figure, losses_figure, timing_figure
from harness.views.reasons import reasons

__all__ = ["BUG_FILES", "PAGE_FIGURES", "PAGE_FILE", "PAGE_MAX_BYTES", "EntryText", "bug_links", "entry_ids", "first_difference",
           "pair_anchor", "render_page"]

PAGE_FILE = "report.html"
#: The page of the main job stays below this (issue 47: it was 9.5 MB, and a browser took seconds to open it); its plots
#: are at most :data:`harness.views.plots.PICTURE_MAX_BYTES` each, and a test holds both on a main-job-sized result.
PAGE_MAX_BYTES = 2_000_000
#: What a bug's folder holds (``docs/bugs/<id>/``): the report for mlverse/torch and a reproducer in each language.
BUG_FILES = ("report.md", "reproducer.R", "reproducer.py")
#: Where the bugs' folders are: in this checkout (an installed harness has none: its page names the folder, unlinked).
_BUGS_DIR = CHECKOUT / "docs" / "bugs" if CHECKOUT is not None else None
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


def render_page(result: MatrixResult, entries: Mapping[str, EntryText] | None = None, images: Mapping[str, bytes] | None = None,
                page_dir: Path | None = None) -> str:
    """The page of a judged result; ``entries`` (by id) gives each matched known difference's title, mechanism and sources,
    ``images`` the plots already drawn as PNG (by :data:`PAGE_FIGURES`' names; the others are drawn here), ``page_dir`` the
    folder the page is opened from (its bugs' links are relative to it: :func:`bug_links`; none without it)."""
    drawn = {name: base64.b64encode((images or {}).get(name) or figure_png(build(result))).decode("ascii")
             for name, build in PAGE_FIGURES.items()}
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.views", "templates"), autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    return environment.get_template("report.html.j2").render(**_context(result, entries or {}, page_dir), images=drawn)


def entry_ids(pair: PairVerdict) -> tuple[str, ...]:
    """The known-difference entries a pair names (those that matched it, then the bugs that excuse its cells), each once."""
    details = pair.details
    return tuple(dict.fromkeys([*(details.get("known_difference") or ()), *(details.get("excused_by") or ())]))


def bug_links(entry_id: str, page_dir: Path | None) -> list[tuple[str, str]]:
    """The files of a bug's ``docs/bugs/<id>/`` folder, each with its path relative to ``page_dir`` (where the page is
    opened): it resolves wherever the checkout and the report folder are, and points at no host. Empty where the folder
    is not here (an installed harness, an entry without one) or no page folder is known."""
    if _BUGS_DIR is None or page_dir is None:
        return []
    folder = _BUGS_DIR / entry_id
    if not folder.is_dir():
        return []
    relative = os.path.relpath(os.path.realpath(folder), os.path.realpath(page_dir))
    return [(name, urllib.parse.quote(Path(relative, name).as_posix())) for name in BUG_FILES if (folder / name).is_file()]


def _context(result: MatrixResult, entries: Mapping[str, EntryText], page_dir: Path | None) -> dict[str, Any]:
    spec = result.spec
    grid = glance(result)
    rows = []
    for key, texts in grid.rows:
        links = [[{"symbol": symbol(p), "verdict": p.verdict, "anchor": pair_anchor(p), "title": f"{p.pair} ({' vs '.join(p.frontends)}): "
                   f"{p.verdict}"} for p in grid.pairs.get((key, column), ())] for column in grid.columns]
        rows.append({"key": key, "entries": links, "texts": texts})
    pairs = list(result.pairs)
    seen: set[str] = set()  # an entry's whole text is open where it is first shown, folded where it is shown again
    loud = [_pair_context(p, entries, seen, page_dir) for p in pairs if p.verdict not in _QUIET and not proven_known(p)]
    known = _known_context([p for p in pairs if p.verdict not in _QUIET and proven_known(p)], entries, seen, page_dir)
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
        "reasons": reasons(result), "loud": loud, "known": known, "quiet": quiet,
        "targets": _targets_context(result.targets), "target_count": len(result.targets),
        "missed": [t for t in result.targets if not t.met], "missed_shown": _MISSED_SHOWN,
        "phases": [(name, seconds, seconds / max(result.phases.total, 1e-9)) for name, seconds in result.phases.seconds],
        "phases_total": result.phases.total, "wall_seconds": result.wall_seconds,
        "provenance": provenance_lines(result), "files": sorted(result.provenance.files.items()),
        "warnings": list(result.warnings),
        "reference": result.reference.reason if not result.reference.available else None,
    }


def first_difference(pair: PairVerdict) -> PointDifference | None:
    """Where a pair's traces first part, from the trace its verdict stored (``None``: not traced, or never parts)."""
    stored = pair.details.get("trace")
    return PairTrace.from_json(stored).first_difference if isinstance(stored, Mapping) else None


def _first_point(pair: PairVerdict) -> dict[str, Any] | None:
    """Where a pair's traces first part (its step, point, distance and values), as the template shows it."""
    point = first_difference(pair)
    if point is None:
        return None
    return {
        "step": point.step, "point": point.point, "kind": point.kind, "ulp": point.max_distance, "worst": point.worst_values,
        "index": point.worst_index, "differing": point.differing, "elements": point.elements, "describe": point.describe(pair.frontends),
    }


def _entries_context(pair: PairVerdict, entries: Mapping[str, EntryText], seen: set[str], page_dir: Path | None) -> list[dict[str, Any]]:
    """The known-difference entries a pair names, each with its text (open where first shown) and, for a bug, its folder's files."""
    shown = []
    for entry_id in entry_ids(pair):
        entry = entries.get(entry_id)
        bug = entry.kind == "bug" if entry is not None else "bug" in (pair.details.get("known_kinds") or ())
        shown.append({"id": entry_id, "entry": entry, "bug": bug, "first": entry_id not in seen,
                      "links": bug_links(entry_id, page_dir) if bug else [], "folder": f"docs/bugs/{entry_id}/"})
        seen.add(entry_id)
    return shown


def _known_context(pairs: list[PairVerdict], entries: Mapping[str, EntryText], seen: set[str],
                   page_dir: Path | None) -> list[dict[str, Any]]:
    """The proven known differences, by the entries that explain them: each group's entries once, then one line per pair
    (its anchor, where it first parts). The main job has 230 such pairs; an article and an explanation each was 1.3 MB."""
    groups: dict[tuple[str, ...], list[PairVerdict]] = {}
    for pair in pairs:
        groups.setdefault(entry_ids(pair), []).append(pair)
    return [{
        "anchor": "known-" + "--".join(ids), "ids": ids, "symbol": symbol(members[0]),
        "entries": _entries_context(members[0], entries, seen, page_dir),
        "pairs": [{"anchor": pair_anchor(p), "pair": p.pair, "frontends": " vs ".join(p.frontends), "symbol": symbol(p),
                   "first": _first_point(p)} for p in members],
    } for ids, members in groups.items()]


#: The page lists at most this many misses of one target (the main job misses one on 449 cells); report.md lists each.
_MISSED_SHOWN = 10


def _targets_context(checks: tuple[TargetCheck, ...]) -> list[dict[str, Any]]:
    """The performance targets, one row each (what it asks, on how many subjects it was met), with its misses."""
    groups: dict[tuple[str, str], list[TargetCheck]] = {}
    for check in checks:
        groups.setdefault((check.name, check.target), []).append(check)
    return [{"name": name, "target": target, "checks": len(group), "met": sum(c.met for c in group),
             "missed": [c for c in group if not c.met], "noise": sum(c.machine_noise for c in group)}
            for (name, target), group in groups.items()]


def _pair_context(pair: PairVerdict, entries: Mapping[str, EntryText], seen: set[str], page_dir: Path | None) -> dict[str, Any]:
    """What a pair that needs a look shows: verdict, why, its first differing point, the entries that name it."""
    return {
        "anchor": pair_anchor(pair), "pair": pair.pair, "frontends": pair.frontends, "verdict": pair.verdict, "symbol": symbol(pair),
        "cause": pair.cause, "first": _first_point(pair), "entries": _entries_context(pair, entries, seen, page_dir),
        "explanation": "\n".join(pair.explanation), "statuses": pair.details.get("statuses"),
    }
