"""What the ``bench`` spread benchmarks time on each kind of CPU (tests/benchmarks/settings.py)."""

from __future__ import annotations


def test_a_cpu_without_bf16_times_the_float32_cells_only_at_bench() -> None:
    """``tox -e bench`` on a CPU without bfloat16 instructions (most CI runners; this machine has them, so it is planted):
    the spread benchmarks time the float32 modes only; elsewhere, or where it is not known, every mode."""
    from tests.benchmarks.settings import spread_modes

    assert spread_modes(False) == ("default",)
    assert spread_modes(True) is None and spread_modes(None) is None
