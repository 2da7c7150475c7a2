"""The space of a hyperparameter: where the search (``harness search``) may draw it, and why that region is valid.

A row of the optimizer or feature table runs at one point, chosen so every term acts; a difference between the bindings
that lives elsewhere passes every listed cell unseen. Each row declares, beside that point, the space of each
hyperparameter the search may move (:attr:`harness.workload.optimizers.Optimizer.space`,
:attr:`harness.workload.features.Feature.space`): a range or a set of choices, its dtype, and the reason the whole region
is valid in both bindings (both constructors accept it, and neither is documented to compute it otherwise). The search
derives its strategies from these declarations alone (:mod:`harness.search.strategies`); a row that declares none is
searched at its point. Plain data: no drawing happens here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DTYPES", "Space", "between", "choice", "flag", "pair"]

#: The dtypes a hyperparameter has: a float, a whole number, a flag, or a pair of floats (Adam's betas, Rprop's etas).
DTYPES: tuple[str, ...] = ("float", "int", "bool", "pair")


@dataclass(frozen=True)
class Space:
    """A hyperparameter's space: ``choices`` (drawn among, the first the simplest), or ``low``..``high`` (``log``: drawn on
    a log scale, for a number that spans decades; ``zero``: 0 also drawn, where 0 switches the term off), or for a
    ``pair`` the two ranges ``low`` and ``high`` of its elements. ``why``: the reason the region is valid in both
    bindings."""

    dtype: str
    why: str
    low: Any = None
    high: Any = None
    choices: tuple[Any, ...] = ()
    log: bool = False
    zero: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"a space's dtype is one of {DTYPES}, not {self.dtype!r}")
        if not self.why:
            raise ValueError("a space needs the reason its region is valid in both bindings")
        if not self.choices and (self.low is None or self.high is None):
            raise ValueError("a space is a range (low and high) or choices")

    @property
    def blank(self) -> Any:
        """A value of the space's kind (what a table of values checks a drawn value's kind against)."""
        return self.choices[0] if self.choices else {"float": 0.0, "int": 0, "bool": False, "pair": (0.0, 0.0)}[self.dtype]

    def describe(self) -> str:
        """One line: the region and the dtype (the search's coverage and docs)."""
        if self.choices:
            region = "one of " + ", ".join(str(c) for c in self.choices)
        elif self.dtype == "pair":
            region = f"({self.low[0]:g}..{self.low[1]:g}, {self.high[0]:g}..{self.high[1]:g})"
        else:
            region = f"{self.low:g}..{self.high:g}" + (" (log)" if self.log else "") + (" or 0" if self.zero else "")
        return f"{region} [{self.dtype}]"

    def to_json(self) -> dict[str, Any]:
        """Plain data (a finding's spec names the space it was drawn from)."""
        return {"dtype": self.dtype, "region": self.describe(), "why": self.why}


def between(low: float, high: float, why: str, log: bool = False, zero: bool = False, dtype: str = "float") -> Space:
    """A number from ``low`` to ``high`` (``dtype`` ``int`` for a whole number)."""
    return Space(dtype, why, low, high, log=log, zero=zero)


def choice(*values: Any, why: str) -> Space:
    """One of ``values`` (the first is where a finding shrinks to)."""
    kinds = {type(v) for v in values}
    dtype = "bool" if kinds == {bool} else "int" if kinds == {int} else "float"
    return Space(dtype, why, choices=tuple(values))


def flag(why: str) -> Space:
    """True or false (false first: the binding's default, where a finding shrinks to)."""
    return Space("bool", why, choices=(False, True))


def pair(first: tuple[float, float], second: tuple[float, float], why: str) -> Space:
    """Two numbers, the first from ``first``'s range and the second from ``second``'s."""
    return Space("pair", why, first, second)
