"""The round-to-round spread target: a cell's loop times as quiet as the machine they ran on (docs/timing.md).

A cell's spread mixes its own irregularity with the machine's. The machine's is measured twice over in the same run:
by the noise floor, a calibration loop timed after each of the cell's rounds (:mod:`harness.worker_side.calibration`),
and by each round's load, what else the guest saw running during it (:mod:`harness.run.machine_load`). The floor sets
the bound. A single slow round escapes the floor, because the floor is timed after it, so one round in every
:data:`SET_ASIDE_EVERY` may be set aside where the run shows the machine caused it: other processes took CPU during it, or
the machine slowed a floor round of this run at least as much, and neither the worker's own page faults nor its frontend's
collector did. The rest of the cell's rounds must then meet the bound.

A cell that still misses is *missed only by the machine's noise* (:attr:`TargetCheck.machine_noise`) where its spread is no
larger than the noisiest floor's of the same run, both without their slowest rounds (as many as may be set aside): the
machine's own fixed loop, timed in the same minutes, was at least as irregular, so nothing in the run shows the cell (or the
harness, or the binding) adding noise of its own. Both sides are trimmed alike so that one floor's single stall cannot
excuse a cell that is irregular round after round. It stays a miss in every view; ``tox -e bench`` accepts only such
misses, as issue 29 asks ("met or missed only by the machine's noise as measured by the floor").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.model.result import CellResult, MatrixResult
from harness.model.timing import MIN_ROUNDS_FOR_SPREAD, Timing, summarize
from harness.model.verdicts import TargetCheck

__all__ = [
    "CV_MAX",
    "COLLECTION_MIN_SHARE",
    "CV_MIN_LOOP_SECONDS",
    "FAULTS_MIN_EXCESS",
    "FLOOR_FACTOR",
    "OTHER_CPU_MIN_SECONDS",
    "SET_ASIDE_EVERY",
    "check_spread",
    "spread_checked",
]

#: Coefficient of variation of the loop time for CPU cells that run about a second (``bench``) …
CV_MAX = 0.03
#: … checked for every CPU cell of the ``bench`` preset (the one sized to run about a second), and for
#: CPU cells of any preset whose median loop takes at least this long (not ``tiny``'s 10 ms, where
#: scheduler noise alone is several percent).
CV_MIN_LOOP_SECONDS = 0.5
#: A cell's spread is judged against the machine's noise floor measured beside it (its calibration rounds, one after each
#: timed round in the same worker: :mod:`harness.worker_side.calibration`): the bound is the larger of CV_MAX and this
#: many times the floor's CV. A cell's spread cannot be quieter than the machine's at that moment; the factor allows for
#: what the cell adds to the floor's bare training step (its data, its optimizer and scaler, R's interpreter between them),
#: which feels the machine's slow spells somewhat more. Measured with that floor (issue 47, 2026-11-28, eight ``bench``
#: spread runs, both protocols, 112 cell series): a cell's CV over the larger of its floor's and the run's median floor
#: was at most 1.72, over 1.5 in 5 series (Python's clip cell in 3: its unscale and clip are Python between the ops), so
#: 1.5 (issue 29's, set against the product floor, over which cells read 2-4.2) failed 2 of the 4 such runs (one on the
#: page faults of a reference cycle since removed, one on the machine's noise alone, by 0.01 points). 2 leaves room
#: above the measured worst; the plant of tests/integration/test_spread_planted.py (a spread near 100 % over floors of at
#: most ~10 %) and R's collector escalating in a round (a 21-27 % round over floors of ~1.5 %, CV over 5 %) still miss.
FLOOR_FACTOR = 2.0
#: Other processes' CPU time during a round that names them as its cause: two of /proc's 10 ms ticks, above the tick
#: rounding of one reading (an idle 2-vCPU VM shows 0.00-0.02 s per ``bench`` round).
OTHER_CPU_MIN_SECONDS = 0.02
#: Page faults a slow round must take beyond twice the median round's to name the allocator: 2000 faults cost about 5 ms
#: (about 2.5 µs each here), 1.5 % of a 0.34 s ``bench`` round.
FAULTS_MIN_EXCESS = 2000
#: A slow round is its cell's own when the cell's collector (R's: Python's is off inside the loop) took at least this share
#: of its excess over the median round, in collection seconds beyond the median round's. R's clip cell at ``bench`` collects
#: 0.014-0.016 s in every round, and in the fourth round of two back-to-back ``tox -e bench`` runs it collected fully: 0.105 s,
#: the round 0.087 s (21 %) slow. Such a round is neither set aside nor trimmed as the machine's.
COLLECTION_MIN_SHARE = 0.5
#: One slow round in every this many timed rounds (at least one) may be set aside where the run shows the machine caused it.
#: On the 2-vCPU VM about 3 % of rounds, cells' and floors' alike, run over 5 % slow (1,660 of each, 22 ``bench`` results):
#: over 20 rounds (:data:`harness.model.timing.BENCH_ROUNDS`) two such rounds come in about one cell in eight, over 10 one
#: in thirty; so two of 20 are the machine's as readily as one of 10, and three would say the cell is noisy.
SET_ASIDE_EVERY = 10

_NAME = "round-to-round spread"


def spread_checked(device: str, preset: str, loop_seconds: float) -> bool:
    """Whether the spread target checks a cell: on CPU, of the ``bench`` preset or with a loop of ≥ CV_MIN_LOOP_SECONDS.

    The run measures the machine's noise floor beside exactly these cells (:func:`harness.run.measure.time_cells`, over
    the loop of the cell's last untimed call), so the floor is measured wherever it is judged.
    """
    return device == "cpu" and (preset == "bench" or loop_seconds >= CV_MIN_LOOP_SECONDS)


@dataclass(frozen=True)
class _SlowRound:
    """A cell's slowest timed round and what the guest saw during it."""

    index: int
    rounds: int
    over: float  # its loop time over the cell's median, as a share
    other_cpu_seconds: float | None
    faults: int | None
    usual_faults: int | None  # the median round's
    excess_seconds: float  # its loop time over the cell's median
    collection_excess_seconds: float  # its collector's seconds inside the loop over the median round's

    @property
    def collected(self) -> bool:
        """The cell's own collector (R's; Python's is off in the loop) took most of what made the round slow."""
        return self.excess_seconds > 0 and self.collection_excess_seconds >= COLLECTION_MIN_SHARE * self.excess_seconds

    @property
    def others_ran(self) -> bool:
        return self.other_cpu_seconds is not None and self.other_cpu_seconds >= OTHER_CPU_MIN_SECONDS

    @property
    def faulted(self) -> bool:
        return self.faults is not None and self.usual_faults is not None and self.faults > max(FAULTS_MIN_EXCESS, 2 * self.usual_faults)

    def described(self) -> str:
        """What ran beside it, so a miss says whose it is (empty for a result without each round's load)."""
        said = f"its slowest round ({self.index + 1} of {self.rounds}) ran {self.over:.1%} over the median"
        if self.collected:
            return (f"{said} with {self.collection_excess_seconds:.3f} s more garbage collection inside the loop than the "
                    "median round: its frontend's collector (the cell's own); ")
        if self.faults is None or self.other_cpu_seconds is None:
            return ""
        if self.others_ran:
            return f"{said} while other processes took {self.other_cpu_seconds:.2f} s of CPU (the machine's, not the cell's); "
        if self.faulted:
            return (f"{said} with {self.faults} page faults (the median round {self.usual_faults}): its allocator gave memory "
                    "back to the system and took it again (the cell's own); ")
        return (f"{said} with no other process running and too few page faults to matter ({self.faults}, the median round "
                f"{self.usual_faults}): nothing the guest can see, so the host's (a neighbour VM, the CPU's frequency) or the "
                "cell's own irregular work; ")


