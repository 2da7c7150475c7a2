"""The report page (report.html) and the CI summary (summary.md) of a main-job-sized result: the grid links every pair,
a pair that needs a look says where it parts and why, nothing outside the page is referenced, and the summary fits a
job summary. The browser's view of the same page: tests/integration/test_report_page_browser.py."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.files.paths import CHECKOUT
from harness.model.result import MatrixResult
from harness.model.verdicts import TargetCheck
from harness.views.page import PAGE_FIGURES, PAGE_FILE, EntryText, pair_anchor, render_page
from harness.views.report import REPORT_FILES, write_report
from harness.views.summary import SUMMARY_FILE, SUMMARY_MAX_BYTES, render_summary
from harness.workload.optimizers import OPTIMIZERS
from tests.twins import with_status
from tests.wide_results import R_MISSING, wide, with_bug, without_r

_ENTRY = EntryText("sgd-weight-decay-index", "bug", "R torch's SGD reads weight decay from the wrong index",
                   "The mechanism, in a paragraph.", ("torch/optim/sgd.py:80", "R/optim-sgd.R:95"), "reported upstream")


class _Links(HTMLParser):
    """Every id, every link, and every attribute that could fetch something, of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.fetching: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name == "href" and tag == "a" and value:
                self.hrefs.append(value)
            elif name in ("src", "href", "xlink:href", "srcset", "data", "poster", "action") and value:
                self.fetching.append((tag, name, value))
            elif name == "style" and value and "url(" in value:
                self.fetching.append((tag, name, value))


def _parsed(page: str) -> _Links:
    links = _Links()
    links.feed(page)
    return links


#: The plots stand in as a few bytes where a test reads the page's text (the plots have their own tests, and
#: test_write_report_writes_the_page_and_the_summary draws them into a page).
_NO_PLOTS = {name: b"not a png" for name in PAGE_FIGURES}
#: Where the module's page is opened from: a folder of the checkout (the bugs' links are relative to it).
_PAGE_DIR = (CHECKOUT or Path.cwd()) / "reports" / "main-job"


@pytest.fixture(scope="module")
def page() -> str:
    result, _ = with_bug(wide())
    return render_page(result, {_ENTRY.id: _ENTRY}, _NO_PLOTS, _PAGE_DIR)


def test_every_grid_symbol_links_to_its_pair_and_every_link_resolves(page: str) -> None:
    """17 optimizers × 4 modes: a row per optimizer, a link per pair, and each in-page link names an id of the page."""
    result, _ = with_bug(wide())
    links = _parsed(page)
    inner = [h[1:] for h in links.hrefs if h.startswith("#")]
    assert {pair_anchor(p) for p in result.pairs} <= set(inner)
    assert set(inner) <= links.ids, sorted(set(inner) - links.ids)[:3]
    for optimizer in OPTIMIZERS:
        assert f'<th class="row">{optimizer}</th>' in page


def test_nothing_outside_the_page_is_referenced(page: str) -> None:
    """No script, stylesheet or font from anywhere, and no image but the plots' own bytes (data: URIs); the only links out
    of the page are report.md beside it and a bug's report and reproducers, by a path relative to the page that finds them
    in the checkout (never a host: the page linked a github.com repository that does not exist)."""
    links = _parsed(page)
    assert "script" not in links.tags and "link" not in links.tags and "iframe" not in links.tags
    assert [f for f in links.fetching if not f[2].startswith(("#", "data:"))] == []
    assert "@import" not in page and "url(http" not in page and "http://" not in page and "https://" not in page
    outside = [h for h in links.hrefs if not h.startswith("#")]
    assert "report.md" in outside
    bugs = [h for h in outside if h != "report.md"]
    assert bugs and all((_PAGE_DIR / h).resolve().is_file() for h in bugs), bugs
    assert {(_PAGE_DIR / h).resolve().parent for h in bugs} == {CHECKOUT / "docs" / "bugs" / _ENTRY.id} if CHECKOUT else True


def test_a_bug_links_its_folder_relative_to_where_the_page_is_opened(tmp_path: Path) -> None:
    """Wherever the report folder is, the links lead to the checkout's docs/bugs/<id>/ files; without a folder to resolve
    from (or for an id with no folder) the page names the folder and links nothing."""
    from harness.views.page import BUG_FILES, bug_links

    elsewhere = tmp_path / "ci" / "artifacts" / "report"
    links = bug_links(_ENTRY.id, elsewhere)
    assert [name for name, _ in links] == list(BUG_FILES)
    assert all((elsewhere / href).resolve() == CHECKOUT / "docs" / "bugs" / _ENTRY.id / name for name, href in links)  # type: ignore[operator]
    assert not any(href.startswith(("/", "http")) for _, href in links)
    assert bug_links(_ENTRY.id, None) == [] and bug_links("no-such-bug", elsewhere) == []
    result, _ = with_bug(wide(("sgd",)))
    unlinked = render_page(result, {_ENTRY.id: _ENTRY}, _NO_PLOTS)
    assert "docs/bugs/sgd-weight-decay-index/</code> in the amp-parity source" in unlinked and "reproducer.R" not in unlinked


