"""What a result keeps of its final weights (:class:`harness.model.weights.FinalWeights`), taken while the files are there.

A run takes it before it is judged (:meth:`harness.run.runner.MatrixRunner.run`), a load of an older result whose files
are still there takes it too (:func:`harness.store.result_file.load_result`), and a merge takes what its inputs did not
keep (the pairs across them, while both files exist). A pair is then judged from its files while they exist, and from
what was kept once they are gone (:func:`kept_for`, handed to :func:`harness.judge.weight_findings.find_weights`).
"""

from __future__ import annotations

import dataclasses
import os

from harness.judge.weight_findings import KeptWeights, measure_weights, tensor_digests
from harness.model.result import CellResult, MatrixResult
from harness.model.weights import FinalWeights

__all__ = ["keep_weights", "kept_for", "present_weights"]


def present_weights(cell: CellResult) -> str | None:
    """The cell's final-weights file, if its record names one that exists."""
    path = cell.record.weights_path if cell.record is not None else None
    return path if path is not None and os.path.isfile(path) else None


def keep_weights(result: MatrixResult) -> MatrixResult:
    """``result`` with every cell's final weights kept: the tensor digests of each file present, and every two cells of one
    pair (script × mode × device) measured against each other where both files are present and neither kept it yet.

    What was kept before is kept (a file gone since loses nothing); a file that cannot be read keeps nothing new.
    """
    digests: dict[str, FinalWeights | None] = {}
    for cell in result.cells:
        path = present_weights(cell)
        kept = cell.weights
        if path is not None and kept is None:
            try:
                kept = FinalWeights(tensor_digests(path))
            except Exception:  # an unreadable file keeps nothing: judged as unreadable, as before
                kept = None
        digests[cell.id] = kept
    cells = list(result.cells)
    for i, a in enumerate(cells):
        for b in cells[i + 1:]:
            kept_a, kept_b, pa, pb = digests[a.id], digests[b.id], present_weights(a), present_weights(b)
            if a.pair != b.pair or a.frontend == b.frontend or kept_a is None or kept_b is None or pa is None or pb is None:
                continue
            if kept_a.comparison(b.id) is not None or kept_b.comparison(a.id) is not None:
                continue
            try:
                measured = measure_weights(pa, pb)
            except Exception:
                continue
            digests[a.id] = dataclasses.replace(kept_a, compared={**kept_a.compared, b.id: measured})
    return dataclasses.replace(result, cells=tuple(dataclasses.replace(c, weights=digests[c.id]) for c in result.cells))


def kept_for(a: CellResult, b: CellResult) -> KeptWeights | None:
    """What the result kept of cells ``a`` and ``b``'s final weights (``a`` as side 0), or ``None``: nothing of either."""
    if a.weights is None and b.weights is None:
        return None
    comparison = a.weights.comparison(b.id) if a.weights is not None else None
    if comparison is None and b.weights is not None:
        other = b.weights.comparison(a.id)
        comparison = None if other is None else tuple(t.swapped() for t in other)
    digests = (a.weights.tensors if a.weights else None, b.weights.tensors if b.weights else None)
    if comparison is None and (digests[0] is None or digests[1] is None):
        return None
    return KeptWeights(comparison, digests)
