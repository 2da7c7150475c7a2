"""The loss-scaler oracle: exact against torch's own update kernel, and it names the first broken step.

R's scaler refuses CPU tensors, so R records cannot be produced on a CPU machine: the oracle is tested
here on constructed histories (as R would record them: the same fields), the same code that judges
R's records on CUDA.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from harness.judge.scaler_oracle import check_scale_history, expected_scale_history
from harness.workload.features import explicit_scales

_SPEC: dict[str, Any] = {"init_scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 4, "overflow_steps": []}


def _torch_history(init: float, growth: float, backoff: float, interval: int, found_inf: list[bool]) -> list[float]:
    """The scale after each step from torch._amp_update_scale_, the kernel GradScaler.update() calls."""
    scale = torch.full((), init, dtype=torch.float32)
    tracker = torch.zeros((), dtype=torch.int32)
    history = []
    for inf in found_inf:
        torch._amp_update_scale_(scale, tracker, torch.full((), float(inf)), growth, backoff, interval)
        history.append(scale.item())
    return history


def _record(scales: list[float], init: float = 65536.0, losses: list[float] | None = None, frontend: str = "r") -> dict[str, Any]:
    """A scaler run record as either script writes it: skipped where the scale went down."""
    previous = [init, *scales[:-1]]
    skipped = [after < before for before, after in zip(previous, scales, strict=True)]
    return {
        "frontend": frontend, "loss_scale": scales, "skipped": skipped, "skipped_steps": sum(skipped),
        "losses": losses if losses is not None else [1.0] * len(scales),
    }


@pytest.mark.parametrize("seed", range(6))
def test_expected_history_equals_torch_kernel_bit_for_bit(seed: int) -> None:
    """Random overflows with factors whose products round in float32: the oracle equals torch's kernel exactly."""
    rng = np.random.default_rng(seed)
    init, growth, backoff = float(rng.uniform(1, 1e5)), float(rng.uniform(1.01, 3.0)), float(rng.uniform(0.1, 0.99))
    interval = int(rng.integers(1, 5))
    found_inf = [bool(v) for v in rng.random(200) < 0.2]
    want = _torch_history(init, growth, backoff, interval, found_inf)
    assert expected_scale_history(init, growth, backoff, interval, found_inf) == want
    assert len(set(want)) > 5  # the history really moved both ways


def test_growth_stops_at_float32_range_as_the_kernel_does() -> None:
    """A scale whose growth would overflow float32 stays where it is, and the tracker still resets."""
    found_inf = [False] * 12
    want = _torch_history(2e38, 2.0, 0.5, 2, found_inf)
    assert expected_scale_history(2e38, 2.0, 0.5, 2, found_inf) == want
    assert want[-1] == want[0] == float(np.float32(2e38))


def test_correct_history_with_two_backoffs_passes() -> None:
    """Overflows at steps 3 and 7 with interval 4: two back-offs, then growth every 4 clean steps, matched."""
    found_inf = [step in (3, 7) for step in range(20)]
    scales = expected_scale_history(65536.0, 2.0, 0.5, 4, found_inf)
    assert scales[:8] == [65536.0] * 3 + [32768.0] * 4 + [16384.0] and scales[-1] == 131072.0
    check = check_scale_history(_record(scales), _SPEC | {"overflow_steps": [3, 7]})
    assert check.passed and check.skipped_steps == (3, 7) and check.first_step is None
    assert "2 back-offs at steps [3, 7]" in check.message


def test_growth_one_step_late_names_the_step_and_both_values() -> None:
    """A scaler built with growth_interval + 1 grows at step 4 instead of 3: the oracle says so."""
    late = expected_scale_history(65536.0, 2.0, 0.5, 5, [False] * 20)
    check = check_scale_history(_record(late), _SPEC)
    assert not check.passed
    assert (check.first_step, check.expected, check.recorded) == (3, 131072.0, 65536.0)
    assert "step 3" in check.message and "131072" in check.message and "65536" in check.message


def test_wrong_backoff_factor_is_caught() -> None:
    """An R-side scaler that backs off by 0.25 instead of 0.5 breaks the rule at the overflow step."""
    found_inf = [step == 5 for step in range(12)]
    scales = expected_scale_history(65536.0, 2.0, 0.25, 4, found_inf)
    check = check_scale_history(_record(scales), _SPEC | {"overflow_steps": [5]})
    assert not check.passed and (check.first_step, check.expected, check.recorded) == (5, 65536.0, 32768.0)


