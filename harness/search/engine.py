"""The search loop: Hypothesis draws examples from the contract's spaces, each runs as one pair in the persistent
workers and is judged as the matrix judges a pair; each finding is shrunk to its minimal spec.

Hypothesis stops looking ten seconds after its first failure (then shrinks). To go on searching after a finding, the
search runs in rounds: each a Hypothesis run with the examples left, a seed of its own (from ``--seed``: the same seed
draws the same examples), and the findings of earlier rounds counted as passes. The first round replays the example
database first (the findings of earlier searches, kept where :func:`default_database` says or ``--database``). A
seconds budget ends the round in progress at the first example past it that no pending finding needs (shrinking a
finding runs to its end). ``stop_at_first`` ends the search once its first finding is shrunk, and shrinks that one alone
(another finding met while shrinking counts as a pass): a maintainer chasing one change, and the planted tests.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Unsatisfiable
from hypothesis.strategies import SearchStrategy

from harness.errors import UsageError
from harness.files.paths import cache_dir
from harness.run.runner import MatrixRunner
from harness.search.example import Example, drawn_feature
from harness.search.verdict import Judged, judge_example

__all__ = ["Budget", "Finding", "Search", "SearchReport", "default_database"]

#: Examples per round at most when the budget is in seconds (a round is a Hypothesis run: the clock is read per example).
_ROUND_EXAMPLES = 100_000


def default_database() -> Path:
    """Where the findings' examples are kept between searches: the user cache's ``search-db/`` ($AMP_PARITY_CACHE)."""
    return cache_dir() / "search-db"


@dataclass(frozen=True)
class Budget:
    """How long a search looks: a number of examples, or seconds (``90s``)."""

    examples: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``200`` (examples) or ``90s`` (seconds).

        Raises:
            UsageError: anything else, or not above 0.
        """
        raw = text.strip()
        try:
            value = float(raw[:-1]) if raw.endswith("s") else int(raw)
        except ValueError:
            value = -1
        if value <= 0:
            raise UsageError("--budget", text, "a number of examples (200) or of seconds (90s), above 0")
        return cls(seconds=float(value)) if raw.endswith("s") else cls(examples=int(value))

    def describe(self) -> str:
        """``200 examples`` or ``90 s``."""
        return f"{self.examples} examples" if self.examples is not None else f"{self.seconds:g} s"


@dataclass(frozen=True)
class Finding:
    """A finding: its minimal example and what it came to."""

    example: Example
    judged: Judged


class _Found(Exception):
    """Raised by an example that is a finding; one class per signature, so Hypothesis shrinks each apart."""

    def __init__(self, example: Example, judged: Judged) -> None:
        super().__init__(judged.summary)
        self.example, self.judged = example, judged


class _OutOfTime(BaseException):
    """The seconds budget is spent and no finding is pending: ends the round (Hypothesis passes a BaseException on)."""


_CLASSES: dict[str, type[_Found]] = {}


def _found_class(signature: str) -> type[_Found]:
    if signature not in _CLASSES:
        _CLASSES[signature] = type("Finding", (_Found,), {"__doc__": signature})
    return _CLASSES[signature]


@dataclass
class SearchReport:
    """What a search did: examples run (``searched``: drawn while no finding was pending; ``shrinking``: the others;
    ``repeated``: met again, not run again),
    the outcomes, the coverage per optimizer, feature and mode, the findings, seconds, and whether it was interrupted."""

    searched: int = 0
    shrinking: int = 0
    #: Examples met again (while shrinking), answered from the first run's verdict.
    repeated: int = 0
    seconds: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    optimizers: Counter[str] = field(default_factory=Counter)
    features: Counter[str] = field(default_factory=Counter)
    modes: Counter[str] = field(default_factory=Counter)
    moved: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    interrupted: bool = False
    #: Examples the harness could not judge (the parent raised), by the error's line: the first example of each.
    unjudged: dict[str, Example] = field(default_factory=dict)

    @property
    def examples(self) -> int:
        """Every example run, shrinking included."""
        return self.searched + self.shrinking

    @property
    def per_second(self) -> float:
        """Examples run per second."""
        return self.examples / self.seconds if self.seconds > 0 else 0.0


