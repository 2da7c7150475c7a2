"""One timing protocol for both frontends, and the statistics every report reads from it.

A cell is timed by calling its script again and again in its long-lived worker, exactly as a
pytest-benchmark round calls it: the first call (untimed) writes the final weights and the parity
record and warms every cache (fixtures on the device, kernels, allocator); further warm-up calls
follow; then the timed rounds. Each round keeps three clocks:

- ``loop``: the script's own clock around its training loop (``seconds_total``), device synchronised;
- ``workload``: the script's own clock around its whole ``run_workload`` (set-up included);
- ``call``: the harness's clock around the call through the bridge (pipe, rpy2, JSON).

``call − loop`` is what a benchmark of the call pays on top of the loop; it has two parts with two owners.
The bridge (``call − workload``: pipe, serialization, rpy2) is the harness's own overhead, the figure
``overhead_seconds`` that the README bounds. The script's set-up (``workload − loop``: building the model
and optimizer, R torch's ``nn_linear`` modules among them) is the frontend's own cost: reported per
frontend (``setup_seconds``, :func:`harness.views.timing_sections.frontend_costs`), never charged to the harness.
The machine's own noise: after each timed round of a cell the spread target checks
(:func:`harness.judge.spread.spread_checked`), the same worker times a fixed loop of matrix products as long as the
cell's loop (:mod:`harness.worker_side.calibration`); the spread of those rounds (``floor``) is the noise floor the
cell's spread is judged against, measured at the same moments on the same cores.
Garbage collection: Python's collector is off inside the loop; R's cannot be, so R collects before the
loop and reports the seconds it spent collecting inside it (``gc_seconds``). Threads: both frontends
set the spec's thread count and the workers start with ``OMP_NUM_THREADS`` equal to it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.errors import UsageError
from harness.model.codec import Stored, codec

__all__ = [
    "BENCH_ROUNDS",
    "DEFAULT_MAX_SECONDS",
    "DEFAULT_ROUNDS",
    "DEFAULT_WARMUP_ROUNDS",
    "MALLOC_THRESHOLDS",
    "MAX_CV_FOR_RATIO",
    "MIN_ROUNDS_FOR_SPREAD",
    "PRESET_PROTOCOLS",
    "RoundLoad",
    "RoundLog",
    "Stats",
    "Timing",
    "TimingProtocol",
    "TimingSamples",
    "for_want_of_spread",
    "ratio",
    "summarize",
]

#: A ratio between two cells is printed only when each cell's coefficient of variation (or, for
#: interleaved rounds, the ratio's own) is at most this: AMP's CPU speed differences here are 10-30 %,
#: and with a 5 % spread per side a ratio's error reaches the size of the effect it claims to show.
MAX_CV_FOR_RATIO = 0.05


@dataclass(frozen=True)
class RoundLoad:
    """What else ran during one timed round (read from ``/proc`` by :mod:`harness.run.machine_load`)."""

    #: CPU seconds every process but the worker and this harness took (steal included), to a tick or two.
    other_cpu_seconds: float
    #: Page faults the worker took (minor and major).
    page_faults: int


@dataclasses.dataclass
class RoundLog:
    """The timed rounds of one cell, as they come back."""

    call_seconds: list[float] = dataclasses.field(default_factory=list)
    loop_seconds: list[float] = dataclasses.field(default_factory=list)
    workload_seconds: list[float] = dataclasses.field(default_factory=list)
    gc_seconds: list[float] = dataclasses.field(default_factory=list)
    peak_rss_bytes: list[int | None] = dataclasses.field(default_factory=list)
    #: The calibration rounds' seconds, one after each timed round (none for a cell whose spread is not checked).
    floor_seconds: list[float] = dataclasses.field(default_factory=list)
    #: What else ran during each timed round (harness.run.machine_load): other processes' CPU seconds and the worker's
    #: page faults, ``None`` where they could not be read.
    other_cpu_seconds: list[float | None] = dataclasses.field(default_factory=list)
    page_faults: list[int | None] = dataclasses.field(default_factory=list)
    #: Side by side only: the call and workload seconds of the round that read again, with the machine to itself, a bridge
    #: read over its bound beside the other lanes' calls (:func:`harness.run.measure.time_cells`); empty elsewhere.
    alone_call_seconds: list[float] = dataclasses.field(default_factory=list)
    alone_workload_seconds: list[float] = dataclasses.field(default_factory=list)
    #: Rounds whose losses differed from the record call's (0 on a deterministic build).
    differing_rounds: int = 0
    #: Untimed calls made, the record call included.
    warmup_calls: int = 1

    def add(self, call_seconds: float, record: Mapping[str, Any], peak_rss_bytes: int | None, same_losses: bool,
            load: RoundLoad | None = None) -> None:
        """Keep one timed round (``load``: what else ran during it, ``None`` where it could not be read)."""
        self.call_seconds.append(call_seconds)
        self.loop_seconds.append(float(record["seconds_total"]))
        self.workload_seconds.append(float(record["seconds_workload"]))
        self.gc_seconds.append(float(record["gc_seconds"]))
        self.peak_rss_bytes.append(peak_rss_bytes)
        self.other_cpu_seconds.append(None if load is None else load.other_cpu_seconds)
        self.page_faults.append(None if load is None else load.page_faults)
        self.differing_rounds += 0 if same_losses else 1

    def add_alone(self, call_seconds: float, record: Mapping[str, Any], same_losses: bool) -> None:
        """Keep the round that read the bridge again with the machine to itself (not one of the timed rounds: the cell's
        own time and spread are theirs)."""
        self.alone_call_seconds.append(call_seconds)
        self.alone_workload_seconds.append(float(record["seconds_workload"]))
        self.differing_rounds += 0 if same_losses else 1

    @property
    def bridge_seconds(self) -> float:
        """The timed rounds' bridge so far: the median of their call − workload."""
        return _bridge(self.call_seconds, self.workload_seconds)

    def add_floor(self, seconds: float) -> None:
        """Keep one calibration round (run right after a timed round, in the same worker)."""
        self.floor_seconds.append(seconds)

    @property
    def spent(self) -> float:
        """Seconds of timed calls so far (what ``max_seconds`` bounds)."""
        return sum(self.call_seconds)

    def summary(self) -> Timing:
        """The cell's ``timing``: every sample, their statistics, and the overhead split."""
        workload, loop = np.asarray(self.workload_seconds, dtype=float), np.asarray(self.loop_seconds, dtype=float)
        bridge, setup, call_median = self.bridge_seconds, float(np.median(workload - loop)), float(np.median(self.call_seconds))
        alone = _bridge(self.alone_call_seconds, self.alone_workload_seconds) if self.alone_call_seconds else None
        return Timing(
            rounds=len(self.call_seconds), warmup_calls=self.warmup_calls,
            call=summarize(self.call_seconds), loop=summarize(self.loop_seconds), workload=summarize(self.workload_seconds),
            # the harness's own overhead is its bridge; the script's set-up is the frontend's cost
            overhead_seconds=bridge, overhead_share=bridge / call_median,
            setup_seconds=setup, setup_share=setup / call_median, bridge_seconds=bridge,
            gc_seconds=float(np.max(self.gc_seconds)),
            reproducible=self.differing_rounds == 0, differing_rounds=self.differing_rounds,
            samples=TimingSamples(
                tuple(self.call_seconds), tuple(self.loop_seconds), tuple(self.workload_seconds), tuple(self.gc_seconds),
                tuple(self.peak_rss_bytes), tuple(self.floor_seconds), tuple(self.other_cpu_seconds), tuple(self.page_faults),
                tuple(self.alone_call_seconds), tuple(self.alone_workload_seconds),
            ),
            floor=summarize(self.floor_seconds) if self.floor_seconds else None,
            bridge_alone_seconds=alone,
        )


