"""The benchmarks' closing lines: what each clock-agreement benchmark measured, every performance target missed,
and, with ``--benchmark-compare``, each cell's losses and weights against the saved run's.

``--benchmark-compare-losses=POLICY`` (:func:`tests.benchmarks.loss_compare.parse_policy`) says what a changed
loss does: ``auto`` (default) fails the session on the same libtorch build and reports it otherwise,
``identity`` always fails, ``tolerance:REL`` fails beyond a relative change, ``off`` compares nothing.
The comparing is :mod:`tests.benchmarks.loss_compare`; this file only finds the runs, prints and sets the exit status.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.loss_compare import OPTION, LossComparison, LossPolicy, compare_losses, parse_policy
from tests.benchmarks.test_protocol import CLOCK_AGREEMENTS, MISSED_TARGETS

#: The loss comparisons of this session, per saved run compared with: (its file name, one comparison per cell).
_COMPARED = pytest.StashKey[list[tuple[str, list[LossComparison]]]]()


def _policy(config: pytest.Config) -> LossPolicy:
    """The option's policy (the option is declared in tests/conftest.py)."""
    try:
        return parse_policy(str(config.getoption(OPTION, default="auto")))
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None


def pytest_configure(config: pytest.Config) -> None:
    """Refuse a malformed ``--benchmark-compare-losses`` before anything runs, in one line."""
    _policy(config)


def _runs_now_and_saved(config: pytest.Config) -> tuple[list[tuple[str, str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]:
    """This session's benchmarks (name, fullname, ``extra_info``) and the saved runs it compares with (file name, by fullname).

    Read from pytest-benchmark's session object (``config._benchmarksession``: its ``benchmarks`` and
    ``compared_mapping``, the attributes its own comparison table reads), because no public hook serves:
    ``pytest_benchmark_compare_machine_info``, the one that sees a saved run, is called from
    pytest-benchmark's ``pytest_configure``, before this conftest is loaded when pytest runs on ``tests/``,
    and without the file's path; and ``pytest_benchmark_update_json`` sees this run's benchmarks only when
    they are saved. Kept to this one function, so a pytest-benchmark release that renames them breaks here.
    """
    session = getattr(config, "_benchmarksession", None)
    if session is None or not session.compare:
        return [], []
    now = [(bench.name, bench.fullname, bench.extra_info) for bench in session.benchmarks if bench]
    saved = [(Path(path).name, mapping) for path, mapping in (session.compared_mapping or {}).items()]
    return now, saved


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Compare every cell's losses with each saved run's, and fail the session where the policy says a change fails."""
    policy = _policy(session.config)
    now, saved = _runs_now_and_saved(session.config)
    if policy.kind == "off" or not now:
        return
    cells = [(name, fullname, info) for name, fullname, info in now if "losses" in info]  # test_protocol's benchmarks keep no losses
    compared = [
        (file, [compare_losses(name, info, runs[fullname].get("extra_info", {}) if fullname in runs else None, policy)
                for name, fullname, info in cells])
        for file, runs in saved
    ]
    session.config.stash[_COMPARED] = compared
    if any(c.fails for _, comparisons in compared for c in comparisons) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _print_losses(terminalreporter: pytest.TerminalReporter) -> None:
    """The loss comparison's section: one line per cell and saved run, and why the session fails where it does."""
    config = terminalreporter.config
    compared = config.stash.get(_COMPARED, None)
    if compared is None:
        return
    policy = _policy(config)
    if not compared:
        terminalreporter.section(f"losses vs the saved run ({OPTION}={policy})")
        terminalreporter.line("losses not compared: no saved run was loaded (pytest-benchmark's warning says why)")
        return
    for file, comparisons in compared:
        terminalreporter.section(f"losses vs saved run {file} ({OPTION}={policy})")
        for comparison in comparisons:
            terminalreporter.line(comparison.line, red=comparison.fails, green=comparison.verdict == "identical")
        failed = [c.name for c in comparisons if c.fails]
        if failed:
            terminalreporter.line(f"losses changed in {len(failed)} of {len(comparisons)} benchmarks: the session fails "
                                  f"({', '.join(failed)}); if the change is meant, save a run to compare with (--benchmark-autosave)",
                                  red=True, bold=True)


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Generator[None, None, None]:
    """Print the targets missed and the clock agreement, then, after pytest-benchmark's table, the loss comparison.

    A wrapper, so the loss section follows the timing table even when pytest-benchmark raises on a timing
    regression (``--benchmark-compare-fail``).
    """
    if MISSED_TARGETS:
        terminalreporter.section("performance targets missed (reported, within what the benchmarks fail on)")
        for line in MISSED_TARGETS:
            terminalreporter.line(line)
    if CLOCK_AGREEMENTS:
        terminalreporter.section("clock agreement (harness vs torch.utils.benchmark.Timer)")
        for a in CLOCK_AGREEMENTS:
            verdict = "met" if a["gap_share"] <= a["bound_share"] else "MISSED"
            terminalreporter.line(
                f"{a['preset']} {a['mode']}: harness {a['harness_median']:.4g} s, Timer {a['timer_median']:.4g} s: "
                f"{a['gap_share']:.1%} apart (bound {a['bound_share']:.0%}, {verdict})"
            )
    try:
        return (yield)
    finally:
        _print_losses(terminalreporter)
