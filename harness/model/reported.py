"""What a worker or a probe reports about itself, kept in a result as the plain JSON it is, declared once.

The harness stores these objects and shows them, and judges nothing by them, so the model keeps them as mappings
(:class:`harness.model.result.CellResult`'s ``installation``, :class:`harness.model.result.MatrixResult`'s
``environment``, a measured peak). Their JSON form is declared here, as ``TypedDict``s, so the shape check
(:mod:`harness.model.shape`) reads every field the views print from one declaration, the way it reads the stored
dataclasses' (a key marked ``NotRequired`` may be absent; ``X | None`` may be null). Keys not declared are kept, unread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from harness.workload.installations import Language

__all__ = ["Environment", "Fixture", "GemmProfile", "Installation", "Peak", "PhaseEntry", "Trajectory", "WorkerStarts"]


class Peak(TypedDict):
    """A measured peak (:func:`harness.worker_side.matmul_peak.measure_matmul_peak`)."""

    tflops: float
    n: int
    samples_tflops: list[float | None]
    layout: NotRequired[str | None]
    layouts_tflops: NotRequired[Mapping[str, Any] | None]


class GemmProfile(TypedDict, total=False):
    """A GEMM profile (:mod:`harness.worker_side.gemm_profiler`)."""

    half_share: float | None
    gemm_seconds: float | None


class Installation(TypedDict):
    """The installation that ran the cell: how the user named it (:class:`harness.workload.installations.Installation`)
    and what its worker reported (:func:`harness.worker_side.installation_facts.installation_facts`); pairs are judged by
    these facts."""

    name: str
    language: Language
    env: NotRequired[Mapping[str, str]]
    python: NotRequired[str | None]
    r_libs: NotRequired[str | None]
    activate: NotRequired[str | None]
    torch_version: NotRequired[str | None]
    libtorch_version: NotRequired[str | None]
    libtorch_path: NotRequired[str | None]
    libtorch_build: NotRequired[str | None]
    interpreter: NotRequired[str | None]
    host: NotRequired[str | None]
    cpu: NotRequired[str | None]
    machine: NotRequired[str | None]
    language_version: NotRequired[str | None]
    device_name: NotRequired[str | None]
    cuda: NotRequired[str | None]
    r_library: NotRequired[str | None]
    torch_package: NotRequired[str | None]


class Trajectory(TypedDict):
    """A float64 trajectory: one optimizer's losses, plain or clipped, replayed over a run's skipped steps."""

    optimizer: str
    clip: bool
    skipped_steps: list[int]
    losses: list[float | None]
    feature: NotRequired[str]
    #: The model trained, where it is not the spec's (a matrix of several models: harness/workload/model_designs.py).
    model: NotRequired[str]
    #: The loop's zero_grad() with no argument zeroes the unused layer's grads, as R torch's R-code optimizers' default
    #: does (harness/judge/reference.py, zero_grad_default_zeroes): that binding's cells' trajectory.
    zero_grad_zeroes: NotRequired[bool]


class WorkerStarts(TypedDict, total=False):
    """A worker's start-ups (:mod:`harness.run.pool`)."""

    startup_seconds: float | None
    starts: int | None
    ready_seconds: float


class Environment(TypedDict, total=False):
    """The machine the run found (:meth:`harness.run.availability.Availability.to_json`)."""

    python_version: str | None
    platform: str | None
    torch_version: str | None
    rscript: str | None
    rpy2_version: str | None
    python_unavailable: str | None
    r_unavailable: str | None
    r: Mapping[str, Any] | None


class Fixture(TypedDict, total=False):
    """The fixture file the run read (:mod:`harness.workload.fixtures`)."""

    digest: str | None
    sha256: str | None
    path: str | None


class PhaseEntry(TypedDict):
    """A phase of the run: its name and seconds (:class:`harness.model.phases.Phases`)."""

    name: str
    seconds: float
