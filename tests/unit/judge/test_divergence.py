"""Where two runs part, on synthetic traces: the first differing point, how far apart it is, and what is stored (no torch)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from harness.judge.divergence import find_divergence, point_difference, read_triggers, trace_cells
from harness.model.pair_trace import PairTrace, PointDifference
from harness.model.result import CellResult


def _point(step: int, name: str, values: list[float], dtype: str = "float32") -> list[Any]:
    data = np.array(values, np.float32 if dtype == "float32" else np.int32).tobytes()
    return [step, name, dtype, [len(values)] if len(values) > 1 else [], hashlib.sha256(data).hexdigest(),
            values[0] if len(values) == 1 else None]


def _kept(values: list[float]) -> dict[str, Any]:
    return {"dtype": "float32", "shape": [len(values)], "data": np.array(values, np.float32).tobytes()}


def test_identical_sequences_have_no_divergence() -> None:
    """Equal digests at every point in the same order: nothing differs."""
    points = [_point(0, "loss", [1.0]), _point(0, "param.stepped.layer0.weight", [1.0, 2.0])]
    assert find_divergence(points, list(points)) is None


def test_the_first_differing_point_is_named_with_its_step_and_kind() -> None:
    """Step 1's loss differs after step 0 and step 1's batch agree: the split is at index 3, bytes."""
    a = [_point(0, "batch.data", [1.0]), _point(0, "loss", [2.0]), _point(1, "batch.data", [3.0]), _point(1, "loss", [4.0])]
    b = [*a[:3], _point(1, "loss", [4.5])]
    split = find_divergence(a, b)
    assert split is not None and (split.index, split.kind, split.step, split.point) == (3, "bytes", 1, "loss")


def test_a_point_in_another_order_or_missing_is_a_difference() -> None:
    """The scripts are twins: another point at the same place is ``order``, a shorter trace ``missing``."""
    a = [_point(0, "loss", [1.0]), _point(0, "loss.scaled", [2.0])]
    assert find_divergence(a, [a[0], _point(0, "grad.backward.layer0.weight", [2.0])]).kind == "order"  # type: ignore[union-attr]
    missing = find_divergence(a, a[:1])
    assert missing is not None and (missing.kind, missing.point) == ("missing", "loss.scaled")
    described = point_difference(missing, a, a[:1], (None, None)).describe(("python", "r"))
    assert described == "step 0, loss.scaled: recorded by one side only (python float32, r no such point)"


def test_the_kept_tensors_give_count_distance_and_the_worst_element() -> None:
    """Two of four elements differ, the worst by 3 ULPs at index 2: both values are named there."""
    base = np.float32(0.5)
    a_vals = [1.0, 2.0, float(base), 4.0]
    b_vals = [1.0, float(np.nextafter(np.float32(2.0), np.float32(3))), float(base + 3 * np.spacing(base)), 4.0]
    a, b = [_point(0, "grad.clipped.layer0.weight", a_vals)], [_point(0, "grad.clipped.layer0.weight", b_vals)]
    split = find_divergence(a, b)
    assert split is not None
    diff = point_difference(split, a, b, (_kept(a_vals), _kept(b_vals)))
    assert (diff.elements, diff.differing, diff.max_distance, diff.worst_index) == (4, 2, 3, (2,))
    assert diff.worst_values == (0.5, float(base + 3 * np.spacing(base)))
    described = diff.describe(("python", "r"))
    assert described.startswith("step 0, grad.clipped.layer0.weight (float32 4): 2 of 4 elements differ, largest 3 ULP")


def test_triggers_are_read_off_the_baseline_points() -> None:
    """A clip coefficient below 1 marks clipping; a non-zero inf check marks a skipped step."""
    points = [_point(0, "clip.coef", [0.85]), _point(1, "clip.coef", [1.2]), _point(1, "scaler.found_inf", [1.0]),
              _point(2, "clip.coef", [0.99])]
    assert read_triggers(points) == {"always": (0, 1, 2), "clip_engaged": (0, 2), "clip_norm_nan": (), "step_skipped": (1,)}
    nonfinite = [_point(0, "clip.total_norm", [float("nan")]), _point(1, "clip.total_norm", [3.0]),
                 _point(2, "clip.total_norm", [float("inf")])]  # an inf norm clips by 0 in both bindings: not the trigger
    assert read_triggers(nonfinite)["clip_norm_nan"] == (0,)


def test_a_pair_trace_round_trips_and_says_where_the_runs_part() -> None:
    """The stored trace reads back equal, and its lines name the first difference and the last identical point."""
    first = PointDifference(0, "clip.coef", "bytes", ("float32", "float32"), ((), (1,)), 1, 1, 1, (), (0.852758825, 0.852758765))
    trace = PairTrace("p-cpu", ("python", "r"), (760, 760), 22, first, (0, "clip.total_norm"), {"clip_engaged": (0, 1)}, True, 0.8)
    assert PairTrace.from_json(trace.to_json()) == trace
    assert trace.lines() == [
        "trace: first difference at step 0, clip.coef (float32 scalar): 1 of 1 elements differ, largest 1 ULP: "
        "python 0.852758825 vs r 0.852758765 at the element",
        "trace: last identical point: step 0, clip.total_norm (22 of 760 points identical before it)",
    ]
    assert not trace.identical and PairTrace("p-cpu", ("python", "r"), (5, 5), 5).lines() == [
        "trace: all 5 traced points bitwise identical (5 per side)"
    ]


def test_a_traced_cell_over_its_time_bound_misses_the_trace_cost_figure() -> None:
    """What tracing adds to a cell's record call (its wall time over its own timed run) may be 2 s at tiny: 1.5 s is met,
    2.5 s is missed by 0.50 s; a cell without a trace file is not checked."""
    import dataclasses

    from harness.judge.targets import check_targets
    from harness.model.cell_trace import TraceFile
    from tests.twins import golden

    result = golden()
    cell = next(c for c in result.cells if c.timing is not None)
    run = cell.timing.workload.median  # type: ignore[union-attr]
    traced = TraceFile("t.trace.safetensors", "0" * 64, 10, ())

    def cost(added: float, trace: TraceFile | None = traced) -> list[tuple[str, bool, str | None]]:
        changed = dataclasses.replace(cell, trace=trace, wall_seconds=run + added)
        checks = check_targets(dataclasses.replace(result, cells=(changed,)))
        return [(c.measured, c.met, c.why) for c in checks if c.name == "trace cost"]

    assert cost(1.5) == [("1.50 s", True, None)]
    ((measured, met, why),) = cost(2.5)
    assert (measured, met) == ("2.50 s", False) and why is not None and why.startswith("over by 0.50 s")
    assert cost(9.0, trace=None) == []


def test_a_stored_trace_that_is_not_its_cells_run_is_refused(tmp_path: Path) -> None:
    """Issue 37 (6): a cell's trace file swapped for another run's (its SHA-256 updated in the result) carries that run's
    record points; they are checked against the cell's own record, so the pair is left untraced (nothing proven) with the
    reason, never judged on the other run's points."""
    from harness.model.cell_trace import CellTrace
    from harness.model.record_points import record_points
    from tests.twins import by_mode, golden, split_losses, with_record

    cell = by_mode(golden())["autocast"]
    assert cell.record is not None
    other = with_record(cell, losses=split_losses(cell.record, 5))
    assert other.record is not None
    loop = ((0, "loss", "float32", (), "0" * 32, 1.0),)

    def traced(c: CellResult, record_of: CellResult, name: str) -> CellResult:
        assert record_of.record is not None
        trace = CellTrace((*loop, *record_points(record_of.record, None)), "blake3").write(tmp_path / f"{name}.trace.safetensors")
        return dataclasses.replace(c, trace=trace, reconciled=None)

    a = traced(cell, cell, "a")
    b = traced(dataclasses.replace(other, cell=dataclasses.replace(other.cell, frontend="r")), cell, "b")  # b's record, a clean trace
    trace = trace_cells(a, b)
    assert trace.error is not None and "r's stored trace is not the run its record holds (losses at step 5" in trace.error
    assert trace_cells(a, traced(b, b, "b2")).error is None


