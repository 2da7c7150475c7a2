"""A resumed run against the uninterrupted one: a ``resume`` loop feature's cell ends where the same cell without the
interruption ends, bitwise.

Both are one binding running the same kernels on the same data, so the only thing between them is the checkpoint: a
state it does not carry, or carries rounded, or loads into the wrong place, shows as a first step whose loss differs, a
scale history that parts, or final weights that differ. Where the uninterrupted cell ran in the same run (the feature
the row names: ``Feature.uninterrupted``), a resumed cell that is not bitwise it ends in ``error`` with that first
difference, so the run fails. Judging makes the same check (:func:`harness.judge.assess.assess_result`): where the two
cells meet only later (a merge of slices that ran them apart, ``--feature none`` and ``--feature resume``, or a result
edited back to ``ok``), the resumed cell's own verdict fails with that difference, never excused, and so does the merge:
the outcome does not depend on how the matrix was sliced. The cross-language resume, outside the matrix, is
``tests/integration/test_resume.py``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence

import numpy as np

from harness.judge.weight_findings import load_weights
from harness.model.result import CellResult, Status
from harness.workload.features import FEATURES

__all__ = ["check_resumed", "resume_mismatch", "resume_mismatches"]


def _same_float(a: float | None, b: float | None) -> bool:
    """Bitwise equal as doubles (NaN equals NaN: the same failure, resumed or not)."""
    if a is None or b is None:
        return a is b
    return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (math.isnan(a) and math.isnan(b))


def resume_mismatch(resumed: CellResult, uninterrupted: CellResult) -> str | None:
    """How ``resumed`` parts from ``uninterrupted`` (its first differing loss or scale, or the final-weights tensors that
    differ), or ``None`` where it is bitwise the same run."""
    a, b = resumed.record, uninterrupted.record
    assert a is not None and b is not None
    for what, mine, theirs in (("loss", a.losses, b.losses), ("loss scale", a.loss_scale or (), b.loss_scale or ())):
        if len(mine) != len(theirs):
            return f"its {what} history has {len(mine)} steps, the uninterrupted run's {len(theirs)}"
        step = next((s for s, (x, y) in enumerate(zip(mine, theirs, strict=True)) if not _same_float(x, y)), None)
        if step is not None:
            return f"its {what} differs from step {step} on ({mine[step]!r}, uninterrupted {theirs[step]!r})"
    if resumed.weights is not None and uninterrupted.weights is not None:  # kept digests: a lean or merged result's
        mine_d, theirs_d = resumed.weights.tensors, uninterrupted.weights.tensors
        differing = [name for name in theirs_d if mine_d.get(name) != theirs_d[name]]
    elif a.weights_path is not None and b.weights_path is not None and os.path.isfile(a.weights_path) \
            and os.path.isfile(b.weights_path):
        mine_w, theirs_w = load_weights(a.weights_path), load_weights(b.weights_path)
        differing = [name for name in theirs_w
                     if name not in mine_w or mine_w[name].tobytes() != np.ascontiguousarray(theirs_w[name]).tobytes()]
    else:
        return None
    return f"its final weights differ in {', '.join(differing)}" if differing else None


def resume_mismatches(cells: Sequence[CellResult]) -> dict[str, str]:
    """Each ``resume`` cell that is not bitwise its uninterrupted cell (same frontend, script, mode, optimizer and device,
    the row's ``uninterrupted`` feature; where both ran and ended ok, on the same build and CPU as far as their
    installation facts say), by id, with where it parts (a final-weights file that cannot be read says so)."""
    by_id = {c.id: c for c in cells}
    found = {}
    for cell in cells:
        row = FEATURES.get(cell.cell.feature)
        other = None if row is None or row.kind != "resume" else by_id.get(dataclasses.replace(cell.cell, feature=row.uninterrupted).id)
        if other is None or cell.status is not Status.OK or other.status is not Status.OK or cell.record is None or other.record is None:
            continue
        if _other_kernels(cell, other):
            continue
        try:
            why = resume_mismatch(cell, other)
        except ValueError as err:
            why = str(err)
        if why is not None:
            found[cell.id] = f"resumed from its checkpoint, it is not the uninterrupted run {other.id}: {why}"
    return found


#: The installation facts that decide which kernels ran: two cells that differ in one (slices merged from two machines
#: under one frontend name) are not expected bitwise equal, resumed or not.
_KERNEL_FACTS = ("libtorch_build", "cpu", "cpu_features", "device_name")


def _other_kernels(a: CellResult, b: CellResult) -> bool:
    """Whether the two cells' installations (where both recorded them) say they ran other kernels."""
    if not a.installation or not b.installation:
        return False
    return any(a.installation.get(k) != b.installation.get(k) for k in _KERNEL_FACTS)


def check_resumed(cells: Sequence[CellResult]) -> list[CellResult]:
    """``cells``, with each ``resume`` cell that is not bitwise its uninterrupted cell in ``error``, naming where it parts
    (:func:`resume_mismatches`): what a run does before it times its cells."""
    found = resume_mismatches(cells)
    return [dataclasses.replace(c, status=Status.ERROR, reason=found[c.id]) if c.id in found else c for c in cells]
