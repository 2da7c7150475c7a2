"""A record call compared as it runs is cut after the step where its pair parts, and the pair is traced as before.

Issue 38: of a pair that parts, the other side's plain trace past that step proved nothing (its reconciled run is compared
everywhere), yet cost R a copy, a dtype, a shape and a digest at each point. The runner now hands that side's recorder the
baseline's points (:meth:`harness.run.runner.MatrixRunner._compared_with`); once the two part, only the triggers' points
are kept. These tests run real pairs in both directions (R cut against Python, Python cut against R), each cell by
``run_cell`` (so the baseline's trace is in before the other's record call starts), and compare the pair's trace with
the one its whole traces give: the first difference, the last identical point, the triggers and the reconciled proof.
Where Python is the baseline they run in the session's runner (``conftest.py``), whose workers every other test shares.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from pathlib import Path

import pytest

from harness.judge.divergence import trace_cells
from harness.judge.weight_findings import tensor_digests
from harness.model.cell_trace import CellTrace
from harness.model.record_points import with_record_points
from harness.model.result import CellResult, Status
from harness.run.availability import Availability
from harness.run.runner import MatrixRunner
from harness.workload.installations import parse_frontends
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec
from tests.support import kept_workers, require_r_torch


def _whole(runner: MatrixRunner, outcome: CellResult, tmp_path: Path) -> CellResult:
    """``outcome`` with its plain trace replaced by a whole one: the same record call, traced with nothing to compare with."""
    request = runner.pool.cell_request(outcome.cell, save_weights=False, kind="trace", trace={"keep": [], "stop": False})
    reply = runner.pool.call(outcome.cell.frontend, request)
    assert outcome.record is not None and outcome.record.weights_path is not None
    trace = with_record_points(CellTrace.from_reply(reply), outcome.record, tensor_digests(outcome.record.weights_path))
    return dataclasses.replace(outcome, trace=trace.write(tmp_path / f"{outcome.id}.whole.trace.safetensors"))


@pytest.mark.parametrize(("baseline", "cut_side", "script", "mode", "optimizer", "step"), [
    ("python", "r", "with_autocast", "autocast", "adam", 1),
    ("r", "python", "with_autocast", "autocast", "ignite_adam", 1),
    ("python", "r", "cuda_amp_grad_scaler", "autocast_scaler_clip", "sgd", 0),
])
def test_a_cut_trace_traces_its_pair_as_the_whole_one_does(
    tiny_spec: WorkloadSpec, runner: MatrixRunner, availability: Availability, tmp_path: Path, baseline: str, cut_side: str,
    script: str, mode: str, optimizer: str, step: int,
) -> None:
    """``first-moment-lerp`` parts ``autocast`` Adam at step 1 (an R switch) and ignite Adam (a Python switch);
    ``clip-coef-reciprocal`` parts the SGD clip cell at step 0, which keeps its clip points after the cut: the clip engages
    at every step but the overflow's (step 9), so a point inside R torch's clip recorded at a stale step (the loop's last
    kept point's, not the step it is at) shows in the triggers. The
    side with the switch is cut after that step, keeps a fraction of its points, and its pair's trace is the whole
    traces' in every field but the point count (the triggers too); the reconciled runs still prove the entries."""
    require_r_torch(availability)
    frontends = (baseline, cut_side)
    # The session's runner where Python is the baseline (its workers are started once); R as the baseline needs its own.
    with (contextlib.nullcontext(runner) if frontends == runner.frontends
          else MatrixRunner(tiny_spec, frontends, staging=tmp_path, availability=availability, kept=kept_workers())) as running:
        first, second = (running.run_cell(Cell(f, script, mode, optimizer, "cpu")) for f in frontends)
        assert first.status is Status.OK and second.status is Status.OK and first.trace and second.trace
        cut = CellTrace.read(second.trace)
        whole = _whole(running, second, tmp_path)
        if running is not runner:  # a runner that runs cells one by one computes only their own float64 trajectories
            assert {key[1] for key in running._references} == {optimizer}  # (model, optimizer, clip, skipped, feature, zeroes)
    assert CellTrace.read(first.trace).cut is None  # the baseline is never cut
    assert cut.cut == step and len(cut.points) < len(CellTrace.read(whole.trace).points) / 2
    from_cut, from_whole = trace_cells(first, second), trace_cells(first, whole)
    assert from_cut.error is None and from_cut.first_difference is not None and from_cut.first_difference.step == step
    assert from_cut.reconciled_identical is True and from_cut.switches
    first = from_cut.first_difference
    tensor = first.kind == "bytes" and math.prod(first.shapes[1] or (1,)) > 1
    # the tensor it parts at travels whole (the second pass need not run this side again); a one-element point's value does
    assert (f"{first.step}:{first.point}" in cut.kept) is tensor and (optimizer != "adam" or tensor)
    assert dataclasses.replace(from_cut, points=from_whole.points) == from_whole


def test_a_pair_with_a_third_frontend_or_no_switch_on_its_side_keeps_its_whole_trace(
    tiny_spec: WorkloadSpec, runner: MatrixRunner, availability: Availability, tmp_path: Path,
) -> None:
    """Only a cell with a reconciled run of its own is cut: plain SGD in ``lowp_weights`` parts nowhere and has no active
    switch (the weight-decay entry is inert on it: no weight decay; the clip entry's modes are float32 gradients'): whole
    trace; and a run of three installations compares a cell with more than one other (nothing is cut, though the
    baseline's trace is there)."""
    require_r_torch(availability)
    cells = [runner.run_cell(Cell(f, "with_autocast", "lowp_weights", "sgd", "cpu")) for f in ("python", "r")]
    assert runner._compared_with(Cell("r", "with_autocast", "lowp_weights", "sgd", "cpu")) == {}
    assert runner._compared_with(Cell("python", "with_autocast", "autocast", "adam", "cpu")) == {}  # the baseline
    assert all(c.trace is not None and CellTrace.read(c.trace).cut is None for c in cells)
    adam = Cell("python", "with_autocast", "autocast", "adam", "cpu")
    if adam.id not in runner._baseline_traces:  # the cut test above may have run it in this worker's runner
        runner.run_cell(adam)
    assert runner._compared_with(Cell("r", "with_autocast", "autocast", "adam", "cpu"))  # two frontends: R's cell is cut
    # Runners that run nothing start no worker: one whose partner has not run, one of three installations given the
    # baseline's trace as the record call would leave it.
    with MatrixRunner(tiny_spec, ("python", "r"), staging=tmp_path / "two", availability=availability) as fresh:
        assert fresh._compared_with(Cell("r", "with_autocast", "autocast", "adam", "cpu")) == {}  # its partner has not run
    three = parse_frontends(["python,r,r2=r"])
    with MatrixRunner(tiny_spec, three, staging=tmp_path / "three", availability=availability) as matrix_runner:
        matrix_runner._baseline_traces.update(runner._baseline_traces)
        assert matrix_runner._compared_with(Cell("r", "with_autocast", "autocast", "adam", "cpu")) == {}