class Search:
    """Searches ``strategy``'s examples in ``runner``'s workers within ``budget``; ``seed`` fixes what is drawn."""

    def __init__(self, runner: MatrixRunner, strategy: SearchStrategy[Example], budget: Budget, seed: int, database: Path,
                 on_example: Callable[[SearchReport, Example, Judged], None] | None = None,
                 on_seen: Callable[[Example, Judged], None] | None = None, stop_at_first: bool = False) -> None:
        self.runner, self.strategy, self.budget, self.seed = runner, strategy, budget, seed
        #: End the search once the first finding is shrunk; while it shrinks, other findings count as passes (the
        #: shrinker follows that one alone).
        self.stop_at_first = stop_at_first
        self.database = DirectoryBasedExampleDatabase(database)
        self.report = SearchReport()
        self._on_example = on_example or (lambda report, example, judged: None)
        self._on_seen = on_seen or (lambda example, judged: None)
        self._reported: set[str] = set()
        #: Each example's verdict by its plain data: an example met again is not run again.
        self._judged: dict[str, Judged] = {}
        self._pending = False
        #: The signature being shrunk (the first finding of a round).
        self._chasing: str | None = None
        self._started = 0.0

    def run(self) -> SearchReport:
        """Search until the budget is spent; the findings, each minimal. Ctrl-C ends it with the findings so far (each
        also in the example database, replayed first next time)."""
        self._started = time.perf_counter()
        try:
            for number in range(1_000_000):
                left = self._examples_left()
                if left <= 0 or self._out_of_time():
                    break
                found = self._round(number, left)
                if found and self.stop_at_first:
                    break
                if not found and self.budget.examples is None and self._out_of_time():
                    break
                if not found and self.budget.examples is not None:
                    break  # Hypothesis ran the examples it was given (or exhausted the space) and found nothing new
        except KeyboardInterrupt:
            self.report.interrupted = True
        self.report.seconds = time.perf_counter() - self._started
        return self.report

    def _examples_left(self) -> int:
        return _ROUND_EXAMPLES if self.budget.examples is None else self.budget.examples - self.report.searched

    def _out_of_time(self) -> bool:
        return self.budget.seconds is not None and time.perf_counter() - self._started > self.budget.seconds

    def _round(self, number: int, examples: int) -> list[Finding]:
        """One Hypothesis run of at most ``examples`` examples: the findings it shrank (new signatures only)."""
        phases = [Phase.explicit, *([Phase.reuse] if number == 0 else []), Phase.generate, Phase.shrink]
        self._pending, self._chasing = False, None

        @settings(database=self.database, max_examples=examples, deadline=None, phases=phases,
                  report_multiple_bugs=not self.stop_at_first,
                  suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, print_blob=False)
        @hypothesis_seed(self.seed * 1_000_003 + number)
        @given(self.strategy)
        def search_example(example: Example) -> None:
            self._check(example)

        found: list[_Found] = []
        try:
            search_example()
        except _Found as one:
            found = [one]
        except BaseExceptionGroup as group:
            rest = group.split(_Found)
            found = list(_leaves(rest[0])) if rest[0] is not None else []
            if rest[1] is not None:
                raise rest[1] from None
        except (_OutOfTime, Unsatisfiable):
            pass
        findings = [Finding(f.example, f.judged) for f in found if f.judged.signature not in self._reported]
        for finding in findings:
            self._reported.add(finding.judged.signature)
            self.report.findings.append(finding)
        return findings

    def _check(self, example: Example) -> None:
        """Run one example and judge it; raise for a finding not reported yet."""
        if self._out_of_time() and not self._pending:
            raise _OutOfTime
        key = json.dumps(dataclasses.asdict(example), sort_keys=True, default=list)
        report = self.report
        cached = self._judged.get(key)  # Hypothesis's shrinker reaches one example by many draws (the floats are rounded)
        judged = self._judged[key] = cached if cached is not None else self.judge(example)
        if cached is not None:
            report.repeated += 1
        elif self._pending:
            report.shrinking += 1
        else:
            report.searched += 1
            report.outcomes[judged.outcome] += 1
            report.optimizers[example.optimizer] += 1
            report.features[example.feature] += 1
            report.modes[f"{example.script}.{example.mode}"] += 1
            report.moved.update([f"{example.optimizer}.{k}" for k in example.optimizer_args]
                                + [f"{example.feature}.{k}" for k in example.feature_args])
        self._on_example(report, example, judged)
        chased = not self.stop_at_first or self._chasing in (None, judged.signature)
        if judged.finding and judged.signature not in self._reported and chased:
            self._pending, self._chasing = True, judged.signature
            self._on_seen(example, judged)
            raise _found_class(judged.signature)(example, judged)

    def judge(self, example: Example) -> Judged:
        """One example: its pair run in the workers (record calls, reconciled runs, traces) and judged."""
        from harness.errors import SpecError

        try:
            spec = example.spec()
        except SpecError as err:  # a drawn point the spec refuses: outside every space, a bug of a declaration
            return Judged("refused", lines=(str(err),))
        self.runner.use_spec(spec)
        with drawn_feature(example):
            try:
                result = self.runner.run((example.mode,), (example.optimizer,), measure=False, features=(example.feature,),
                                         only_cells=example.cells(self.runner.frontends, spec.device))
            except (ValueError, ArithmeticError, KeyError, IndexError) as err:
                # The parent could not judge it (the float64 reference of a loop the drawn sizes break): counted and shown,
                # not a difference between the bindings.
                self.report.unjudged.setdefault(f"{type(err).__name__}: {err}"[:200], example)
                return Judged("unjudged", lines=(f"{type(err).__name__}: {err}",))
            return judge_example(result)


def _leaves(group: BaseExceptionGroup[_Found]) -> Sequence[_Found]:
    out: list[_Found] = []
    for e in group.exceptions:
        out.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return out