def test_a_proven_bug_is_told_once_with_every_pair_it_explains(page: str) -> None:
    """A proven known difference is no article of its own: its entry (title, mechanism, sources, the bug's links) once, then
    a row per pair with where it first parts; the grid's symbol links to that row."""
    _, bug = with_bug(wide())
    start = page.index('id="known-sgd-weight-decay-index"')
    article = page[start:page.index("</article>", start)]
    assert _ENTRY.title.replace("'", "&#39;") in article and _ENTRY.mechanism in article and "R/optim-sgd.R:95" in article
    assert 'reproducer.R</a>' in article and "(1 pair)" in article
    row = article[article.index(f'<tr id="{pair_anchor(bug)}">'):]
    row = row[:row.index("</tr>")]
    assert "step 3, <code>param.layer0.weight</code>" in row and "1 ULP" in row
    assert page.count('id="known-') == 1 and "Pairs that need a look (0)" in page


def test_a_pair_that_needs_a_look_says_where_it_parts_and_which_entry_explains_it() -> None:
    """A pair a known difference matched without proof: its article has the first differing point with both values and
    its step, the entry's title and mechanism, and the whole explanation."""
    result, bug = with_bug(wide(("sgd", "adam")))
    unproven = dataclasses.replace(bug, details={**bug.details, "proven": False})
    result = dataclasses.replace(result, pairs=tuple(unproven if p.pair == bug.pair else p for p in result.pairs))
    page = render_page(result, {_ENTRY.id: _ENTRY}, _NO_PLOTS, _PAGE_DIR)
    start = page.index(f'id="{pair_anchor(bug)}"')
    article = page[start:page.index("</article>", start)]
    assert "param.layer0.weight</code> at step 3" in article
    assert "0.852758825" in article and "0.852758765" in article and "1 ULP" in article
    assert _ENTRY.title.replace("'", "&#39;") in article and _ENTRY.mechanism in article and "reproducer.R</a>" in article
    assert "Pairs that need a look (1)" in page and 'id="known-' not in page


def test_without_r_torch_the_page_tells_the_skip_once() -> None:
    """Every R cell skipped: one line with the count and the install line, not a row per cell."""
    page = render_page(without_r(wide()), images=_NO_PLOTS)
    assert page.count(R_MISSING.replace('"', "&#34;")) == 1
    assert f"{len(OPTIMIZERS) * 4} cells (" in page


def test_the_summary_of_a_main_job_fits_a_ci_job_summary() -> None:
    """Every pair of 17 optimizers × 4 modes diverged with a long cause: the summary stays under its budget, cuts the
    list, says how many it left to the page, and still has the whole grid."""
    result = wide()
    long = "x" * 3000
    pairs = tuple(dataclasses.replace(p, verdict="diverged", explanation=[f"{p.pair}: diverged — {long}"]) for p in result.pairs)
    text = render_summary(dataclasses.replace(result, pairs=pairs * 3), PAGE_FILE, "report.md")
    assert len(text.encode()) <= SUMMARY_MAX_BYTES
    assert "more | | | listed in `report.html` |" in text
    assert all(f"| {o} |" in text for o in OPTIMIZERS)


def test_the_summary_lists_what_needs_a_look_and_points_to_the_page() -> None:
    result, bug = with_bug(without_r(wide()))
    text = render_summary(result, PAGE_FILE, "report.md", ("losses.png",))
    assert f"| sgd-weight-decay-index | 1 | `{bug.pair}` |" in text
    assert text.count(R_MISSING) == 1 and "`report.html`" in text and "![losses.png](losses.png)" in text


def test_write_report_writes_the_page_and_the_summary(tmp_path: Path) -> None:
    written = write_report(wide(("sgd", "adam")), tmp_path)
    assert sorted(p.name for p in written) == sorted(REPORT_FILES)
    page = (tmp_path / PAGE_FILE).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.count('<img src="data:image/png;base64,iVBORw0KGgo') == 3
    assert (tmp_path / SUMMARY_FILE).stat().st_size <= SUMMARY_MAX_BYTES


