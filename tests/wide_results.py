"""Results the size of the main job, built from the golden result's real cells, for the views' tests (no torch, no run).

The golden result (``tests/data``) is one optimizer in four modes; the main job is 17 optimizers. :func:`wide` copies
its cells and pairs to each optimizer of :data:`harness.workload.optimizers.OPTIMIZERS` (relabelled only: their numbers
stay the real ones), :func:`without_r` skips every R cell as a machine without R torch does, and :func:`with_bug` makes
one pair a proven R torch bug with its first differing point, as the judge stores it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from harness.model.pair_trace import PairTrace, PointDifference
from harness.model.result import MatrixResult
from harness.model.verdicts import PairVerdict
from harness.workload.matrix import Cell, pair_id
from harness.workload.optimizers import OPTIMIZERS
from tests.twins import golden, replace_cells, with_status

__all__ = ["R_MISSING", "wide", "with_bug", "without_r"]

R_MISSING = 'the R package torch is not installed: in R, install.packages("torch"); torch::install_torch()'


def wide(optimizers: Sequence[str] = tuple(OPTIMIZERS)) -> MatrixResult:
    """The golden result's cells and pairs, once per optimizer."""
    base = golden()
    cells = tuple(dataclasses.replace(c, cell=Cell(c.frontend, c.script, c.mode, opt, c.device)) for opt in optimizers for c in base.cells)
    pairs = tuple(dataclasses.replace(p, optimizer=opt, pair=pair_id(p.script, p.mode, opt, p.device)) for opt in optimizers
                  for p in base.pairs)
    return dataclasses.replace(base, cells=cells, pairs=pairs, traces=())


def without_r(result: MatrixResult) -> MatrixResult:
    """``result`` as a machine without R torch writes it: every R cell skipped for that reason, every pair ``skipped``."""
    skipped = replace_cells(result, {c.id: with_status(c, "skipped", R_MISSING) for c in result.cells if c.frontend == "r"})
    pairs = tuple(dataclasses.replace(p, verdict="skipped", explanation=[f"{p.pair} (python vs r): skipped — r skipped: {R_MISSING}"],
                                      details={"statuses": {"python": "ok", "r": "skipped"}}) for p in result.pairs)
    return dataclasses.replace(skipped, pairs=pairs)


def with_bug(result: MatrixResult, index: int = 0, bug: str = "sgd-weight-decay-index") -> tuple[MatrixResult, PairVerdict]:
    """``result`` with its ``index``-th pair a proven R torch bug that first parts at step 3, one weight 1 ULP apart."""
    pair = result.pairs[index]
    point = PointDifference(step=3, point="param.layer0.weight", kind="bytes", dtypes=("float32", "float32"), shapes=((4, 4), (4, 4)),
                            elements=16, differing=1, max_distance=1, worst_index=(2, 1), worst_values=(0.852758825, 0.852758765))
    trace = PairTrace(pair.pair, pair.frontends, points=(40, 40), identical_points=12, first_difference=point,
                      last_identical=(3, "loss"))
    cause = f"R torch bug {bug}: first differs at step 3, param.layer0.weight (1 ULP), as the entry describes; proven"
    changed = dataclasses.replace(pair, verdict="known_difference", explanation=[f"{pair.pair} (python vs r): known_difference — {cause}"],
                                  details={"proven": True, "known_kinds": ["bug"], "known_difference": [bug], "excused_by": [bug],
                                           "trace": trace.to_json()})
    pairs = list(result.pairs)
    pairs[index] = changed
    return dataclasses.replace(result, pairs=tuple(pairs)), changed
