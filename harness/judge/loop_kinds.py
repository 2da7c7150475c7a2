"""Each kind of loop feature's float64 reference, in one place: what a row of that kind changes in the reference's loop
(:func:`harness.judge.reference.run_reference`), as the scripts' hooks change theirs (``py_scripts/features.py``,
``r_scripts/features.R``). A kind without an entry here cannot run: tests/unit/scripts/test_feature_hooks.py fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.workload.features import Feature

__all__ = ["REFERENCE_HOOKS", "ReferenceLoop", "reference_loop"]


@dataclass
class ReferenceLoop:
    """What the reference's loop does beyond the plain one (each field at the plain loop's value by default).

    ``every``: micro-batches per optimizer step (each loss divided by it, every micro-batch's loss recorded undivided);
    ``frozen``: a layer never updated nor counted in a clip's norm (-1: none); ``used``: the ``sometimes_used`` row's
    arguments (a layer left out of some steps' forward; under ``set_to_none`` false it steps on a zero gradient);
    ``multi``: the ``multi_optimizer`` row's (two optimizers split by layer, the second loss; at a skipped step only the
    first skips: the main job's overflow lands in its layer 0); ``penalty``: the gradient penalty's weight (0: none);
    ``groups``: weights and biases in two param groups; ``clip_norm``: ``(max_norm, inf_norm)``; ``clip_value``: the
    clamp's bound. A scheduler (a row that names one) is the reference's own (``_Schedule``), for any kind.
    """

    every: int = 1
    frozen: int = -1
    used: dict[str, Any] | None = None
    multi: dict[str, Any] | None = None
    penalty: float = 0.0
    groups: bool = False
    clip_norm: tuple[float, bool] | None = None
    clip_value: float | None = None


def _scheduler(loop: ReferenceLoop, feature: Feature) -> None:
    """The lr each step is the scheduler's closed form (``_Schedule``); a row that reads per-group values runs over the
    ``param_groups`` row's two groups."""
    loop.groups = feature.groups


def _accumulate(loop: ReferenceLoop, feature: Feature) -> None:
    loop.every = int(feature.args["every"])


def _clip_value(loop: ReferenceLoop, feature: Feature) -> None:
    loop.clip_value = float(feature.args["clip_value"])


def _clip_norm(loop: ReferenceLoop, feature: Feature) -> None:
    loop.clip_norm = (float(feature.args["max_norm"]), bool(feature.args["inf_norm"]))


def _frozen(loop: ReferenceLoop, feature: Feature) -> None:
    loop.frozen = int(feature.args["layer"])


def _param_groups(loop: ReferenceLoop, feature: Feature) -> None:
    loop.groups = True


def _sometimes_used(loop: ReferenceLoop, feature: Feature) -> None:
    loop.used = dict(feature.args)


def _multi_optimizer(loop: ReferenceLoop, feature: Feature) -> None:
    loop.multi = dict(feature.args)


def _penalty(loop: ReferenceLoop, feature: Feature) -> None:
    loop.penalty = float(feature.args["weight"])


def _same_arithmetic(loop: ReferenceLoop, feature: Feature) -> None:
    """A kind whose loop computes what the plain loop computes: ``custom_function`` (its function is a Linear's
    ``addmm`` and the Linear's own backward), ``resume`` (the uninterrupted run, its scheduler the reference's own)."""


#: Each kind of harness/workload/features.py's ``KINDS``: what it sets in the reference's loop.
REFERENCE_HOOKS: dict[str, Callable[[ReferenceLoop, Feature], None]] = {
    "scheduler": _scheduler, "accumulate": _accumulate, "clip_value": _clip_value, "clip_norm": _clip_norm,
    "frozen": _frozen, "param_groups": _param_groups, "sometimes_used": _sometimes_used,
    "multi_optimizer": _multi_optimizer, "penalty": _penalty, "custom_function": _same_arithmetic, "resume": _same_arithmetic,
}


def reference_loop(feature: Feature | None) -> ReferenceLoop:
    """The reference's loop for ``feature`` (``None``: the plain loop)."""
    loop = ReferenceLoop()
    if feature is not None:
        REFERENCE_HOOKS[feature.kind](loop, feature)
    return loop
