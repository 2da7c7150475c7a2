"""What a result keeps of its cells' final weights, so that it stays judgeable once the weights files are gone.

A final-weights file is megabytes (``bench``: 3 MB a cell); a result without them is kilobytes. A result keeps, for
each cell, every tensor's SHA-256 (equal or not, against any other cell, ever) and, for each two cells of one pair
(script × mode × device) that ran in it, every tensor measured against the other's: the numbers a pair verdict reads
(:mod:`harness.judge.weight_findings`), before any tolerance is applied, so any policy judges them again. The weights
folder beside a result may then drop its ``.safetensors`` files (docs/results/README.md) and keep its small ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.model.codec import Stored

__all__ = ["FinalWeights", "TensorComparison", "TensorDigest"]


@dataclass(frozen=True)
class TensorDigest(Stored):
    """One tensor of one cell's final weights: its dtype, shape and the SHA-256 of its bytes."""

    dtype: str
    shape: tuple[int, ...]
    sha256: str


@dataclass(frozen=True)
class TensorComparison(Stored):
    """One final-weights tensor of two cells, measured (side 0 is the cell that keeps it): what a tolerance is applied to."""

    name: str
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    dtypes: tuple[str, str]
    identical: bool
    max_abs: float
    rel_l2: float
    max_ulps: int
    worst_index: tuple[int, ...] | None
    worst_values: tuple[float, float] | None
    diff_sq: float
    norm_sq: float


    def swapped(self) -> TensorComparison:
        """The same measurement with the sides exchanged (every distance is symmetric; shapes, dtypes and values swap)."""
        values = None if self.worst_values is None else (self.worst_values[1], self.worst_values[0])
        return TensorComparison(self.name, (self.shapes[1], self.shapes[0]), (self.dtypes[1], self.dtypes[0]), self.identical,
                                self.max_abs, self.rel_l2, self.max_ulps, self.worst_index, values, self.diff_sq, self.norm_sq)

@dataclass(frozen=True)
class FinalWeights(Stored):
    """One cell's final weights as the result keeps them: each tensor's digest, and its comparisons with the other cells
    of its pair (``compared``, by the other cell's id; each pair of cells is kept once, by the cell listed first)."""

    tensors: Mapping[str, TensorDigest]
    compared: Mapping[str, tuple[TensorComparison, ...]] = field(default_factory=dict)

    def comparison(self, other_id: str) -> tuple[TensorComparison, ...] | None:
        """This cell's tensors measured against cell ``other_id``'s (this cell side 0), or ``None``: not kept here."""
        return self.compared.get(other_id)
