"""The benchmarks' closing lines: what each clock-agreement benchmark measured, and every performance target missed."""

from __future__ import annotations

import pytest

from tests.benchmarks.test_protocol import CLOCK_AGREEMENTS, MISSED_TARGETS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the targets the benchmarks saw missed, and the clock agreement (harness workload clock vs ``Timer``) of every mode."""
    if MISSED_TARGETS:
        terminalreporter.section("performance targets missed (reported, within what the benchmarks fail on)")
        for line in MISSED_TARGETS:
            terminalreporter.line(line)
    if not CLOCK_AGREEMENTS:
        return
    terminalreporter.section("clock agreement (harness vs torch.utils.benchmark.Timer)")
    for a in CLOCK_AGREEMENTS:
        verdict = "met" if a["gap_share"] <= a["bound_share"] else "MISSED"
        terminalreporter.line(
            f"{a['preset']} {a['mode']}: harness {a['harness_median']:.4g} s, Timer {a['timer_median']:.4g} s: "
            f"{a['gap_share']:.1%} apart (bound {a['bound_share']:.0%}, {verdict})"
        )
