"""A loaded result's derived numbers, recomputed from their inputs: one that disagrees is refused, naming its field.

Every verdict is judged again on load (:mod:`harness.judge.assess`), but the views show many stored numbers as
they are: a cell's final loss, its timing statistics, its share of the measured peak, its time against the
default, its distance from float64. A file edited by hand (or merged, or written by a broken tool) can hold a ``final_loss``
that is not the last loss, a share of peak of 5.0 (shown as 500 %), negative timings (which "meet" the
overhead figure), a 1e-9 TFLOP/s peak. Each of these would be printed as if measured.

One rule, applied on load (:func:`harness.store.result_file.load_result`) and nowhere else: every derived number is
recomputed from its inputs with the same function the run used (:func:`harness.model.timing.RoundLog.summary`,
:func:`harness.model.cell_efficiency.cell_efficiency`, :func:`harness.model.result.with_time_vs_default`,
:func:`harness.judge.record_check.judge_record`, :func:`harness.judge.reference.relative_loss_errors`) and must agree with
what is stored; an input (a timed round, a loss, a peak) must be a number that can be measured (finite,
not negative, a peak above :data:`MIN_PEAK_TFLOPS`). The first that does not is refused in one line::

    run.json: cells[3].record.final_loss is 1.5 but its last loss is 1.047628; a result edited by hand? ...

Verdicts are not checked here: they are never read back, only judged again from these numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NoReturn

from harness.contract.modes import SCRIPTS
from harness.errors import ResultError
from harness.judge.cells import reference_losses_for
from harness.judge.divergence import trace_cells
from harness.judge.record_check import describe_loss, expected_injections, judge_record
from harness.judge.reference import largest_loss_error, reference_skip_reason, relative_loss_errors
from harness.model.cell_efficiency import cell_efficiency
from harness.model.efficiency import Efficiency
from harness.model.pair_trace import PairTrace, PointDifference
from harness.model.record import RECORD_SCHEMA_VERSION
from harness.model.result import CellResult, MatrixResult, Peaks, Status, with_time_vs_default
from harness.model.timing import RoundLog, Timing
from harness.model.verdicts import finite_or_none
from harness.worker_side.tensor_bytes import DTYPES, encode, ulp_distance
from harness.workload.features import FEATURES, NO_FEATURE
from harness.workload.installations import LANGUAGES
from harness.workload.optimizers import OPTIMIZERS

__all__ = ["MAX_PEAK_TFLOPS", "MIN_PEAK_TFLOPS", "check_consistency"]

#: A matmul peak below this (0.1 GFLOP/s) was not measured on any machine torch runs on: a CPU core of
#: the last twenty years does tens of GFLOP/s in float32. Shares of such a "peak" would be meaningless.
MIN_PEAK_TFLOPS = 1e-4
#: … nor one above this (100 PFLOP/s): an H100's densest format is about 2 PFLOP/s.
MAX_PEAK_TFLOPS = 1e5
#: How close a stored number must be to its recomputed value (the same arithmetic on the same inputs,
#: so only a JSON round trip or a schema upgrade's 1 / (1 / x) can move it).
_REL_TOL = 1e-9

_FIX = "a result edited by hand? Re-run `python -m harness run --json`, or restore the file"
#: The axes of a cell that name a row of a table (the script's modes are checked against the script beside them).
_AXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("script", tuple(SCRIPTS)), ("optimizer", tuple(OPTIMIZERS)), ("feature", (NO_FEATURE, *FEATURES)),
)


def check_consistency(result: MatrixResult, source: str) -> None:
    """Refuse ``result`` if any derived number disagrees with its inputs, or an input cannot have been measured.

    Raises:
        ResultError: one line: ``source``, the field (``cells[3].record.final_loss``), what it is and what it should be.
    """
    _Checker(result, source).check()


class _Checker:
    """Walks one result; ``refuse`` raises at the first disagreement."""

    def __init__(self, result: MatrixResult, source: str) -> None:
        self.result = result
        self.source = source

    def refuse(self, where: str, got: object, why: str) -> NoReturn:
        raise ResultError(f"{self.source}: {where} is {_shown(got)} but {why}; {_FIX}.")

    def number(self, where: str, value: object, *, positive: bool = False, optional: bool = False) -> float | None:
        """``value`` as a finite number ≥ 0 (> 0 if ``positive``), or ``None`` if ``optional``; refused otherwise."""
        if value is None and optional:
            return None
        if not _is_number(value):
            self.refuse(where, value, "it must be a number")
        number = float(value)  # type: ignore[arg-type]
        if not math.isfinite(number):
            self.refuse(where, value, "it must be finite")
        if number < 0 or (positive and number == 0):
            self.refuse(where, value, "it must be " + ("above 0" if positive else "0 or more"))
        return number

    def same(self, where: str, stored: object, recomputed: object, what: str) -> None:
        """Refuse ``stored`` unless it equals ``recomputed`` (``what`` says how that was found)."""
        if not _agree(stored, recomputed):
            self.refuse(where, stored, f"{what} is {_shown(recomputed)}")

    def check(self) -> None:
        result = self.result
        # The spec is what every verdict is judged under: its stored digest is derived again, so an edited spec (lr, an
        # optimizer's arguments) is refused rather than reported as what ran.
        if result.spec.digest() != result.spec_digest:
            self.refuse("spec", "edited", f"it hashes to {result.spec.digest()}, not the spec_digest {result.spec_digest} its run "
                        "stored (the spec was changed after the run)")
        for k, source in enumerate(result.sources):
            if source.get("spec") is not None and source.get("spec_digest") is not None \
                    and result.run_of_source(source).spec.digest() != source["spec_digest"]:
                self.refuse(f"sources[{k}].spec", "edited", f"it does not hash to its spec_digest {source['spec_digest']}")
        self.number("wall_seconds", result.wall_seconds)
        self.number("reference_seconds", result.reference_seconds, optional=True)
        self.peaks("peaks", result.peaks)
        for k, source in enumerate(result.sources):
            if source.get("peaks") is not None:
                self.peaks(f"sources[{k}].peaks", result.run_of_source(source).peaks)
        self.reference()
        seen: dict[str, int] = {}
        weights: dict[str, int] = {}
        for k, cell in enumerate(result.cells):
            where = f"cells[{k}]"
            if cell.id in seen:
                self.refuse(f"{where}.id", cell.id, f"cells[{seen[cell.id]}] is that cell already (a result holds each cell once)")
            seen[cell.id] = k
            self.cell(where, cell)
            path = cell.record.weights_path if cell.record is not None else None
            if path is not None:
                if path in weights:
                    self.refuse(f"{where}.record.weights_path", path, f"cells[{weights[path]}] names that file already (each cell "
                                "has its own weights: two cells reading one file would be judged identical)")
                weights[path] = k
        self.skips()
        for paired in sorted({result.run_of(c).protocol.interleave for c in result.cells}):
            recomputed = with_time_vs_default(result.cells, paired=paired)
            for k, (cell, again) in enumerate(zip(result.cells, recomputed, strict=True)):
                if result.run_of(cell).protocol.interleave == paired:
                    self.time_vs_default(f"cells[{k}].time_vs_default", cell, again)
        for k, trace in enumerate(result.traces):
            self.trace(f"traces[{k}]", trace)

    def skips(self) -> None:
        """A cell is ``skipped`` because its frontend cannot run here (R torch not installed), so in one run a frontend that
        skipped one cell skipped every cell it did not refuse: a failed cell edited to ``skipped`` read as a pass."""
        ran: dict[tuple[str, str], int] = {}
        skipped: dict[tuple[str, str], int] = {}
        for k, cell in enumerate(self.result.cells):
            source = self.result.run_of(cell).source
            key = (cell.frontend, str(source.get("file")) if source is not None else "")
            if cell.status is Status.SKIPPED:
                skipped.setdefault(key, k)
            elif cell.status is not Status.UNSUPPORTED:
                ran.setdefault(key, k)
        for key, k in skipped.items():
            if key in ran:
                j = ran[key]
                self.refuse(f"cells[{k}].status", str(Status.SKIPPED), f"cells[{j}] ({self.result.cells[j].id}), of the same "
                            f"frontend in the same run, is {self.result.cells[j].status}: a frontend that cannot run skips every cell")

    def trace(self, where: str, trace: PairTrace) -> None:
        """A stored pair trace is one its cells' traces give (the same first difference), and its distances are possible:
        a trace believed as stored could make any difference look like an entry's (``max_distance: -5`` read "-5 ULP")."""
        cells = {c.frontend: c for c in self.result.cells if c.pair == trace.pair}
        if len(set(trace.frontends)) != 2 or not all(name in cells for name in trace.frontends):
            self.refuse(f"{where}.frontends", list(trace.frontends), f"two frontends of pair {trace.pair!r} in this result")
        a, b = (cells[name] for name in trace.frontends)
        if trace.points[0] < 0 or trace.points[1] < 0 or not 0 <= trace.identical_points <= min(trace.points):
            self.refuse(f"{where}.identical_points", trace.identical_points, f"a count from 0 to its points {list(trace.points)}")
        first = trace.first_difference
        if a.trace is not None and b.trace is not None:
            again = trace_cells(a, b)
            found = again.first_difference
            if (first is None) != (found is None) or (first is not None and found is not None and
                                                      (first.step, first.point, first.kind) != (found.step, found.point, found.kind)):
                shown = None if found is None else f"step {found.step}, {found.point} ({found.kind})"
                self.refuse(f"{where}.first_difference", None if first is None else f"step {first.step}, {first.point}",
                            f"its cells' stored traces first part at {shown}")
        if first is not None:
            self.difference(f"{where}.first_difference", first)
        if trace.detail is not None:
            if first is None or (trace.detail.step, trace.detail.point) != (first.step, first.point):
                self.refuse(f"{where}.detail", f"step {trace.detail.step}, {trace.detail.point}", "a measurement of its first difference")
            self.difference(f"{where}.detail", trace.detail)

    def difference(self, where: str, found: PointDifference) -> None:
        """A measured difference is a possible one: counts within the tensor, the distance the worst values give."""
        if found.elements is not None and found.shapes[0] is not None and found.elements != math.prod(found.shapes[0]):
            self.refuse(f"{where}.elements", found.elements, f"the number of elements of its shape {list(found.shapes[0])}")
        if found.differing is not None and (found.elements is None or not 0 < found.differing <= found.elements):
            self.refuse(f"{where}.differing", found.differing, f"a count from 1 to its {found.elements} elements")
        if found.worst_index is not None and found.shapes[0] is not None and (
                len(found.worst_index) != len(found.shapes[0]) or any(not 0 <= i < n for i, n in zip(found.worst_index, found.shapes[0],
                                                                                                     strict=True))):
            self.refuse(f"{where}.worst_index", list(found.worst_index), f"an index into its shape {list(found.shapes[0])}")
        if found.max_distance is None:
            return
        if found.max_distance < 0 or found.worst_values is None or found.dtypes[0] not in DTYPES:
            self.refuse(f"{where}.max_distance", found.max_distance, "a distance >= 0 with the two worst values it was measured at")
        dtype = str(found.dtypes[0])
        values = found.worst_values
        assert values is not None
        again = int(ulp_distance(dtype, encode(dtype, [values[0]]), encode(dtype, [values[1]]))[0])
        if again != found.max_distance:
            self.refuse(f"{where}.max_distance", found.max_distance, f"the distance of its worst values {values[0]!r} and {values[1]!r} "
                        f"in {dtype} is {again}")

    def _reference_field(self, source: Mapping[str, object] | None) -> str:
        """Where the reference a cell is judged against is stored: a merged input's entry of ``sources``, or the result's."""
        if source is not None and source.get("reference") is not None:
            return f"sources[{next(k for k, s in enumerate(self.result.sources) if s is source)}].reference"
        return "reference"

    def reference(self) -> None:
        """Every float64 trajectory stored is one loss per step of the run (a cell's losses are compared step by step)."""
        reference, steps = self.result.reference, self.result.spec.steps
        stored = [(f"reference.trajectories[{k}].losses", t.get("losses")) for k, t in enumerate(reference.trajectories)]
        for where, losses in stored:
            if losses is not None and len(losses) != steps:
                self.refuse(where, _Said(f"{len(losses)} losses"), f"the spec runs {steps} steps")
            for i, value in enumerate(losses or ()):
                if value is not None and not _is_number(value):
                    self.refuse(f"{where}[{i}]", value, "it must be a number")

    def peaks(self, where_peaks: str, peaks: Peaks) -> None:
        for dtype, peak in peaks.by_dtype.items():
            where = f"{where_peaks}.by_dtype.{dtype}"
            if peak is None:
                continue
            if not isinstance(peak, Mapping):
                self.refuse(where, peak, "it must be an object (the measured peak) or null")
            tflops = self.number(f"{where}.tflops", peak.get("tflops"), positive=True)
            assert tflops is not None
            if not MIN_PEAK_TFLOPS <= tflops <= MAX_PEAK_TFLOPS:
                self.refuse(f"{where}.tflops", tflops, f"a measured matmul peak is between {MIN_PEAK_TFLOPS:g} and "
                            f"{MAX_PEAK_TFLOPS:g} TFLOP/s")
            samples = peak.get("samples_tflops")
            if samples is not None:
                rates = self.numbers(f"{where}.samples_tflops", samples, positive=True)
                self.same(f"{where}.tflops", tflops, max(rates, default=None), "the best of its samples_tflops")

    def numbers(self, where: str, values: object, *, positive: bool = False) -> list[float]:
        if not isinstance(values, (list, tuple)):
            self.refuse(where, values, "it must be a list of numbers")
        return [v for i, value in enumerate(values) if (v := self.number(f"{where}[{i}]", value, positive=positive)) is not None]

    def cell(self, where: str, cell: CellResult) -> None:
        run = self.result.run_of(cell)
        spec = run.spec
        # Each axis of a cell names a row of its table (a model too, once it is a row: one more entry in _AXES). A name no
        # row has is never judged (no reference, no pair partner) and read "not judged": a result edited by hand.
        for axis, rows in _AXES:
            name = getattr(cell.cell, axis)
            if name not in rows:
                self.refuse(f"{where}.{axis}", name, f"it must be one of the {axis}s {', '.join(rows)}")
        if cell.mode not in SCRIPTS[cell.script].mode_names:
            self.refuse(f"{where}.mode", cell.mode, f"script {cell.script!r} runs the modes {', '.join(SCRIPTS[cell.script].mode_names)}")
        # A merged result's cell ran on its input's device (harness/store/merge.py keeps each input's spec); a merge
        # written before inputs kept their spec lists the devices its inputs ran on.
        devices = {spec.device}
        if run.source is not None and run.source.get("spec") is None:
            devices |= {str(d) for source in self.result.sources for d in source.get("devices") or ()}
        if cell.device not in devices:
            self.refuse(f"{where}.device", cell.device, f"the run's spec.device is {spec.device!r}")
        installation = cell.installation or {}
        if installation and installation.get("name") != cell.frontend:
            self.refuse(f"{where}.installation.name", installation.get("name"), f"the cell's frontend is {cell.frontend!r}")
        if cell.frontend in LANGUAGES and cell.language != cell.frontend:
            self.refuse(f"{where}.installation.language", cell.language,
                        f"the cell's frontend is {cell.frontend!r}, the name of that language's own installations")
        self.number(f"{where}.wall_seconds", cell.wall_seconds, optional=True)
        if cell.record is not None:
            self.record(where, cell)
        elif cell.status is Status.OK:
            self.refuse(f"{where}.record", None, "the cell's status is ok")
        if cell.timing is not None:
            self.timing(f"{where}.timing", cell.timing)
        if cell.efficiency is not None:
            self.efficiency(f"{where}.efficiency", cell, cell.efficiency)
        if cell.memory is not None:
            for name in ("peak_rss_bytes", "rss_before_bytes", "cuda_peak_bytes"):
                self.number(f"{where}.memory.{name}", getattr(cell.memory, name), optional=True)
        self.distance(where, cell)

    def record(self, where: str, cell: CellResult) -> None:
        record, spec = cell.record, self.result.run_of(cell).spec
        assert record is not None
        # A record names its language (``frontend``: python or r); the cell its installation, whose language must be it.
        language = str(cell.installation.get("language")) if cell.installation else cell.frontend
        if record.frontend != language:
            self.refuse(f"{where}.record.frontend", record.frontend, f"the cell's frontend {cell.frontend!r} runs {language!r}")
        for name in ("script", "mode", "optimizer", "device"):
            if getattr(record, name) != getattr(cell, name):
                self.refuse(f"{where}.record.{name}", getattr(record, name), f"the cell's {name} is {getattr(cell, name)!r}")
        losses = list(record.losses)
        if cell.status is Status.OK:
            # A stored record keeps the version its script wrote (older results hold older records): its content
            # is judged, not its version, which only a script's fresh answer must match.
            # A record from before version 5 did not say where it injected (every script then injected where asked).
            injected = expected_injections(spec, cell.cell) if record.injected_steps is None else list(record.injected_steps)
            fresh = {"schema_version": RECORD_SCHEMA_VERSION, "optimizer": record.optimizer, "injected_steps": injected}
            status, reason = judge_record(record.to_json() | fresh, spec, cell.cell)
            if status is not Status.OK:
                step = next((i for i, v in enumerate(losses) if not _finite(v)), None)
                if status is Status.NUMERICAL_FAILURE and step is not None:
                    self.refuse(f"{where}.record.losses[{step}]", losses[step], f"the cell's status is ok ({reason})")
                self.refuse(f"{where}.record", _Said(f"a record with {len(losses)} losses"), f"the cell's status is ok ({reason})")
            skipped = record.skipped_step_indices
            for step, value in enumerate(losses):
                if cell.cell.properties.skips_steps and not _finite(value) and step not in skipped:
                    self.refuse(f"{where}.record.losses[{step}]", value,
                                f"step {step} was not skipped: a scaler skips every step whose loss is not finite")
        last = losses[-1] if losses else None
        if not _agree(record.final_loss, last):
            self.refuse(f"{where}.record.final_loss", record.final_loss, f"its last loss is {describe_loss(last)}")
        if record.skipped is not None:
            if len(record.skipped) != len(losses):
                self.refuse(f"{where}.record.skipped", _Said(f"{len(record.skipped)} steps"), f"the record has {len(losses)} losses")
            self.same(f"{where}.record.skipped_steps", record.skipped_steps, sum(bool(s) for s in record.skipped),
                      "the number of true in its skipped")
        if record.loss_scale is not None and len(record.loss_scale) != len(losses):
            self.refuse(f"{where}.record.loss_scale", _Said(f"{len(record.loss_scale)} steps"), f"the record has {len(losses)} losses")
        for name in ("seconds_total", "seconds_workload", "gc_seconds"):
            self.number(f"{where}.record.{name}", getattr(record, name))
        self.numbers(f"{where}.record.seconds_per_epoch", record.seconds_per_epoch)

    def timing(self, where: str, timing: Timing) -> None:
        samples = timing.samples
        rounds = [self.numbers(f"{where}.samples.{name}", getattr(samples, name))
                  for name in ("call_seconds", "loop_seconds", "workload_seconds", "gc_seconds")]
        for i, rss in enumerate(samples.peak_rss_bytes):
            self.number(f"{where}.samples.peak_rss_bytes[{i}]", rss, optional=True)
        if len({len(r) for r in rounds}) != 1 or not rounds[0]:
            self.refuse(f"{where}.samples", _Said(f"{[len(r) for r in rounds]} rounds"), "every clock has one sample per timed round")
        for name in ("other_cpu_seconds", "page_faults"):  # each round's load: none in older results, else one per round
            load = getattr(samples, name)
            if load and len(load) != len(rounds[0]):
                self.refuse(f"{where}.samples.{name}", _Said(f"{len(load)} rounds"), f"its clocks have {len(rounds[0])} rounds")
            for i, value in enumerate(load):
                self.number(f"{where}.samples.{name}[{i}]", value, optional=True)
        log = RoundLog(warmup_calls=timing.warmup_calls, differing_rounds=timing.differing_rounds)
        for call, loop, workload, gc in zip(*rounds, strict=True):
            log.add(call, {"seconds_total": loop, "seconds_workload": workload, "gc_seconds": gc}, None, True)
        alone = [self.numbers(f"{where}.samples.{name}", getattr(samples, name))
                 for name in ("alone_call_seconds", "alone_workload_seconds")]
        if len(alone[0]) != len(alone[1]):
            self.refuse(f"{where}.samples.alone_call_seconds", _Said(f"{len(alone[0])} rounds"),
                        f"alone_workload_seconds has {len(alone[1])}")
        for call, workload in zip(*alone, strict=True):
            log.add_alone(call, {"seconds_workload": workload}, True)
        log.differing_rounds = timing.differing_rounds
        again = log.summary()
        self.same(f"{where}.rounds", timing.rounds, again.rounds, "the number of timed rounds in its samples")
        for name in ("call", "loop", "workload"):
            stored, recomputed = getattr(timing, name), getattr(again, name)
            for stat in ("n", "median", "q1", "q3", "iqr", "min", "max", "mean", "cv"):
                self.same(f"{where}.{name}.{stat}", getattr(stored, stat), getattr(recomputed, stat), f"the {stat} of its samples")
        for name in ("overhead_seconds", "overhead_share", "setup_seconds", "setup_share", "bridge_seconds", "gc_seconds",
                     "bridge_alone_seconds"):
            self.same(f"{where}.{name}", getattr(timing, name), getattr(again, name), "recomputed from its samples, it")
        self.same(f"{where}.reproducible", timing.reproducible, timing.differing_rounds == 0, "with its differing_rounds, it")

    def efficiency(self, where: str, cell: CellResult, stored: Efficiency) -> None:
        run = self.result.run_of(cell)
        again = cell_efficiency(cell, run.spec, run.peaks)
        if again is None:
            self.refuse(where, _Said("present"), "the cell has no record to measure")
        for name in ("flops", "step_flops", "seconds", "tflops", "gemm_dtype", "peak_tflops", "share_of_peak"):
            how = "its TFLOP/s over the measured peak" if name == "share_of_peak" else "recomputed from the spec, timing and peaks, it"
            if run.source is not None and run.source.get("peaks") is None and not _agree(getattr(stored, name), getattr(again, name)):
                raise ResultError(
                    f"{self.source}: {where}.{name} cannot be checked: the cell came from {run.source.get('file')}, whose peaks "
                    "this merged result does not hold (a `harness merge` before they were kept stored its first input's "
                    "only). Merge its inputs again."
                )
            self.same(f"{where}.{name}", getattr(stored, name), getattr(again, name), how)

    def time_vs_default(self, where: str, cell: CellResult, again: CellResult) -> None:
        stored = cell.time_vs_default
        if stored is None:
            return  # no ratio shown: nothing to mislead with
        self.number(where, stored, positive=True)
        if again.time_vs_default is None:
            self.refuse(where, stored, f"there is no ratio to show: {again.time_vs_default_note}")
        self.same(where, stored, again.time_vs_default, "its loop median over its frontend's default cell's")

    def distance(self, where: str, cell: CellResult) -> None:
        """A cell's stored loss distance from float64 is the one its losses and the stored reference give; a cell that ran
        ok where the spec's reference is within budget was measured against its float64 losses, so the reference holds
        them and the cell its distance (a deleted trajectory, or ``available: false``, read "not judged" and passed)."""
        distance, record = cell.reference_distance, cell.record
        run = self.result.run_of(cell)
        reference = run.reference or self.result.reference  # a merged input's own
        losses = reference_losses_for(cell, reference) if record is not None else None
        if record is not None and losses is None and (distance is not None or cell.status is Status.OK) \
                and reference_skip_reason(run.spec) is None:
            field = self._reference_field(run.source)
            what = (f"{where} ({cell.id}) ran ok with the spec's float64 reference within its budget, and was measured against "
                    f"its {cell.optimizer} trajectory (clipped: {str(cell.cell.properties.clip).lower()}, skipped steps "
                    f"{sorted(record.skipped_step_indices)}, feature {cell.cell.feature})")
            if not reference.available:
                self.refuse(f"{field}.available", False, what)
            self.refuse(f"{field}.trajectories", _Said(f"{len(reference.trajectories)} trajectories"), f"none is the one {what}")
        if record is not None and losses is not None and distance is None and cell.status is Status.OK:
            self.refuse(f"{where}.reference_distance", None, "the cell ran ok and the reference holds its float64 losses: its "
                        "run measured it")
        if distance is None or record is None or losses is None or len(losses) != len(record.losses):
            return
        self.number(f"{where}.reference_distance.final_weights_rel_error", distance.final_weights_rel_error, optional=True)
        rel, judged = relative_loss_errors(list(record.losses), losses, record.skipped_step_indices)
        self.same(f"{where}.reference_distance.max_rel_loss_error", distance.max_rel_loss_error,
                  finite_or_none(largest_loss_error(rel, judged)),
                  "recomputed from its losses and the stored reference's, it")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: object) -> bool:
    return _is_number(value) and math.isfinite(float(value))  # type: ignore[arg-type]


def _agree(stored: object, recomputed: object) -> bool:
    """Equal, numbers up to :data:`_REL_TOL` (NaN agrees with NaN); otherwise of one type and equal."""
    if _is_number(stored) and _is_number(recomputed):
        a, b = float(stored), float(recomputed)  # type: ignore[arg-type]
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=_REL_TOL, abs_tol=1e-300)
    return type(stored) is type(recomputed) and stored == recomputed


class _Said(str):
    """A description shown as it is (``8 losses``), not as a value's repr."""


def _shown(value: object) -> str:
    if isinstance(value, _Said):
        return str(value)
    if _is_number(value):
        number = float(value)  # type: ignore[arg-type]
        return f"{number:.7g}" if math.isfinite(number) else describe_loss(number)
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
