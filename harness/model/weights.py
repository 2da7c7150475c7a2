"""What a result keeps of its cells' final weights, so that it stays judgeable once the weights files are gone.

A final-weights file is megabytes (``bench``: 3 MB a cell); a result without them is kilobytes. A result keeps, for
each cell, every tensor's SHA-256 (equal or not, against any other cell, ever) and, for each two cells of one pair
(script × mode × device) that ran in it, every tensor measured against the other's: the numbers a pair verdict reads
(:mod:`harness.judge.weight_findings`), before any tolerance is applied, so any policy judges them again. The weights
folder beside a result may then drop its ``.safetensors`` files (docs/results/README.md) and keep its small ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FinalWeights", "TensorComparison", "TensorDigest"]


def _number(value: Any) -> float:
    """A stored float; JSON keeps ``Infinity``/``NaN`` (the harness writes them), ``None`` stands for NaN."""
    return math.nan if value is None else float(value)


@dataclass(frozen=True)
class TensorDigest:
    """One tensor of one cell's final weights: its dtype, shape and the SHA-256 of its bytes."""

    dtype: str
    shape: tuple[int, ...]
    sha256: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TensorDigest:
        """The inverse of :meth:`to_json`."""
        return cls(str(data["dtype"]), tuple(int(n) for n in data["shape"]), str(data["sha256"]))

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {"dtype": self.dtype, "shape": list(self.shape), "sha256": self.sha256}


@dataclass(frozen=True)
class TensorComparison:
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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TensorComparison:
        """The inverse of :meth:`to_json`."""
        index, values = data.get("worst_index"), data.get("worst_values")
        shapes = data["shapes"]
        return cls(
            name=str(data["name"]), shapes=(tuple(shapes[0]), tuple(shapes[1])), dtypes=(str(data["dtypes"][0]), str(data["dtypes"][1])),
            identical=bool(data["identical"]), max_abs=_number(data["max_abs"]), rel_l2=_number(data["rel_l2"]),
            max_ulps=int(data["max_ulps"]), worst_index=None if index is None else tuple(int(i) for i in index),
            worst_values=None if values is None else (_number(values[0]), _number(values[1])),
            diff_sq=_number(data["diff_sq"]), norm_sq=_number(data["norm_sq"]),
        )

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "name": self.name, "shapes": [list(s) for s in self.shapes], "dtypes": list(self.dtypes), "identical": self.identical,
            "max_abs": self.max_abs, "rel_l2": self.rel_l2, "max_ulps": self.max_ulps,
            "worst_index": None if self.worst_index is None else list(self.worst_index),
            "worst_values": None if self.worst_values is None else list(self.worst_values),
            "diff_sq": self.diff_sq, "norm_sq": self.norm_sq,
        }


@dataclass(frozen=True)
class FinalWeights:
    """One cell's final weights as the result keeps them: each tensor's digest, and its comparisons with the other cells
    of its pair (``compared``, by the other cell's id; each pair of cells is kept once, by the cell listed first)."""

    tensors: Mapping[str, TensorDigest]
    compared: Mapping[str, tuple[TensorComparison, ...]] = field(default_factory=dict)

    def comparison(self, other_id: str) -> tuple[TensorComparison, ...] | None:
        """This cell's tensors measured against cell ``other_id``'s (this cell side 0), or ``None``: not kept here."""
        return self.compared.get(other_id)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FinalWeights:
        """The inverse of :meth:`to_json`."""
        return cls(
            tensors={str(k): TensorDigest.from_json(v) for k, v in (data.get("tensors") or {}).items()},
            compared={str(k): tuple(TensorComparison.from_json(t) for t in v) for k, v in (data.get("compared") or {}).items()},
        )

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "tensors": {k: v.to_json() for k, v in self.tensors.items()},
            "compared": {k: [t.to_json() for t in v] for k, v in self.compared.items()},
        }
