"""Results the size of the main job, built from the golden result's real cells, for the views' tests (no torch, no run).

The golden result (``tests/data``) is one optimizer in four modes; the main job is 17 optimizers. :func:`wide` copies
its cells and pairs to each optimizer of :data:`harness.workload.optimizers.OPTIMIZERS` (relabelled only: their numbers
stay the real ones), :func:`without_r` skips every R cell as a machine without R torch does, and :func:`with_bug` makes
one pair a proven R torch bug with its first differing point, as the judge stores it. :func:`main_job` is the whole main
job's shape: every optimizer and loop feature where its covering design puts them, in all seven modes, two pairs in three
a proven known difference, the targets a run checks on each cell.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from harness.contract.models import DEFAULT_MODEL
from harness.contract.modes import all_mode_names
from harness.model.pair_trace import PairTrace, PointDifference
from harness.model.result import MatrixResult, with_time_vs_default
from harness.model.verdicts import PairVerdict, TargetCheck
from harness.workload.features import FEATURES, NO_FEATURE
from harness.workload.matrix import Cell, cells_for, pair_id
from harness.workload.model_designs import PRESET_MODELS
from harness.workload.optimizers import OPTIMIZERS
from tests.twins import golden, replace_cells, with_status

__all__ = ["R_MISSING", "main_job", "wide", "with_bug", "without_r"]

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


#: The golden result's script · mode whose real cells stand in for a mode it did not run.
_STAND_INS = {("with_autocast", "lowp_weights"): ("with_autocast", "autocast"),
              ("with_autocast", "lowp_weights_scaled"): ("with_autocast", "autocast"),
              ("cuda_amp_grad_scaler", "default"): ("with_autocast", "default")}


def main_job() -> MatrixResult:
    """A result of the main job's shape (``run --preset tiny``: 800 cells, 400 pairs: the MLP's 680 with 23 loop features, and
    the three models beside it by their covering designs, harness/workload/model_designs.py), each cell and pair
    the golden one of its frontend and script · mode (or :data:`_STAND_INS`'), relabelled; two pairs in three a proven R
    torch bug (:func:`with_bug`'s, one per optimizer; the main job has 236 such pairs), and two targets checked per cell as
    the main job checks them (its overhead per call, its round-to-round spread), half of them missed; the float64 reference
    of each optimizer and feature."""
    base = golden()
    by_key = {(c.frontend, c.script, c.mode): c for c in base.cells}
    pair_of = {(p.script, p.mode): p for p in base.pairs}
    keys = cells_for(("python", "r"), tuple(all_mode_names()), tuple(OPTIMIZERS), "cpu", (NO_FEATURE, *FEATURES),
                     PRESET_MODELS["tiny"])
    cells = []
    for key in keys:
        stand_in = by_key[(key.frontend, *_STAND_INS.get((key.script, key.mode), (key.script, key.mode)))]
        cells.append(dataclasses.replace(stand_in, cell=key))
    pairs = []
    for key in keys[::2]:
        pair = pair_of[_STAND_INS.get((key.script, key.mode), (key.script, key.mode))]
        pairs.append(dataclasses.replace(pair, script=key.script, mode=key.mode, optimizer=key.optimizer, feature=key.feature,
                                         model=key.model, pair=key.pair))
    cells = with_time_vs_default(cells, paired=base.protocol.interleave)  # a loop feature's cell has no default cell to divide by
    result = dataclasses.replace(base, cells=tuple(cells), pairs=tuple(pairs), traces=())
    for index in range(len(pairs)):
        if index % 3:
            result, _ = with_bug(result, index, f"{result.pairs[index].optimizer}-weight-decay-index")
    targets = [TargetCheck(name, c.id, asks, f"{name} measured on {c.id}: {k % 97} units", k % 2 == 0,
                           None if k % 2 == 0 else f"missed by {k % 13} units: the measurement's own words about why, in a line")
               for k, c in enumerate(result.cells)
               for name, asks in (("overhead per call", "bridge ≤ 5 ms per call (the script's own set-up not counted)"),
                                  ("round-to-round spread", "CV ≤ max(3%, 1.5× the machine's noise floor)"))]
    # the float64 reference of every optimizer and loop feature, the golden one's (sgd's) relabelled: every panel draws it
    trajectories = tuple({**t, "optimizer": optimizer, **({} if feature == NO_FEATURE else {"feature": feature}),
                          **({} if model == DEFAULT_MODEL else {"model": model})}
                         for optimizer, feature, model in dict.fromkeys((c.optimizer, c.feature, c.model) for c in keys)
                         for t in base.reference.trajectories)
    return dataclasses.replace(result, targets=tuple(targets), reference=dataclasses.replace(base.reference, trajectories=trajectories))