def _bridge(call_seconds: Sequence[float], workload_seconds: Sequence[float]) -> float:
    """The bridge of some rounds: the median of their call − workload (the harness's part of each call)."""
    return float(np.median(np.subtract(call_seconds, workload_seconds)))


def summarize(samples: Sequence[float]) -> Stats:
    """Median, quartiles, IQR, min/max, mean and coefficient of variation (``None`` below 3 samples)."""
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("no samples to summarize")
    q1, median, q3 = (float(v) for v in np.percentile(x, [25, 50, 75]))
    mean = float(x.mean())
    spread = x.size >= MIN_ROUNDS_FOR_SPREAD
    return Stats(
        n=int(x.size), median=median, q1=q1, q3=q3, iqr=q3 - q1 if spread else None,
        min=float(x.min()), max=float(x.max()), mean=mean,
        cv=float(x.std(ddof=1) / mean) if spread and mean > 0 else None,
    )


#: How :func:`ratio`'s notes begin when the rounds' spread is what denied a ratio (more rounds may give one).
_SPREAD_NOTES = ("too few timed rounds", "spread too wide")


def for_want_of_spread(note: str | None) -> bool:
    """Whether a ratio's note says the rounds' spread denied it (too few rounds, or too wide), so more rounds may help.

    Any other note (no default cell to compare with, a cell not timed or not ``ok``) is not noise.
    """
    return note is not None and note.startswith(_SPREAD_NOTES)