def _slow_rounds(t: Timing) -> list[_SlowRound]:
    """A cell's timed rounds, slowest first, with what the guest saw during each."""
    loops, other, faults = t.samples.loop_seconds, t.samples.other_cpu_seconds, t.samples.page_faults
    loaded = len(other) == len(loops) == len(faults)
    known = sorted(f for f in faults if f is not None) if loaded else []
    usual = known[len(known) // 2] if known else None
    collected = t.samples.gc_seconds if len(t.samples.gc_seconds) == len(loops) else (0.0,) * len(loops)
    usual_collection = float(np.median(collected))
    order = sorted(range(len(loops)), key=lambda k: (-loops[k], k))
    return [_SlowRound(k, len(loops), loops[k] / t.loop.median - 1, other[k] if loaded else None, faults[k] if loaded else None,
                       usual, loops[k] - t.loop.median, collected[k] - usual_collection) for k in order]


@dataclass(frozen=True)
class _Machine:
    """What the machine alone did to the fixed floor loop while this run's cells were timed (``None`` where no cell has a
    floor of 3+ rounds)."""

    #: The median of the cells' floor CVs. Each cell's floor is 20 rounds (at ``bench``), too few to estimate the machine's
    #: noise well: in one idle run the cells' floors ranged 0.1-15 %. Interleaved, every cell's rounds span the same
    #: minutes, and back to back the run's floors are its minutes' noise; so a cell is judged against the larger of its
    #: own floor and this.
    median_floor: float | None
    #: How far the machine slowed its slowest floor round, over that cell's median floor round.
    slowest: float | None
    #: The noisiest floor of the run without its slowest rounds (:func:`_trimmed_cv`): that CV and whose floor it was. The
    #: machine's own loop was this irregular over a cell's rounds in these minutes, so a cell no noisier than it, trimmed
    #: alike, is missed only by the machine's noise.
    noisiest: tuple[float, str] | None

    @classmethod
    def of(cls, result: MatrixResult) -> _Machine:
        floors = [(c.id, c.timing) for c in result.cells if c.ok and c.timing is not None
                  and len(c.timing.samples.floor_seconds) >= MIN_ROUNDS_FOR_SPREAD]
        cvs = [t.floor.cv for _, t in floors if t.floor is not None and t.floor.cv is not None]
        overs = [max(f) / float(np.median(f)) - 1 for f in (t.samples.floor_seconds for _, t in floors)]
        trimmed = [(cv, cell_id) for cell_id, t in floors if (cv := _trimmed_cv(t.samples.floor_seconds)) is not None]
        return cls(float(np.median(cvs)) if cvs else None, max(overs) if overs else None, max(trimmed) if trimmed else None)


def _set_aside_at_most(rounds: int) -> int:
    """How many of ``rounds`` timed rounds may be set aside: one in every :data:`SET_ASIDE_EVERY` (at least one), leaving
    enough for a spread."""
    return max(0, min(max(1, rounds // SET_ASIDE_EVERY), rounds - MIN_ROUNDS_FOR_SPREAD))


def _trimmed_cv(seconds: Sequence[float]) -> float | None:
    """The CV of ``seconds`` without its slowest rounds, as many as may be set aside: the spread a cell's and a floor's
    rounds are compared by, so a single stall weighs on neither."""
    keep = sorted(seconds)[:len(seconds) - _set_aside_at_most(len(seconds))]
    return summarize(keep).cv if keep else None


def check_spread(result: MatrixResult) -> list[TargetCheck]:
    """The spread target of every cell it checks (:func:`spread_checked`)."""
    machine = _Machine.of(result)
    return [_check(cell, cell.timing, machine) for cell in result.cells if cell.ok and cell.timing is not None
            and spread_checked(cell.device, result.spec.preset, cell.timing.loop.median)]


def _check(cell: CellResult, t: Timing, machine: _Machine) -> TargetCheck:
    loop, cv = t.loop, t.loop.cv
    floor = t.floor.cv if t.floor is not None else None
    noise = max((f for f in (floor, machine.median_floor) if f is not None), default=None)
    bound = CV_MAX if noise is None else max(CV_MAX, FLOOR_FACTOR * noise)
    target = (f"CV ≤ max({CV_MAX:.0%}, {FLOOR_FACTOR:g}× the machine's noise floor, the cell's or the run's median) (CPU "
              "cells of the bench preset, "
              f"or of ≥ {CV_MIN_LOOP_SECONDS:g} s), one round in {SET_ASIDE_EVERY} set aside where the run shows the machine slowed it")
    if cv is None:
        return TargetCheck(_NAME, cell.id, target, f"{loop.n} round(s)", False,
                           "too few timed rounds to measure a spread: raise --rounds or --max-seconds")
    run = f" (the run's median {machine.median_floor:.2%})" if machine.median_floor is not None and noise != floor else ""
    judged = (f"floor {floor:.2%}{run} → bound {bound:.2%}" if floor is not None else
              f"floor not measured{run} → bound {bound:.2%}")
    measured = f"CV {cv:.2%} over {loop.n} rounds; {judged}"
    if cv <= bound:
        return TargetCheck(_NAME, cell.id, target, measured, True)
    slow = _slow_rounds(t)
    set_aside = _set_aside(t, slow, bound, machine)
    if set_aside is not None and set_aside.rest <= bound:
        return TargetCheck(_NAME, cell.id, target, f"CV {cv:.2%} over {loop.n} rounds, {set_aside.rest:.2%} without "
                           f"{set_aside.described()}; {judged}", True)
    gc = t.gc_seconds
    beyond = "the floor-based bound" if bound > CV_MAX else f"the {CV_MAX:.0%} bound"
    trimmed = _trimmed_cv(t.samples.loop_seconds)
    own = any(r.collected or r.faulted for r in slow[:_set_aside_at_most(loop.n)])  # never trim the cell's own slow rounds
    by_machine = not own and machine.noisiest is not None and trimmed is not None and trimmed <= machine.noisiest[0]
    why = (
        (f"missed only by the machine's noise: without its slowest {_set_aside_at_most(loop.n)} round(s) its CV is "
         f"{trimmed:.2%}, no more than the run's noisiest floor's without its own ({machine.noisiest[0]:.2%}, "
         f"{machine.noisiest[1]}'s), so the machine's own loop was at least as irregular in these minutes; "
         if by_machine and machine.noisiest is not None and trimmed is not None else "")
        + f"missed by {(cv - bound) * 100:.2f} points beyond {beyond}: rounds ranged {loop.min:.4g}–{loop.max:.4g} s; "
        + (f"garbage collection took up to {gc:.3g} s inside the loop; " if gc > 0 else "")
        + (f"this cell's loop is only {loop.median:.2g} s, shorter than the ~1 s the target assumes; "
           if loop.median < CV_MIN_LOOP_SECONDS else "")
        + slow[0].described()
        + (f"without {set_aside.described()} the CV is {set_aside.rest:.2%}; " if set_aside is not None else "")
        + (f"the machine's own noise was {floor:.2%} (its calibration loop, timed after each round, so a single slow round "
           "escapes it)"
           if floor is not None else
           "the floor was not measured (a result from before it was, or its calibration failed: the run's log says why), so "
           "the machine's own noise (other processes, frequency changes) cannot be told apart: time on an idle machine, "
           "with --interleave")
    )
    return TargetCheck(_NAME, cell.id, target, measured, False, why, machine_noise=by_machine)


@dataclass(frozen=True)
class _SetAside:
    """The slow rounds the run pins on the machine, each with why, and the CV of the rounds left."""

    rounds: tuple[tuple[_SlowRound, str], ...]
    rest: float

    def described(self) -> str:
        said = [f"{r.index + 1} ({r.over:.1%} slow: {because})" for r, because in self.rounds]
        return (f"round {said[0]}" if len(said) == 1 else "rounds " + ", ".join(said[:-1]) + f" and {said[-1]}")


def _set_aside(t: Timing, slow: list[_SlowRound], bound: float, machine: _Machine) -> _SetAside | None:
    """The slowest rounds the run pins on the machine, one in every :data:`SET_ASIDE_EVERY` at most, slowest first and
    stopping at the first it does not (or once the rest meet ``bound``), with the CV of the rest; ``None`` where not even
    the slowest is pinned: the worker's own page faults caused it (or the result has no load to tell), or nothing ran
    beside it and no floor round of this run was slowed as much."""
    loops = t.samples.loop_seconds
    allowed = _set_aside_at_most(len(loops))
    taken: list[tuple[_SlowRound, str]] = []
    rest: float | None = None
    for round_ in slow[:allowed]:
        because = _machines(round_, machine)
        if because is None:
            break
        taken.append((round_, because))
        left = {r.index for r, _ in taken}
        rest = summarize([x for i, x in enumerate(loops) if i not in left]).cv
        if rest is not None and rest <= bound:
            break
    if not taken or rest is None:
        return None
    return _SetAside(tuple(taken), rest)


def _machines(round_: _SlowRound, machine: _Machine) -> str | None:
    """Why ``round_`` was the machine's doing, or ``None`` where the run does not show it."""
    if round_.collected or round_.faults is None or round_.faulted:
        return None  # the cell's own collector or page faults, or a result without each round's load
    if round_.others_ran:
        return f"other processes took {round_.other_cpu_seconds:.2f} s of CPU during it"
    if machine.slowest is not None and round_.over <= machine.slowest:
        return f"the machine slowed a floor round of this run by {machine.slowest:.1%}"
    return None
