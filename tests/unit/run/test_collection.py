"""What R collects before its timed loop: every generation, except at tiny, where a full collection costs as much as a call."""

from __future__ import annotations

import dataclasses

import pytest

from harness.run.prepare import collect_before_loop
from harness.workload.spec import WorkloadSpec


@pytest.mark.parametrize(("preset", "expected"), [("tiny", "young"), ("bench", "full"), ("recipe", "full")])
def test_the_collection_before_the_loop_is_full_except_at_tiny(preset: str, expected: str) -> None:
    """``bench``'s half-second loops leave R garbage held in an older generation; ``tiny``'s loops of milliseconds do not pay a
    45 ms full collection. A spec made from tiny with other sizes is still tiny's preset, so keeps its young collection."""
    spec = WorkloadSpec.from_preset(preset)
    assert collect_before_loop(spec) == expected
    assert collect_before_loop(dataclasses.replace(spec, batch_size=spec.batch_size * 2)) == expected