def ratio(numerator: Timing | None, denominator: Timing | None, paired: bool = False) -> tuple[float | None, str]:
    """``numerator`` loop median ÷ ``denominator``'s, or ``None`` and why the spread does not support one.

    ``paired`` (interleaved rounds, same count): the ratio is the median of per-round ratios, and its
    own spread is what must be small; round-to-round drift common to both sides cancels there.
    Returns ``(ratio, note)``; the note says what the ratio rests on, or why there is none.
    """
    if not numerator or not denominator:
        return None, "not timed"
    a, b = numerator.samples.loop_seconds, denominator.samples.loop_seconds
    if min(len(a), len(b)) < MIN_ROUNDS_FOR_SPREAD:
        return None, f"too few timed rounds ({min(len(a), len(b))} < {MIN_ROUNDS_FOR_SPREAD}) to know the spread"
    limit = f"{MAX_CV_FOR_RATIO:.0%}"
    if paired and len(a) == len(b):
        per_round = np.asarray(a, dtype=float) / np.asarray(b, dtype=float)
        cv = float(per_round.std(ddof=1) / per_round.mean())
        if cv > MAX_CV_FOR_RATIO:
            return None, f"spread too wide: the interleaved ratio varies {cv:.1%} round to round (> {limit})"
        return float(np.median(per_round)), f"median of {len(a)} interleaved rounds, CV {cv:.1%}"
    cvs = [numerator.loop.cv, denominator.loop.cv]
    if any(cv is None or cv > MAX_CV_FOR_RATIO for cv in cvs):
        shown = ", ".join("—" if cv is None else f"{cv:.1%}" for cv in cvs)
        # interleaved rounds of unequal counts land here too: --interleave is in use then, and not offered
        return None, f"spread too wide: CV {shown} (> {limit}); try {'more --rounds' if paired else '--interleave or more --rounds'}"
    return numerator.loop.median / denominator.loop.median, f"ratio of medians, CV {cvs[0]:.1%} and {cvs[1]:.1%}"


@dataclass(frozen=True)
class Stats(Stored):
    """Statistics of one clock's samples; ``iqr`` and ``cv`` are ``None`` below three samples."""

    n: int
    median: float
    q1: float
    q3: float
    iqr: float | None
    min: float
    max: float
    mean: float
    cv: float | None


def _unmeasured(name: str) -> Callable[[TimingSamples], bool]:
    """Whether a round-load sample (harness.run.machine_load) was not measured: it is written only where it was, so a result
    from before it reads back byte for byte."""
    return lambda samples: not getattr(samples, name)


@dataclass(frozen=True)
class TimingSamples(Stored):
    """Every timed round's value, in the order the rounds ran."""

    call_seconds: tuple[float, ...]
    loop_seconds: tuple[float, ...]
    workload_seconds: tuple[float, ...]
    gc_seconds: tuple[float, ...]
    peak_rss_bytes: tuple[int | None, ...]
    #: The calibration rounds' seconds (:class:`Timing`'s ``floor``); empty where none ran, and in older results.
    floor_seconds: tuple[float, ...] = ()
    #: Other processes' CPU seconds and the worker's page faults during each round (:class:`RoundLog`); empty in older
    #: results, ``None`` for a round where they could not be read.
    other_cpu_seconds: tuple[float | None, ...] = field(default=(), metadata=codec(omit=_unmeasured("other_cpu_seconds")))
    page_faults: tuple[int | None, ...] = field(default=(), metadata=codec(omit=_unmeasured("page_faults")))
    #: Side by side only: the round that read the bridge again with the machine to itself (:class:`RoundLog`), its call and
    #: workload seconds; empty where the side-by-side bridge was within its bound, one at a time, and in older results.
    alone_call_seconds: tuple[float, ...] = field(default=(), metadata=codec(omit=_unmeasured("alone_call_seconds")))
    alone_workload_seconds: tuple[float, ...] = field(default=(), metadata=codec(omit=_unmeasured("alone_workload_seconds")))