def test_without_r_torch_the_summary_says_what_the_python_cells_found_and_draws_no_grid_of_skips() -> None:
    """Every pair skipped: a grid of "·" says nothing the skip's line does not; the Python cells' own verdicts are the news."""
    result = without_r(wide())
    text = render_summary(result, PAGE_FILE, "report.md")
    passing = sum(1 for c in result.cells if c.verdict is not None and c.verdict.outcome == "pass")
    assert passing and f"scaler cells: GradScaler's rule): {passing} pass" in text
    assert "## At a glance" not in text and text.count(R_MISSING) == 1


def test_a_cell_failing_its_own_check_is_named_in_the_page_and_the_summary() -> None:
    result = wide(("sgd",))
    cell = next(c for c in result.cells if c.verdict is not None)
    assert cell.verdict is not None
    failing = dataclasses.replace(cell, verdict=dataclasses.replace(cell.verdict, outcome="fail", reason="loss 3 times its bound"))
    result = dataclasses.replace(result, cells=tuple(failing if c.id == cell.id else c for c in result.cells))
    assert f"- **`{cell.id}` fails on its own**: loss 3 times its bound" in render_summary(result, PAGE_FILE, "report.md")
    assert f"<strong>{cell.id} fails on its own</strong>: loss 3 times its bound" in render_page(result, images=_NO_PLOTS)


def test_an_error_with_a_backtrace_shows_its_first_line_and_folds_the_rest() -> None:
    """R torch's C++ errors carry dozens of backtrace lines: the summary shows the first line, the rest is folded."""
    from tests.wide_results import replace_cells, with_status

    base = wide()
    cell = next(c for c in base.cells if c.frontend == "r")
    reason = "r script failed: tensor does not have a device\nException raised from device_default\nframe #0: c10::Error"
    page = render_page(replace_cells(base, {cell.id: with_status(cell, "error", reason)}), images=_NO_PLOTS)
    assert "error: r script failed: tensor does not have a device</p>" in page
    assert "<details><summary>the rest of the message</summary><pre>Exception raised from device_default\nframe #0" in page


def _huge() -> MatrixResult:
    """A matrix far past the main job: 300 optimizer rows (the grid's rows, long names), every cell failing its own check and half of
    them stopped, each with a reason of its own, thousands of long causes, distinct known-difference entries and missed
    targets: every list of the summary at once past its budget (the issue's 238 failing cells wrote 58 KB; six merged
    main-job results 126 KB)."""
    base = wide(("sgd",))
    names = [f"opt{k:04d}-{'o' * 200}" for k in range(300)]
    cells, pairs = [], []
    long = "y" * 2000
    for k, name in enumerate(names):
        for c in base.cells:
            cell = dataclasses.replace(c, cell=dataclasses.replace(c.cell, optimizer=name))
            if cell.verdict is not None:
                cell = dataclasses.replace(cell, verdict=dataclasses.replace(cell.verdict, outcome="fail", reason=f"{k}: {long}"))
            if k % 2:
                cell = with_status(cell, "error", f"stopped {cell.id}-{k}: {long}")
            cells.append(cell)
        for p in base.pairs:
            verdict = "diverged" if k % 3 else "known_difference"
            details = {"known_difference": [f"entry-{k}-{long[:200]}"]} if verdict == "known_difference" else {}
            pairs.append(dataclasses.replace(p, optimizer=name, pair=f"{p.pair}-{name}", verdict=verdict,
                                             explanation=[f"{p.pair}: {verdict} — {long}"], details=details))
    targets = tuple(TargetCheck(f"target-{k}-{long[:300]}", f"cell-{k}", long, long, False, long) for k in range(500))
    return dataclasses.replace(base, cells=tuple(cells), pairs=tuple(pairs), targets=targets)


def test_the_summary_of_any_matrix_is_at_most_50_kb() -> None:
    """Issue 48 (10): only the pairs and targets lists were cut. Every list is now, each saying how many rows it left to
    the page, and the head stays readable."""
    result = _huge()
    text = render_summary(result, PAGE_FILE, "report.md", ("losses.png", "loss_diff.png"))
    assert len(text.encode()) <= SUMMARY_MAX_BYTES
    for more in ("more reasons cells did not run", "more cells fail on their own", "more rows (listed in `report.html`)",
                 "more | | | listed in `report.html` |", "more entries", "more targets"):
        assert more in text, more
    assert text.startswith("# amp-parity · preset tiny") and "The whole report: `report.html`" in text
    assert "![loss_diff.png](loss_diff.png)" in text


def test_a_summary_whose_head_alone_is_too_long_is_cut_and_says_so() -> None:
    """Past every list, what is left (the grid's columns, the plots' names) is cut at the budget, saying where the rest is."""
    text = render_summary(wide(("sgd",)), PAGE_FILE, "report.md", tuple(f"plot-{k}-{'z' * 200}.png" for k in range(1000)))
    assert len(text.encode()) <= SUMMARY_MAX_BYTES and text.endswith("the rest is in `report.html`.\n")
