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

from harness.files.bounded_read import read_json_file
from tests.benchmarks import settings
from tests.benchmarks.loss_compare import OPTION, LossComparison, LossPolicy, compare_saved, parse_policy
from tests.benchmarks.test_protocol import CLOCK_AGREEMENTS, FLOORS, MISSED_TARGETS

#: The loss comparisons of this session, per saved run compared with: (its file name, one comparison per cell).
_COMPARED = pytest.StashKey[list[tuple[str, list[LossComparison]]]]()
#: Saved runs ``--benchmark-compare`` named but could not load: one line, and whether that fails the session.
_NOT_LOADED = pytest.StashKey[tuple[str, bool]]()
#: A saved run is one JSON file of a few hundred kB per session (each benchmark's stats and extra_info).
_SAVED_RUN_MAX_BYTES = 64 * 2**20


def _policy(config: pytest.Config) -> LossPolicy:
    """The option's policy (the option is declared in tests/conftest.py)."""
    try:
        return parse_policy(str(config.getoption(OPTION, default="auto")))
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None


def pytest_configure(config: pytest.Config) -> None:
    """Refuse a malformed ``--benchmark-compare-losses`` or ``AMP_PARITY_BENCH_*`` variable before anything runs, in one line."""
    _policy(config)
    try:
        settings.check_settings()
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None


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


def _not_loaded(config: pytest.Config, loaded: list[str]) -> tuple[str, bool] | None:
    """Why a saved run ``--benchmark-compare`` names was not loaded (one line), and whether that fails the session; ``None``:
    every one it names was.

    pytest-benchmark only warns (its warnings are let through as nothing: tests/conftest.py), and compares with what it
    could load: nothing (first run on empty storage: fine, this run is the first saved; a number that is not there, or only
    unreadable files: the comparison asked for did not happen, so the session fails), or an older run than the last (the
    last is unreadable: said, not failed).
    """
    session = getattr(config, "_benchmarksession", None)
    storage = getattr(session, "storage", None)
    if session is None or not session.compare or not hasattr(storage, "query"):
        return None
    asked = session.compare
    try:
        candidates = list(storage.query("[0-9][0-9][0-9][0-9]_" if asked is True else asked))
    except ValueError as err:  # pytest-benchmark's own refusal of the pattern
        return f"--benchmark-compare={asked}: {err}", True
    unreadable = []
    for path in candidates:
        try:
            data = read_json_file(path, _SAVED_RUN_MAX_BYTES)
            if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
                raise ValueError("not a saved run: no list of benchmarks")
        except (OSError, ValueError) as err:
            unreadable.append(f"{Path(path).name} ({getattr(err, 'strerror', None) or err})")
    if loaded:
        if not unreadable:
            return None
        return f"saved run {unreadable[-1]} could not be read: compared with {', '.join(loaded)} instead", False
    saving = bool(config.getoption("benchmark_autosave", False) or config.getoption("benchmark_save", None))
    then = "this run is saved: compare with it next time" if saving else "save a run (--benchmark-autosave) to compare with"
    if unreadable:
        return (f"losses not compared: the saved run{'s' if len(unreadable) > 1 else ''} {', '.join(unreadable)} could not be read "
                f"(truncated?); {then}"), True
    if asked is True:
        return f"losses not compared: no saved run in {storage} yet; {then}", False
    return (f"losses not compared: no saved run matches --benchmark-compare={asked} in {storage}; name one that is there "
            "(pytest-benchmark --benchmark-compare lists them as NNNN)"), True


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Compare every cell's losses with each saved run's, and fail the session where the policy says a change fails."""
    policy = _policy(session.config)
    now, saved = _runs_now_and_saved(session.config)
    if policy.kind == "off" or not now:
        return
    not_loaded = _not_loaded(session.config, [file for file, _ in saved])
    if not_loaded is not None:
        session.config.stash[_NOT_LOADED] = not_loaded
        if not_loaded[1] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    cells = [(name, fullname, info) for name, fullname, info in now if "losses" in info]  # test_protocol's benchmarks keep no losses
    compared = [
        (file, [compare_saved(name, info, runs.get(fullname), policy) for name, fullname, info in cells])
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
    not_loaded = config.stash.get(_NOT_LOADED, None)
    if not compared:
        terminalreporter.section(f"losses vs the saved run ({OPTION}={policy})")
        line, fails = not_loaded or ("losses not compared: no saved run was loaded", False)
        terminalreporter.line(line, red=fails)
        return
    if not_loaded is not None:
        terminalreporter.line(not_loaded[0], red=not_loaded[1])
    for file, comparisons in compared:
        terminalreporter.section(f"losses vs saved run {file} ({OPTION}={policy})")
        for comparison in comparisons:
            terminalreporter.line(comparison.line, red=comparison.fails, green=comparison.verdict == "identical")
        failed = [c.name for c in comparisons if c.fails and c.verdict == "changed"]
        if failed:
            terminalreporter.line(f"losses changed in {len(failed)} of {len(comparisons)} benchmarks: the session fails "
                                  f"({', '.join(failed)}); if the change is meant, save a run to compare with (--benchmark-autosave)",
                                  red=True, bold=True)
        corrupted = [c.name for c in comparisons if c.fails and c.verdict != "changed"]
        if corrupted:
            terminalreporter.line(f"losses not comparable in {len(corrupted)} of {len(comparisons)} benchmarks: the session fails "
                                  f"({', '.join(corrupted)}); save a run to compare with (--benchmark-autosave)", red=True, bold=True)


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Generator[None, None, None]:
    """Print the targets missed and the clock agreement, then, after pytest-benchmark's table, the loss comparison.

    A wrapper, so the loss section follows the timing table even when pytest-benchmark raises on a timing
    regression (``--benchmark-compare-fail``).
    """
    if FLOORS:
        terminalreporter.section("spread and the noise floor measured beside it (bench cells)")
        for line in FLOORS:
            terminalreporter.line(line)
    if MISSED_TARGETS:
        terminalreporter.section("performance targets missed")
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