def test_a_clip_coefficient_of_zero_does_not_engage_the_clip_trigger() -> None:
    """An overflow's infinite norm makes the coefficient exactly 0 however it is computed: that step cannot show the
    coefficient's rounding (clip-coef-reciprocal), so it does not count as the clip engaging."""
    from harness.judge.divergence import TRIGGERS

    points = [(0, "clip.coef", "float32", [], "", 0.5), (1, "clip.coef", "float32", [], "", 0.0),
              (2, "clip.coef", "float32", [], "", 1.0), (3, "clip.coef", "float32", [], "", 0.99)]
    assert TRIGGERS["clip_engaged"](points) == (0, 3)


def test_only_cells_whose_pair_parts_or_is_incomplete_need_a_reconciled_run(tmp_path: Path) -> None:
    """Issue 38: a pair whose plain traces are bitwise identical is ``identical`` whatever the switches, so neither cell
    runs again with them; a pair that parts (one point's bytes), a cell whose partner failed and a cell whose partner is
    not in the run (a slice merged later) each keep theirs."""
    from harness.judge.pairs import reconciliation_needed
    from harness.model.cell_trace import CellTrace
    from harness.model.result import Status
    from tests.twins import by_mode, golden

    def traced(c: CellResult, frontend: str, loss_digest: str) -> CellResult:
        point = (0, "loss", "float32", (), loss_digest, 1.0)
        trace = CellTrace((point,), "blake3").write(tmp_path / f"{c.mode}-{frontend}.trace.safetensors")
        return dataclasses.replace(c, cell=dataclasses.replace(c.cell, frontend=frontend), trace=trace, reconciled=None)

    cells = by_mode(golden())
    same = [traced(cells["default"], "python", "0" * 32), traced(cells["default"], "r", "0" * 32)]
    parts = [traced(cells["autocast"], "python", "0" * 32), traced(cells["autocast"], "r", "1" * 32)]
    failed = [traced(cells["autocast_scaler"], "python", "0" * 32),
              dataclasses.replace(traced(cells["autocast_scaler"], "r", "0" * 32), status=Status.ERROR, trace=None)]
    alone = [traced(cells["autocast_scaler_clip"], "python", "0" * 32)]
    needed = reconciliation_needed([*same, *parts, *failed, *alone], "python", ("python", "r"))
    assert needed == {c.id for c in (*parts, *failed, *alone)}
    assert not needed & {c.id for c in same}


