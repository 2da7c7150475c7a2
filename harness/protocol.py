"""How a cell is timed: the rounds, their limits and order, and the threads the workers start with.

A leaf module, so the result model (:mod:`harness.model`), which stores the protocol a run used, does
not import the statistics (:mod:`harness.timing`), which are computed from the model's cells.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from harness.errors import UsageError

__all__ = [
    "DEFAULT_MAX_SECONDS",
    "DEFAULT_ROUNDS",
    "DEFAULT_WARMUP_ROUNDS",
    "MIN_ROUNDS_FOR_SPREAD",
    "TimingProtocol",
    "thread_env",
]

#: Untimed calls per cell, the record call included: the record call loads the fixtures and writes
#: the weights; a second call runs with everything warm but its own first epoch (6.7 ms vs 2.8 ms at
#: tiny on the first call) still warming the allocator, so one more untimed call is the default.
DEFAULT_WARMUP_ROUNDS = 2
#: Timed rounds per cell (at most): enough for a median and an interquartile range.
DEFAULT_ROUNDS = 5
#: Stop adding timed rounds to a cell once its timed rounds took this long: ``recipe`` on 2 CPU cores
#: takes minutes per call, so it gets one timed round by default, ``tiny`` and ``bench`` get all.
DEFAULT_MAX_SECONDS = 60.0
#: Fewer timed rounds than this give no spread (an IQR of two samples says nothing), so no ratio.
MIN_ROUNDS_FOR_SPREAD = 3
@dataclasses.dataclass(frozen=True)
class TimingProtocol:
    """How many rounds, how long, and in which order (``interleave``: A, B, A, B … across the cells)."""

    warmup_rounds: int = DEFAULT_WARMUP_ROUNDS
    rounds: int = DEFAULT_ROUNDS
    max_seconds: float = DEFAULT_MAX_SECONDS
    interleave: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.warmup_rounds, bool) or not isinstance(self.warmup_rounds, int) or self.warmup_rounds < 1:
            raise UsageError(
                "warmup_rounds", self.warmup_rounds,
                "an integer ≥ 1: the first call writes the weights and is never timed",
            )
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise UsageError("rounds", self.rounds, f"an integer ≥ 1 (≥ {MIN_ROUNDS_FOR_SPREAD} for a spread)")
        if not isinstance(self.max_seconds, (int, float)) or not math.isfinite(self.max_seconds) or self.max_seconds <= 0:
            raise UsageError("max_seconds", self.max_seconds, "a positive number of seconds")

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the result, with how GC and threads were handled."""
        return dataclasses.asdict(self) | {
            "gc": "python: collector off inside the loop; r: collected before the loop, seconds in GC recorded",
            "clocks": "loop and workload: the script's own clock, device synchronised; call: the harness's, around the bridge",
        }


def thread_env(threads: int) -> dict[str, str]:
    """Environment for a worker, so both libtorch builds size their thread pools alike from the start."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
