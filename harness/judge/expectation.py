"""Whether two cells are expected bitwise identical, and why: decided from what each side reported, never from names.

Two frontends on CPU run the same kernels in the same order when they load the same libtorch build on the same
kind of CPU (the frontends' autocast and scaler code only choose which ATen ops run, in which dtype): then anything
short of identity is a finding. The build is the loaded ``libtorch_cpu.so``'s build ID
(:mod:`harness.worker_side.installation_facts`), so R torch linked to a Python wheel's libtorch is the same build as
that wheel, and a venv's torch 2.8.0 is not 2.13.0's. The CPU kind is its model and the instruction-set features that
decide libtorch's kernels (``cpu_features``: AVX2, AVX512, AMX, ...): a merged result's two CPU boxes may pick other
kernels, and a VM's model name ("AMD EPYC") does not say which, so across hosts identity is expected only where both
are recorded and agree. Results from before installations were reported (schema < 7) fall back to the libtorch
versions the records carry, as they were judged then.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.model.result import CellResult

__all__ = ["Expectation", "expectation"]


@dataclass(frozen=True)
class Expectation:
    """``identical``: bitwise identity is expected (on CPU only); ``why``: the facts it rests on, one clause."""

    identical: bool
    why: str


def expectation(a: CellResult, b: CellResult) -> Expectation:
    """Whether cells ``a`` and ``b`` (two frontends of one pair, both run) are expected bitwise identical, and why."""
    fa, fb = (dict(c.installation or {}) for c in (a, b))
    va, vb = (_libtorch_version(c) for c in (a, b))
    names = f"{a.frontend} and {b.frontend}"
    if a.device != "cpu":
        return Expectation(False, f"on {a.device} identity is not promised until a GPU run has measured it")
    if fa.get("libtorch_build") and fb.get("libtorch_build"):
        if fa["libtorch_build"] != fb["libtorch_build"]:
            detail = f"libtorch {va} vs {vb}" if va != vb else f"libtorch {va} in two builds"
            return Expectation(False, f"{names} load different libtorch builds ({detail}), so identity is not expected")
        if fa.get("cpu") != fb.get("cpu"):
            return Expectation(False, f"{names} ran on different CPUs ({fa.get('cpu')} vs {fb.get('cpu')}), so identity is not expected")
        features = fa.get("cpu_features"), fb.get("cpu_features")
        if features[0] != features[1]:
            differ = sorted(set(features[0] or ()) ^ set(features[1] or ()))
            return Expectation(False, f"{names} ran on CPUs with other instruction sets ({', '.join(differ) or 'not recorded on one side'} "
                                      "on one side only), so identity is not expected")
        if features[0] is None and fa.get("host") != fb.get("host"):
            return Expectation(False, f"{names} ran on two hosts ({fa.get('host')}, {fb.get('host')}) whose CPUs' instruction sets "
                                      "were not recorded, so identity is not expected")
        return Expectation(True, f"{names} load one libtorch build ({va}, build {str(fa['libtorch_build'])[:12]}) on one CPU "
                                 f"kind ({fa.get('cpu')}{', ' + ' '.join(features[0]) if features[0] else ''}), so identity is expected")
    if va is not None and va == vb:
        return Expectation(True, f"{names} report libtorch {va} on CPU (no build ID recorded), so identity is expected")
    return Expectation(False, f"{names} report libtorch {va} vs {vb}, so identity is not expected")


def _libtorch_version(cell: CellResult) -> str | None:
    facts = cell.installation or {}
    version = facts.get("libtorch_version") or (cell.record.libtorch_version if cell.record else None)
    return str(version) if version else None