def test_a_cut_trace_is_compared_only_up_to_its_cut(tmp_path: Path) -> None:
    """Issue 38: a trace cut where its run parted from the run it was compared with (the recorder kept only the triggers'
    points after that step) tells where it parts from a run that parts at or before the cut, as the whole trace would;
    from one that agrees with it up to the cut (another partner, met in a merge) the pair is left untraced with the
    reason, and a cut trace is never half of an identical pair."""
    from harness.judge.divergence import plain_traces_identical
    from harness.model.cell_trace import CellTrace
    from harness.model.record_points import record_points
    from tests.twins import by_mode, golden

    cell = by_mode(golden())["autocast"]
    assert cell.record is not None

    def traced(frontend: str, loop: list[tuple[Any, ...]], cut: int | None) -> CellResult:
        points = tuple((*p, None) for p in loop)
        trace = CellTrace((*points, *record_points(cell.record, None)), "blake3", cut=cut)
        written = trace.write(tmp_path / f"{frontend}-{cut}.trace.safetensors")
        assert CellTrace.read(written).cut == cut  # the cut is stored with the trace
        return dataclasses.replace(cell, cell=dataclasses.replace(cell.cell, frontend=frontend), trace=written, reconciled=None)

    whole = [(0, "loss", "float32", (), "0" * 32), (1, "loss", "float32", (), "1" * 32), (2, "loss", "float32", (), "2" * 32)]
    python = traced("python", whole, None)
    parted = traced("r", [whole[0], (1, "loss", "float32", (), "9" * 32)], 1)  # parted at step 1, cut after it
    trace = trace_cells(python, parted)
    assert trace.error is None and trace.first_difference is not None and trace.first_difference.step == 1
    agreeing = traced("r", whole[:2], 1)  # agrees with python through its cut: what it did after is not in it
    refused = trace_cells(python, agreeing)
    assert refused.error is not None and "r's trace was cut after step 1" in refused.error
    assert not plain_traces_identical(agreeing, traced("python", whole[:2], 1))
    assert plain_traces_identical(python, traced("r", whole, None))


def test_an_untraced_reconciled_run_is_compared_on_its_records_and_traced_again_where_they_part(tmp_path: Path) -> None:
    """Issue 47: a reconciled run the matrix ran untraced keeps only its record points (losses, scales, dtypes, final
    weights); against its partner's whole trace, only the two runs' records are compared. Records that match prove the
    pair as the whole traces did; records that part name the cell, which the run traces again to say where."""
    from harness.judge.pairs import reconciled_records_differ
    from harness.model.cell_trace import CellTrace
    from harness.model.record_points import record_points, records_only
    from tests.twins import by_mode, golden, split_losses, with_record

    cell = by_mode(golden())["autocast"]
    assert cell.record is not None
    loop = ((0, "loss", "float32", (), "0" * 32, 1.0), (1, "grad", "float32", (2,), "1" * 32, None))
    python_trace = CellTrace((*loop, *record_points(cell.record, None)), "blake3").write(tmp_path / "p.trace.safetensors")
    python = dataclasses.replace(cell, trace=python_trace, reconciled=None)
    r_plain = CellTrace(((0, "loss", "float32", (), "9" * 32, 1.5), *record_points(cell.record, None)), "blake3")
    r_trace = r_plain.write(tmp_path / "r.trace.safetensors")

    def r_cell(reconciled_record: CellResult, name: str) -> CellResult:
        assert reconciled_record.record is not None
        lean = CellTrace(record_points(reconciled_record.record, None), "blake3", ("switch",))
        assert records_only(lean) and not records_only(r_plain)
        return dataclasses.replace(cell, cell=dataclasses.replace(cell.cell, frontend="r"), trace=r_trace,
                                   reconciled=lean.write(tmp_path / f"{name}.reconciled.trace.safetensors"))

    matching = r_cell(cell, "same")
    trace = trace_cells(python, matching)
    assert trace.error is None and trace.reconciled_identical is True and trace.switches == ("switch",)
    assert reconciled_records_differ([python, matching], "python", ("python", "r")) == frozenset()
    parting = r_cell(with_record(cell, losses=split_losses(cell.record, 5)), "parts")
    trace = trace_cells(python, parting)
    assert trace.reconciled_identical is False and trace.reconciled is not None
    assert (trace.reconciled.step, trace.reconciled.point) == (5, "record.losses")
    assert reconciled_records_differ([python, parting], "python", ("python", "r")) == {parting.id}