@dataclass(frozen=True)
class Timing(Stored):
    """A cell's timed rounds (see :mod:`harness.model.timing` for the three clocks and the overhead split)."""

    rounds: int
    warmup_calls: int
    call: Stats
    loop: Stats
    workload: Stats
    overhead_seconds: float
    overhead_share: float
    setup_seconds: float
    setup_share: float
    bridge_seconds: float
    gc_seconds: float
    reproducible: bool
    differing_rounds: int
    samples: TimingSamples
    #: The calibration rounds' statistics: their CV is the machine's noise floor while this cell was timed. ``None``: not
    #: measured (a cell the spread target does not check, or a result written before the floor was measured).
    floor: Stats | None = None
    #: Side by side, a bridge read over its bound beside the other lanes' calls is read again with the machine to itself
    #: (:func:`harness.run.measure.time_cells`): that round's call - workload, the one the overhead target judges.
    #: ``None`` where no such round ran.
    bridge_alone_seconds: float | None = field(default=None, metadata=codec(omit=lambda timing: timing.bridge_alone_seconds is None))

    @property
    def judged_bridge_seconds(self) -> float:
        """The bridge the overhead target judges: read with the machine to itself where the side-by-side one was read again,
        else the timed rounds' own."""
        return self.bridge_seconds if self.bridge_alone_seconds is None else self.bridge_alone_seconds


#: Untimed calls per cell, the record call included: the record call loads the fixtures and writes
#: the weights; a second call runs with everything warm but its own first epoch (6.7 ms vs 2.8 ms at
#: tiny on the first call) still warming the allocator, so one more untimed call is the default.
DEFAULT_WARMUP_ROUNDS = 2


#: glibc's malloc thresholds in bytes, fixed in every worker (harness.run.pool.worker_env) at the values glibc's own
#: dynamic rule reaches in a long-lived process (mmap threshold up to 32 MiB on 64-bit, trim threshold twice it). Left
#: dynamic they depend on the worker's history: a small worker process handed its heap's top back to the system after most
#: calls and took it again in the next, 3,000 to 16,000 page faults a call. Python's ``bench`` ``default`` rounds were
#: 3-5 % slower with 8,000 faults than with none, and Python ``autocast`` in a worker that ran only that cell was 15-23 %
#: slower than the same function in a long-lived process (tests/benchmarks' clock agreement). R's worker, whose heap R
#: keeps busy, took none. Fixed: 0-1,500 faults a call, and that gap 2-4 %. A value the user set (``MALLOC_*_``, or
#: ``glibc.malloc`` in ``GLIBC_TUNABLES``) is kept.
MALLOC_THRESHOLDS = {"MALLOC_MMAP_THRESHOLD_": 32 << 20, "MALLOC_TRIM_THRESHOLD_": 64 << 20}


#: Timed rounds per cell (at most): enough for a median and an interquartile range.
DEFAULT_ROUNDS = 5


#: Stop adding timed rounds to a cell once its timed rounds took this long: ``recipe`` on 2 CPU cores
#: takes minutes per call, so it gets one timed round by default, ``tiny`` and ``bench`` get all.
DEFAULT_MAX_SECONDS = 60.0


#: Timed rounds per ``bench`` cell: the spread target reads their CV. On the shared 2-vCPU VM about 3 % of rounds run over 5 %
#: slow, cells' and the fixed floor loop's alike (1,660 rounds of each, 22 ``bench`` results), with nothing in the guest to
#: show for it (docs/timing.md). The slowing is a share of the round, not a fixed stall (the rate of rounds over 5 % slow
#: is 2.7-3.2 % for rounds of 0.13 s and of 0.5 s alike), so longer rounds do not dilute it; more rounds do: one round
#: 8 % slow gives a CV of 2.5 % over 10 rounds and 1.8 % over 20 (the misses of ``tox -e bench`` runs 9 and 10 were each one
#: round 13-14 % slow among 10). They are most of a ``bench`` spread run (93 % of its wall in issue 47's measurement: 14
#: cells of 0.13-0.47 s loops idle, and each round's floor round, half as long: harness.run.measure.FLOOR_SHARE_OF_LOOP).
BENCH_ROUNDS = 20


