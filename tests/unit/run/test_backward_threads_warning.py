"""A cell whose worker ran a backward pass on another thread count than the spec's is named in the result's warnings.

R torch runs backward on threads of its own that keep the count they first ran with (harness/worker_side/thread_probe.py,
docs/determinism.md); the worker measures it as it starts, and the runner stores it with each cell.
"""

from __future__ import annotations

from harness.model.result import CellResult, Status
from harness.run.runner import collect_warnings
from harness.workload.matrix import Cell
from harness.workload.spec import WorkloadSpec

SPEC = WorkloadSpec.from_preset("tiny", threads=2)


def _cell(frontend: str, backward_threads: list[int] | None) -> CellResult:
    facts = {"name": frontend, "language": frontend} | ({} if backward_threads is None else {"backward_threads": backward_threads})
    return CellResult(Cell(frontend, "with_autocast", "default", "sgd", "cpu"), Status.OK, installation=facts)


def test_a_backward_on_another_thread_count_is_a_warning() -> None:
    """R's backward seen on 1 and 2 threads with the spec's 2: one warning naming the installation and the counts."""
    found = [w for w in collect_warnings([_cell("python", [2]), _cell("r", [1, 2])], SPEC) if "backward" in w]
    assert found == ["backward passes ran on other thread counts than the spec's 2 (r [1, 2]; "
                     "harness/worker_side/thread_probe.py): a reduction in backward may differ bitwise"]


def test_backward_on_the_specs_threads_or_unmeasured_is_no_warning() -> None:
    """Both on the spec's count, or facts from before the probe (no field): nothing to say."""
    assert not [w for w in collect_warnings([_cell("python", [2]), _cell("r", [2]), _cell("r", None)], SPEC) if "backward" in w]
