"""The report page in a real browser: headless Chromium (Debian's ``chromium``, installed by .ci/setup) opens
report.html with the network blocked, and the page's own check finds the grid drawn, every in-page link resolving and
nothing fetched; then a screenshot is taken. A copy of the page with one outside image and stylesheet planted proves
the check sees a request when there is one.

Without Chromium the test is skipped with the install line, unless AMP_PARITY_REQUIRE_BROWSER=1 (CI), where it fails.
AMP_PARITY_SCREENSHOTS=DIR keeps the screenshots there, to look at.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.files.paths import CHECKOUT
from harness.views.page import PAGE_FILE, pair_anchor
from harness.views.report import write_report
from tests.wide_results import wide, with_bug

#: Runs in a copy of the page (the page itself has no script): what the browser laid out and fetched, as JSON in a <pre>.
_CHECK = """<script>
(() => {
  const grid = document.querySelector("#grid table.grid");
  const box = grid ? grid.getBoundingClientRect() : {width: 0, height: 0};
  const broken = [...document.querySelectorAll('a[href^="#"]')].map(a => decodeURIComponent(a.getAttribute("href").slice(1)))
    .filter(id => !document.getElementById(id));
  const fetching = [];
  for (const el of document.querySelectorAll("*")) {
    for (const at of el.attributes) {
      const link = el.tagName.toLowerCase() === "a" && at.name === "href";
      if (/^(src|href|xlink:href|srcset|data|poster|action)$/.test(at.name) && !link && !/^(#|data:)/.test(at.value)) {
        fetching.push(`${el.tagName} ${at.name}=${at.value}`);
      }
    }
  }
  const out = {
    rows: grid ? grid.tBodies[0].rows.length : 0, width: box.width, height: box.height,
    grid_links: grid ? grid.querySelectorAll('a[href^="#"]').length : 0, broken, fetching,
    outside_links: [...document.querySelectorAll("a[href]")].map(a => a.getAttribute("href")).filter(h => !h.startsWith("#")),
    resources: performance.getEntriesByType("resource").map(e => e.name),
    pictures: [...document.querySelectorAll("figure img")].map(i => i.complete ? i.naturalHeight : 0),
  };
  const pre = document.createElement("pre");
  pre.id = "amp-parity-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""
#: The browser's own flags: no sandbox (CI containers run as root), no background traffic of its own, and no network:
#: every host resolves to nothing and every request goes to a closed proxy.
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--disable-default-apps", "--proxy-server=http://127.0.0.1:9",
          "--host-resolver-rules=MAP * ~NOTFOUND")


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        reason = "headless Chromium is not installed: apt-get install chromium (.ci/setup does)"
        if os.environ.get("AMP_PARITY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"AMP_PARITY_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return found


def _open(browser: str, page: Path, work: Path) -> tuple[dict[str, Any], list[str]]:
    """What the page's check found, and the URLs of the requests the page made (the browser's net log)."""
    checked = page.with_name(f"checked-{page.name}")
    checked.write_text(page.read_text(encoding="utf-8").replace("</body>", f"{_CHECK}</body>"), encoding="utf-8")
    netlog = work / f"{page.stem}-netlog.json"
    done = subprocess.run([browser, *_FLAGS, f"--user-data-dir={work / 'profile'}", f"--log-net-log={netlog}", "--dump-dom",
                           checked.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    found = re.search(r'<pre id="amp-parity-check">(.*?)</pre>', done.stdout, re.S)
    assert found, f"the browser did not run the page's check (exit {done.returncode}): {done.stderr[-500:]}"
    log = json.loads(netlog.read_text(encoding="utf-8"))
    names = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    # The page's requests are those made for a file:// page; the browser's own (update checks) have no such site.
    requests = [e["params"]["url"] for e in log["events"] if names.get(e["type"]) == "URL_REQUEST_START_JOB"
                and "site=file://" in str(e["params"].get("site_for_cookies", ""))]
    return json.loads(html.unescape(found.group(1))), requests


def _screenshot(browser: str, page: Path, work: Path) -> Path:
    shot = work / f"{page.stem}.png"
    subprocess.run([browser, *_FLAGS, f"--user-data-dir={work / 'profile'}", f"--screenshot={shot}", "--window-size=1400,2600",
                    "--hide-scrollbars", page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert shot.is_file() and shot.stat().st_size > 20_000, "the browser wrote no screenshot (or a blank one)"
    keep = os.environ.get("AMP_PARITY_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    return shot


def test_the_page_renders_its_grid_links_every_pair_and_reaches_nothing_outside(tmp_path: Path) -> None:
    """The page opened where it was written: its grid drawn, its in-page links resolving, its three pictures decoded from
    the page itself, nothing fetched; its links out of the page are report.md and the bug's files in the checkout's
    docs/bugs/<id>/, by paths that resolve from the page's folder (it linked a host the project does not own)."""
    browser = _chromium()
    result, bug = with_bug(wide(("sgd", "sgd_momentum", "adam", "rprop")))
    write_report(result, tmp_path / "report")
    page = tmp_path / "report" / PAGE_FILE
    found, requests = _open(browser, page, tmp_path)
    assert found["rows"] == 4 and found["width"] > 300 and found["height"] > 60, found
    assert found["grid_links"] == len(result.pairs)
    assert found["broken"] == [] and found["fetching"] == [] and found["resources"] == [] and requests == []
    outside = found["outside_links"]
    assert "report.md" in outside and (page.parent / "report.md").is_file()
    bugs = [h for h in outside if h != "report.md"]
    assert bugs and CHECKOUT is not None
    assert all((page.parent / h).resolve().parent == CHECKOUT / "docs" / "bugs" / "sgd-weight-decay-index" for h in bugs), bugs
    assert all((page.parent / h).resolve().is_file() for h in bugs)
    assert len(found["pictures"]) == 3 and min(found["pictures"]) > 100, "a plot did not render"
    assert pair_anchor(bug) in page.read_text(encoding="utf-8")
    _screenshot(browser, page, tmp_path)

    planted = tmp_path / "report" / "planted.html"
    planted.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", '<img src="http://example.invalid/x.png"><link rel="stylesheet" href="https://cdn.example.invalid/a.css"></body>'),
        encoding="utf-8")
    caught, requests = _open(browser, planted, tmp_path)
    assert len(caught["fetching"]) == 2 and len(caught["resources"]) == 2
    assert sorted(requests) == ["http://example.invalid/x.png", "https://cdn.example.invalid/a.css"]
