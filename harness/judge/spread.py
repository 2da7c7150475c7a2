"""The round-to-round spread target: a cell's loop times as quiet as the machine they ran on (docs/timing.md).

A cell's spread mixes its own irregularity with the machine's. The machine's is measured twice over in the same run:
by the noise floor, a calibration loop timed after each of the cell's rounds (:mod:`harness.frontends.calibration`),
and by each round's load, what else the guest saw running during it (:mod:`harness.run.machine_load`). The floor sets
the bound. A single slow round escapes the floor, because the floor is timed after it, so one round may be set aside
where the run shows the machine caused it: other processes took CPU during it, or the machine slowed a floor round of
this run at least as much, and the worker's own page faults did not. The rest of the cell's rounds must then meet the
bound. One round only: two machine hiccups in one cell's 10 rounds is rare enough to say the cell is noisy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.model.result import CellResult, MatrixResult
from harness.model.timing import MIN_ROUNDS_FOR_SPREAD, Timing, summarize
from harness.model.verdicts import TargetCheck

__all__ = [
    "CV_MAX",
    "CV_MIN_LOOP_SECONDS",
    "FAULTS_MIN_EXCESS",
    "FLOOR_FACTOR",
    "OTHER_CPU_MIN_SECONDS",
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
#: timed round in the same worker: :mod:`harness.frontends.calibration`): the bound is the larger of CV_MAX and this
#: many times the floor's CV. A cell's spread cannot be quieter than the machine's at that moment; 1.5 times allows for the
#: cell's own work (allocations, many small ops, R's interpreter between them) being less regular than a matmul loop.
FLOOR_FACTOR = 1.5
#: Other processes' CPU time during a round that names them as its cause: two of /proc's 10 ms ticks, above the tick
#: rounding of one reading (an idle 2-vCPU VM shows 0.00-0.02 s per ``bench`` round).
OTHER_CPU_MIN_SECONDS = 0.02
#: Page faults a slow round must take beyond twice the median round's to name the allocator: 2000 faults cost about 5 ms
#: (about 2.5 µs each here), 1.5 % of a 0.34 s ``bench`` round.
FAULTS_MIN_EXCESS = 2000

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

    @property
    def others_ran(self) -> bool:
        return self.other_cpu_seconds is not None and self.other_cpu_seconds >= OTHER_CPU_MIN_SECONDS

    @property
    def faulted(self) -> bool:
        return self.faults is not None and self.usual_faults is not None and self.faults > max(FAULTS_MIN_EXCESS, 2 * self.usual_faults)

    def described(self) -> str:
        """What ran beside it, so a miss says whose it is (empty for a result without each round's load)."""
        said = f"its slowest round ({self.index + 1} of {self.rounds}) ran {self.over:.1%} over the median"
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


def _slowest_round(t: Timing) -> _SlowRound:
    loops, other, faults = t.samples.loop_seconds, t.samples.other_cpu_seconds, t.samples.page_faults
    k = max(range(len(loops)), key=loops.__getitem__)
    loaded = len(other) == len(loops) == len(faults)
    known = sorted(f for f in faults if f is not None) if loaded else []
    return _SlowRound(k, len(loops), loops[k] / t.loop.median - 1, other[k] if loaded else None, faults[k] if loaded else None,
                      known[len(known) // 2] if known else None)


@dataclass(frozen=True)
class _Machine:
    """What the machine alone did to the fixed floor loop while this run's cells were timed (``None`` where no cell has a
    floor of 3+ rounds)."""

    #: The median of the cells' floor CVs. Each cell's floor is 10 rounds (at ``bench``), too few to estimate the machine's
    #: noise well: in one idle run the cells' floors ranged 0.1-15 %. Interleaved, every cell's rounds span the same
    #: minutes, and back to back the run's floors are its minutes' noise; so a cell is judged against the larger of its
    #: own floor and this.
    median_floor: float | None
    #: How far the machine slowed its slowest floor round, over that cell's median floor round.
    slowest: float | None

    @classmethod
    def of(cls, result: MatrixResult) -> _Machine:
        floors = [c.timing for c in result.cells if c.ok and c.timing is not None
                  and len(c.timing.samples.floor_seconds) >= MIN_ROUNDS_FOR_SPREAD]
        cvs = [t.floor.cv for t in floors if t.floor is not None and t.floor.cv is not None]
        overs = [max(f) / float(np.median(f)) - 1 for f in (t.samples.floor_seconds for t in floors)]
        return cls(float(np.median(cvs)) if cvs else None, max(overs) if overs else None)


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
              f"or of ≥ {CV_MIN_LOOP_SECONDS:g} s), one round set aside where the run shows the machine slowed it")
    if cv is None:
        return TargetCheck(_NAME, cell.id, target, f"{loop.n} round(s)", False,
                           "too few timed rounds to measure a spread: raise --rounds or --max-seconds")
    run = f" (the run's median {machine.median_floor:.2%})" if machine.median_floor is not None and noise != floor else ""
    judged = (f"floor {floor:.2%}{run} → bound {bound:.2%}" if floor is not None else
              f"floor not measured{run} → bound {bound:.2%}")
    measured = f"CV {cv:.2%} over {loop.n} rounds; {judged}"
    if cv <= bound:
        return TargetCheck(_NAME, cell.id, target, measured, True)
    slow = _slowest_round(t)
    set_aside = _set_aside(t, slow, machine)
    if set_aside is not None:
        rest, because = set_aside
        if rest <= bound:
            return TargetCheck(_NAME, cell.id, target, f"CV {cv:.2%} over {loop.n} rounds, {rest:.2%} without round "
                               f"{slow.index + 1} ({slow.over:.1%} slow: {because}); {judged}", True)
    gc = t.gc_seconds
    beyond = "the floor-based bound" if bound > CV_MAX else f"the {CV_MAX:.0%} bound"
    why = (
        f"missed by {(cv - bound) * 100:.2f} points beyond {beyond}: rounds ranged {loop.min:.4g}–{loop.max:.4g} s; "
        + (f"garbage collection took up to {gc:.3g} s inside the loop; " if gc > 0 else "")
        + (f"this cell's loop is only {loop.median:.2g} s, shorter than the ~1 s the target assumes; "
           if loop.median < CV_MIN_LOOP_SECONDS else "")
        + slow.described()
        + (f"without it the CV is {set_aside[0]:.2%}; " if set_aside is not None else "")
        + (f"the machine's own noise was {floor:.2%} (its calibration loop, timed after each round, so a single slow round "
           "escapes it)"
           if floor is not None else
           "the floor was not measured (a result from before it was, or its calibration failed: the run's log says why), so "
           "the machine's own noise (other processes, frequency changes) cannot be told apart: time on an idle machine, "
           "with --interleave")
    )
    return TargetCheck(_NAME, cell.id, target, measured, False, why)


def _set_aside(t: Timing, slow: _SlowRound, machine: _Machine) -> tuple[float, str] | None:
    """The CV of the other rounds and why the slowest is the machine's, or ``None`` where the run does not show it: the
    worker's own page faults caused it (or the result has no load to tell), or nothing ran beside it and no floor round of
    this run was slowed as much."""
    loops = t.samples.loop_seconds
    if len(loops) - 1 < MIN_ROUNDS_FOR_SPREAD or slow.faults is None or slow.faulted:
        return None  # too few rounds left, a result without each round's load, or the cell's own page faults
    if slow.others_ran:
        because = f"other processes took {slow.other_cpu_seconds:.2f} s of CPU during it"
    elif machine.slowest is not None and slow.over <= machine.slowest:
        because = f"the machine slowed a floor round of this run by {machine.slowest:.1%}"
    else:
        return None
    rest = summarize([x for i, x in enumerate(loops) if i != slow.index]).cv
    return (rest, because) if rest is not None else None