def test_injected_overflow_that_was_not_skipped_is_caught() -> None:
    """A scaler that ignores an inf at an injected step keeps its scale: caught there, by name."""
    scales = expected_scale_history(65536.0, 2.0, 0.5, 4, [False] * 8)
    check = check_scale_history(_record(scales), _SPEC | {"overflow_steps": [2]})
    assert not check.passed and check.first_step == 2 and "injected" in check.message


def test_nonfinite_loss_that_was_not_skipped_is_caught() -> None:
    """An inf loss means inf gradients: a step that was not skipped there breaks the rule."""
    scales = expected_scale_history(65536.0, 2.0, 0.5, 4, [False] * 6)
    check = check_scale_history(_record(scales, losses=[1.0, 1.0, float("inf"), 1.0, 1.0, 1.0]), _SPEC)
    assert not check.passed and check.first_step == 2 and "loss is inf" in check.message


def test_skipped_flags_that_contradict_the_scale_are_caught() -> None:
    """A record whose skipped list does not match its scale's movement is refused at that step."""
    record = _record([65536.0] * 3)
    record["skipped"] = [False, True, False]
    check = check_scale_history(record, _SPEC)
    assert not check.passed and check.first_step == 1 and "skipped is True" in check.message


def test_missing_history_fails_with_a_reason() -> None:
    """A scaler record without a history cannot be judged as correct."""
    check = check_scale_history({"losses": [1.0], "loss_scale": None, "skipped": None}, _SPEC)
    assert not check.passed and "no usable" in check.message


def test_accumulation_updates_the_scale_once_per_group() -> None:
    """Two micro-batches per update, interval 4: the scale grows at recorded step 7 (the fourth update), stands between,
    and an overflow injected at step 2 must skip the update at step 3; a history grown per micro-batch fails."""
    per_update = expected_scale_history(65536.0, 2.0, 0.5, 4, [False] * 10)
    scales = [s for before, after in zip([65536.0, *per_update[:-1]], per_update, strict=True) for s in (before, after)]
    assert scales[6:9] == [65536.0, 131072.0, 131072.0]
    assert check_scale_history(_record(scales), _SPEC, micro_batches=2).passed
    as_if_plain = expected_scale_history(65536.0, 2.0, 0.5, 4, [False] * 20)
    check = check_scale_history(_record(as_if_plain), _SPEC, micro_batches=2)
    assert not check.passed and check.first_step == 3
    backed = [65536.0, 32768.0, *[32768.0] * 18]
    assert not check_scale_history(_record(backed), _SPEC | {"overflow_steps": [2]}, micro_batches=2).passed
    backed_off = expected_scale_history(65536.0, 2.0, 0.5, 4, [False, True] + [False] * 8)
    skipped_group = [s for before, after in zip([65536.0, *backed_off[:-1]], backed_off, strict=True) for s in (before, after)]
    assert check_scale_history(_record(skipped_group), _SPEC | {"overflow_steps": [2]}, micro_batches=2).passed


def test_an_explicit_new_scale_is_followed_where_the_loop_sets_it() -> None:
    """``update(new_scale)`` at update 14 (loop feature multi_optimizer): the scale becomes it and the growth tracker
    stands, as torch's ``update`` does; the oracle follows it only where told (``explicit_scales``), else it fails there."""
    explicit = explicit_scales("multi_optimizer")
    assert explicit == {14: 1048576.0} and explicit_scales("accumulate") == {}
    found_inf = [step == 9 for step in range(20)]
    scales = expected_scale_history(65536.0, 2.0, 0.5, 4, found_inf, explicit)
    # grown at 13 (4 clean updates after the backoff at 9); set at 14, where the tracker stands; grown again at 18
    assert scales[13:16] == [262144.0, 1048576.0, 1048576.0] and scales[17:19] == [1048576.0, 2097152.0]
    record = _record(scales)
    assert check_scale_history(record, _SPEC | {"overflow_steps": [9]}, explicit=explicit).passed
    check = check_scale_history(record, _SPEC | {"overflow_steps": [9]})
    assert not check.passed and check.first_step == 14
