"""The module sweep's verdicts, as stored and shown: one per sample and mode, one per sample for the same-seed module,
and each ``module_db`` entry's counts (the coverage table, docs/modules/coverage.csv).

Judged by :mod:`harness.judge.modules` from what the workers measured; read by :mod:`harness.views.modules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from harness.model.codec import Stored

__all__ = ["COVERAGE_COLUMNS", "EntryCoverage", "ModuleSweepResult", "ModuleVerdict", "SameSeedVerdict", "SampleVerdict", "VERDICTS"]

#: A sample's verdict in one mode. ``identical``: every output, gradient and buffer bitwise equal, dtypes too.
#: ``proven``: a known difference whose switch makes it identical. ``excused``: it differs where an R torch bug with a
#: reproducer (docs/bugs/) says it does. ``unsupported``: R refused it (a module, an option or a dtype R torch lacks), in
#: R's words. ``diverged``: anything else: a real difference, named by the first tensor where it begins.
#: ``not_run``: PyTorch itself refused the sample in this mode (not R's to answer). A same-seed module's verdict is one of
#: ``identical``, ``excused`` and ``diverged``.
class ModuleVerdict(StrEnum):
    """A module sweep's verdict, for a sample in one mode or a same-seed module (the words above)."""

    IDENTICAL = "identical"
    PROVEN = "proven"
    EXCUSED = "excused"
    UNSUPPORTED = "unsupported"
    DIVERGED = "diverged"
    NOT_RUN = "not_run"


#: Every sample verdict, in the coverage table's order.
VERDICTS: tuple[str, ...] = tuple(v.value for v in ModuleVerdict)
#: The coverage table's columns: the entry, R's constructor and the samples' verdicts summed over the modes, then the
#: same-seed modules (construction, parameter order and state_dict names) and the first reason that is not identical.
COVERAGE_COLUMNS = ("entry", "r", "samples", *VERDICTS, "init_identical", "init_diverged", "init_excused", "reason")


@dataclass(frozen=True)
class SampleVerdict(Stored):
    """One sample in one mode: its verdict, and why (the first differing tensor, R's refusal, the bug's id)."""

    entry: str
    index: int
    desc: str
    mode: str
    verdict: str
    why: str = ""
    #: The largest difference of each side from PyTorch float64, relative to the float64 tensor's largest magnitude
    #: (the sample judged on its own); ``None`` where no float64 tensor pairs with it.
    python_f64: float | None = None
    r_f64: float | None = None

    @property
    def r_farther(self) -> bool:
        """Whether R is farther from float64 than PyTorch, by more than twice PyTorch's distance (the sample on its
        own: R's result is the less accurate one, not only another rounding)."""
        if self.python_f64 is None or self.r_f64 is None:
            return False
        return self.r_f64 > 2 * self.python_f64 and self.r_f64 > 0


@dataclass(frozen=True)
class SameSeedVerdict(Stored):
    """One sample's module as built after the same seed in both languages: its initial parameters and buffers, the
    order of its parameters and its state_dict's names."""

    entry: str
    index: int
    verdict: str
    why: str = ""


@dataclass(frozen=True)
class EntryCoverage(Stored):
    """One ``module_db`` entry's line of the coverage table."""

    entry: str
    r: str
    samples: int
    counts: dict[str, int] = field(default_factory=dict)
    init: dict[str, int] = field(default_factory=dict)
    reason: str = ""

    def row(self) -> dict[str, Any]:
        """The entry as a line of the table (:data:`COVERAGE_COLUMNS`)."""
        return {"entry": self.entry, "r": self.r, "samples": self.samples,
                **{v: self.counts.get(v, 0) for v in VERDICTS},
                "init_identical": self.init.get(ModuleVerdict.IDENTICAL, 0), "init_diverged": self.init.get(ModuleVerdict.DIVERGED, 0),
                "init_excused": self.init.get(ModuleVerdict.EXCUSED, 0), "reason": self.reason}


@dataclass(frozen=True)
class ModuleSweepResult(Stored):
    """The whole sweep judged: every sample verdict, every same-seed verdict, each entry's coverage, the modes run."""

    modes: list[str]
    samples: list[SampleVerdict]
    inits: list[SameSeedVerdict]
    coverage: list[EntryCoverage]

    def count(self, verdict: str) -> int:
        """How many sample-mode verdicts are ``verdict``."""
        return sum(1 for s in self.samples if s.verdict == verdict)

    @property
    def failed(self) -> bool:
        """Whether a pair diverged, or a same-seed module did (the sweep's exit status)."""
        return self.count(ModuleVerdict.DIVERGED) > 0 or any(i.verdict == ModuleVerdict.DIVERGED for i in self.inits)
