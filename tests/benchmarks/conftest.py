"""The benchmarks' closing lines: what each clock-agreement benchmark measured, met or not."""

from __future__ import annotations

import pytest

from tests.benchmarks.test_protocol import CLOCK_AGREEMENTS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the clock agreement (harness workload clock vs ``Timer``) of every mode benchmarked in this process."""
    if not CLOCK_AGREEMENTS:
        return
    terminalreporter.section("clock agreement (harness vs torch.utils.benchmark.Timer)")
    for a in CLOCK_AGREEMENTS:
        verdict = "met" if a["gap_share"] <= a["bound_share"] else "MISSED"
        terminalreporter.line(
            f"{a['preset']} {a['mode']}: harness {a['harness_median']:.4g} s, Timer {a['timer_median']:.4g} s: "
            f"{a['gap_share']:.1%} apart (bound {a['bound_share']:.0%}, {verdict})"
        )
