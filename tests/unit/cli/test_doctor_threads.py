"""``doctor`` says what the harness sets of the threads, for both languages (docs/determinism.md)."""

from __future__ import annotations

from rich.console import Console

from harness.cli.commands.doctor import doctor
from harness.run.availability import Availability


def test_doctor_says_what_the_harness_sets_of_the_threads() -> None:
    """The row names the intra-op setting, where a cell stores what its backward ran on, and the inter-op default."""
    console = Console(record=True, width=400)
    doctor(console, Availability("3.11.7", None, None, None, None))  # no torch: nothing probed in a process
    text = " ".join(console.export_text().split())
    assert "threads (both languages)" in text and "before the first backward" in text
    assert "installation.backward_threads" in text and "inter-op: libtorch's default" in text