#: A preset's own (untimed calls, timed rounds) where they differ from the defaults. ``tiny``'s cells take milliseconds: no
#: spread target applies to them (harness.judge.spread), and its matrix is the one a user waits for (issues 29, 38), so its
#: record call is its only warm-up (it runs every kernel the rounds run) and it gets one timed round, run side by side
#: (:attr:`TimingProtocol.side_by_side`): each cell's own untraced time, which the run's limit adds up, and its bridge. Three
#: rounds bought no ratio there: 213 of 231 cells' "x default" read "noisy" (issue 38), at two thirds of the run's time;
#: ``--rounds 3`` or more times them one at a time, for a ratio. ``bench`` is the one the spread target checks:
#: :data:`BENCH_ROUNDS`.
PRESET_PROTOCOLS: dict[str, tuple[int, int]] = {"tiny": (1, 1), "bench": (DEFAULT_WARMUP_ROUNDS, BENCH_ROUNDS)}


#: Fewer timed rounds than this give no spread (an IQR of two samples says nothing), so no ratio.
MIN_ROUNDS_FOR_SPREAD = 3


#: What a stored protocol says of how GC and the clocks were handled: written for its readers, never read back.
_GC_NOTE = "python: collector off inside the loop; r: collected before the loop, seconds in GC recorded"
_CLOCKS_NOTE = "loop and workload: the script's own clock, device synchronised; call: the harness's, around the bridge"


@dataclasses.dataclass(frozen=True)
class TimingProtocol(Stored):
    """How many rounds, how long, and in which order (``interleave``: A, B, A, B … across the cells)."""

    warmup_rounds: int = DEFAULT_WARMUP_ROUNDS
    rounds: int = DEFAULT_ROUNDS
    max_seconds: float = DEFAULT_MAX_SECONDS
    interleave: bool = False
    gc: str = field(default=_GC_NOTE, init=False, compare=False)
    clocks: str = field(default=_CLOCKS_NOTE, init=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.warmup_rounds, bool) or not isinstance(self.warmup_rounds, int) or self.warmup_rounds < 1:
            raise UsageError(
                "warmup_rounds", self.warmup_rounds,
                "an integer ≥ 1: the first call writes the weights and is never timed",
            )
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise UsageError("rounds", self.rounds, f"an integer ≥ 1 (≥ {MIN_ROUNDS_FOR_SPREAD} for a spread)")
        if not isinstance(self.max_seconds, (int, float)) or not math.isfinite(self.max_seconds) or self.max_seconds <= 0:
            raise UsageError("max_seconds", self.max_seconds, "a positive number of seconds")

    @property
    def side_by_side(self) -> bool:
        """Whether the rounds run side by side, a lane per frontend (:func:`harness.run.measure.time_cells`): too few for a
        spread (:data:`MIN_ROUNDS_FOR_SPREAD`), so no ratio and no spread target rests on them, only each cell's own time
        and its bridge; never when interleaved (a ratio is asked for)."""
        return self.rounds < MIN_ROUNDS_FOR_SPREAD and not self.interleave

    @classmethod
    def for_preset(cls, preset: str, warmup_rounds: int | None = None, rounds: int | None = None,
                   max_seconds: float | None = None, interleave: bool = False) -> TimingProtocol:
        """The protocol for ``preset``: what is given, else the preset's own (:data:`PRESET_PROTOCOLS`), else the defaults."""
        own_warmup, own_rounds = PRESET_PROTOCOLS.get(preset, (DEFAULT_WARMUP_ROUNDS, DEFAULT_ROUNDS))
        return cls(own_warmup if warmup_rounds is None else warmup_rounds, own_rounds if rounds is None else rounds,
                   DEFAULT_MAX_SECONDS if max_seconds is None else max_seconds, interleave)
