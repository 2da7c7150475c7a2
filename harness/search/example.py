"""One example of the search: a pair (a script's mode, an optimizer row, a loop feature) on a drawn workload, with the
hyperparameters it moved from the rows' points. Plain data: the spec a finding's folder keeps, and what replays it."""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.workload.features import FEATURES, NO_FEATURE
from harness.workload.matrix import Cell
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import SizeWarning, WorkloadSpec

__all__ = ["Example", "drawn_feature"]

#: The preset whose fields an example does not draw (the scaler's, the lr of the rows that take the spec's).
BASE_PRESET = "tiny"


@dataclass(frozen=True)
class Example:
    """``fields``: the workload fields drawn (harness/workload/spec.py ``SEARCH_SPACE``); ``optimizer_args`` and
    ``feature_args``: the hyperparameters moved from the rows' points (the others keep the row's value)."""

    script: str
    mode: str
    optimizer: str
    feature: str = NO_FEATURE
    fields: Mapping[str, Any] = field(default_factory=dict)
    optimizer_args: Mapping[str, Any] = field(default_factory=dict)
    feature_args: Mapping[str, Any] = field(default_factory=dict)

    def spec(self) -> WorkloadSpec:
        """The workload spec (``tiny``'s, with the drawn fields and the optimizer's moved hyperparameters).

        Raises:
            SpecError: a drawn value the spec refuses (the search's spaces are inside the spec's ranges).
        """
        args = {self.optimizer: dict(self.optimizer_args)} if self.optimizer_args else {}
        with warnings.catch_warnings():  # sizes not a multiple of 8 run on CPU; the warning is for a GPU's tensor cores
            warnings.simplefilter("ignore", SizeWarning)
            return WorkloadSpec.from_preset(BASE_PRESET, **self.fields, optimizer_args=args)

    def cells(self, frontends: tuple[str, ...], device: str = "cpu") -> list[Cell]:
        """The pair's cells, one per frontend (wherever the example lies: a feature's covering design or not)."""
        return [Cell(f, self.script, self.mode, self.optimizer, device, self.feature) for f in frontends]

    @property
    def pair(self) -> str:
        """The pair's id, as the matrix names it."""
        return self.cells(("x",))[0].pair

    def describe(self) -> str:
        """One line: the pair, then what moved from the rows' points and the drawn workload."""
        moved = [f"{self.optimizer}.{k}={_show(v)}" for k, v in self.optimizer_args.items()]
        moved += [f"{self.feature}.{k}={_show(v)}" for k, v in self.feature_args.items()]
        sizes = ", ".join(f"{k} {v}" for k, v in self.fields.items())
        return f"{self.pair}: {'; '.join(moved) or 'the rows at their points'}; {sizes}"

    def to_json(self) -> dict[str, Any]:
        """Plain data (a finding's ``example.json``), with the whole workload spec it ran."""
        plain = dataclasses.asdict(self)
        plain["optimizer_args"] = {k: list(v) if isinstance(v, tuple) else v for k, v in self.optimizer_args.items()}
        return {**plain, "workload": self.spec().to_json(),
                "optimizer_row": OPTIMIZERS[self.optimizer].resolved_args(self.spec().lr, self.optimizer_args),
                "feature_row": None if self.feature == NO_FEATURE else {**FEATURES[self.feature].args, **self.feature_args}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Example:
        """The example an ``example.json`` holds."""
        args = {k: tuple(v) if isinstance(v, list) else v for k, v in dict(data.get("optimizer_args") or {}).items()}
        return cls(str(data["script"]), str(data["mode"]), str(data["optimizer"]), str(data.get("feature", NO_FEATURE)),
                   dict(data.get("fields") or {}), args, dict(data.get("feature_args") or {}))


@contextlib.contextmanager
def drawn_feature(example: Example) -> Iterator[None]:
    """The feature's row with the example's moved arguments, for the length of the block, in this process: the run spec
    carries the row to both scripts, and the reference, the scale oracle and the known differences read it here. The
    table's row is back when the block ends, however it ends."""
    if example.feature == NO_FEATURE or not example.feature_args:
        yield
        return
    row = FEATURES[example.feature]
    FEATURES[example.feature] = dataclasses.replace(row, args={**row.args, **example.feature_args})
    try:
        yield
    finally:
        FEATURES[example.feature] = row


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    return f"{value:g}" if isinstance(value, float) else str(value)
