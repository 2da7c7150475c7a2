"""The search's Hypothesis strategies, derived from the spaces the contract declares (harness/workload/space.py): the
optimizer rows' and the features' (``space``), and the workload's (``SEARCH_SPACE``). Nothing here names a
hyperparameter: a row that declares a space is searched in it, one that declares none at its point.

Every example shrinks towards the table: a moved hyperparameter back to the row's value (each is moved or not by a flag
drawn first), a choice to its first, a size to the smallest, the feature to the plain loop, the pair to the first mode
and optimizer asked for. A finding's minimal spec then moves only what the difference needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from harness.contract.modes import SCRIPTS
from harness.search.example import Example
from harness.workload.features import FEATURES, NO_FEATURE, stopped_in_r
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.space import Space
from harness.workload.spec import SEARCH_SPACE

__all__ = ["CLIP_KINDS", "drawable", "examples", "value_of"]

#: Significant digits a drawn float keeps: a minimal spec reads 0.0316, not 0.031622776601683794.
_DIGITS = 3


#: Below this a drawn number is 0 (or the range's low end): both scripts hand numbers to float32 kernels, whose smallest
#: normal is 1.2e-38 (the spec refuses what lies between, harness/workload/spec.py).
_TINY = 1e-30


def _rounded(x: float, low: float, high: float) -> float:
    x = float(f"{x:.{_DIGITS}g}")
    return min(max(x if abs(x) >= _TINY else 0.0, low), high)


def _number(low: float, high: float, log: bool) -> st.SearchStrategy[float]:
    if log and low > 0:
        return st.floats(math.log10(low), math.log10(high)).map(lambda e: _rounded(10.0 ** e, low, high))
    return st.floats(low, high).map(lambda x: _rounded(x, low, high))


def value_of(space: Space) -> st.SearchStrategy[Any]:
    """A strategy for ``space``'s values (its choices, its range, or its pair of ranges)."""
    if space.choices:
        return st.sampled_from(space.choices)
    if space.dtype == "int":
        return st.integers(int(space.low), int(space.high))
    if space.dtype == "pair":
        return st.tuples(_number(space.low[0], space.low[1], log=False), _number(space.high[0], space.high[1], log=False))
    drawn = _number(float(space.low), float(space.high), space.log)
    return st.one_of(st.just(0.0), drawn) if space.zero else drawn


def _moved(draw: st.DrawFn, spaces: Any) -> dict[str, Any]:
    """Each hyperparameter with a space, moved from the row's point or not (a flag first, so it shrinks back)."""
    return {name: draw(value_of(space)) for name, space in spaces.items() if draw(st.booleans())}


#: The loop features that clip the gradients: a row clips in place of the clip mode's own norm clip (the covering designs
#: run them in the scaler's default and autocast_scaler modes), so the search does not draw them in a mode that clips.
CLIP_KINDS: tuple[str, ...] = ("clip_value", "clip_norm")


def drawable(pairs: Sequence[tuple[str, str]], optimizers: Sequence[str],
             feature: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The pairs and optimizers the search draws with ``feature``: not a clip feature in a mode that clips already
    (:data:`CLIP_KINDS`), not an optimizer R torch cannot run with it (a reported bug no switch reconciles,
    :data:`harness.workload.features.UNRUNNABLE_IN_R`)."""
    clips = feature != NO_FEATURE and FEATURES[feature].kind in CLIP_KINDS
    return ([(s, m) for s, m in pairs if not (clips and SCRIPTS[s].mode(m).clip)],
            [o for o in optimizers if stopped_in_r(o, feature) is None])


def examples(pairs: Sequence[tuple[str, str]], optimizers: Sequence[str], features: Sequence[str]) -> st.SearchStrategy[Example]:
    """Examples over ``pairs`` ((script, mode)), ``optimizers`` and ``features`` (``none``, the plain loop, among them),
    as far as :func:`drawable` allows (a feature left with no pair or no optimizer is not drawn).

    Raises:
        ValueError: nothing is drawable (every feature asked for is left with none).
    """
    allowed = {f: drawable(pairs, optimizers, f) for f in features}
    features = [f for f in features if all(allowed[f])]
    if not features:
        raise ValueError("no example can be drawn: every feature asked for clips in a clip mode or stops R torch with the "
                         "optimizers asked for (a reported bug)")

    @st.composite
    def draw(draw: st.DrawFn) -> Example:
        feature = draw(st.sampled_from(features))
        script, mode = draw(st.sampled_from(allowed[feature][0]))
        optimizer = draw(st.sampled_from(allowed[feature][1]))
        fields = {name: draw(value_of(space)) for name, space in SEARCH_SPACE.items()}
        optimizer_args = _moved(draw, OPTIMIZERS[optimizer].space)
        feature_args = {} if feature == NO_FEATURE else _moved(draw, FEATURES[feature].space)
        return Example(script, mode, optimizer, feature, fields, optimizer_args, feature_args)

    return draw()
