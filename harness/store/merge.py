"""Many results, one tracker: the cells of results run on several machines, devices and installations, judged as one.

Users outgrow one machine by running slices of the matrix as CI jobs (a CPU box, each GPU kind, each torch
version); ``harness merge A.json B.json … --out DIR`` puts their cells in one result and judges it on load, like
any result: every frontend against the baseline on each script × mode × device, and a frontend on another libtorch
build against the frontend that shares its build (:mod:`harness.judge.pairs`). What cannot be judged is said:
a cell alone on its script × mode × device is listed with why.

Only results of one workload merge: the same spec in every field but the device and what it decides (a CPU job
and a GPU job run one workload on two devices, in bfloat16 and float16 by default), hence the same fixture and
float64 reference; results on one device agree in every field, since their cells are paired. A cell (frontend × script × mode ×
device) may come from one input only: two runs that both name an installation ``python`` on one device are two
installations under one name, and are refused with what to rename.

Results that ran different scripts (their provenance's file digests differ: :mod:`harness.model.provenance`) merge,
since a CI matrix may span commits; the merged result's warnings name the files that differ, and each input's
provenance is kept in ``sources``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.contract.modes import SCRIPTS
from harness.errors import ResultError
from harness.judge.assess import assess_result
from harness.judge.kept_weights import keep_weights
from harness.judge.known_differences import KnownDifference
from harness.model.provenance import script_differences
from harness.model.result import CellResult, MatrixResult, ReferenceSummary
from harness.model.weights import FinalWeights
from harness.store.result_file import load_result
from harness.workload.optimizers import OPTIMIZERS

__all__ = ["blocking_differences", "merge_results"]

#: Spec fields that may differ between results run on different devices: the device is what a CI matrix spreads over,
#: and it decides the AMP dtype's default (bfloat16 on CPU, float16 on CUDA) and ``recipe``'s threads (the machine's
#: cores). Results on one device must agree on them too: their cells are paired.
_DEVICE_DECIDES = frozenset({"device", "amp_dtype", "threads"})


def merge_results(
    paths: Sequence[Path], baseline: str | None = None, judging: str | None = None, known: Sequence[KnownDifference] | None = None,
    labels: Sequence[str | None] | None = None,
) -> MatrixResult:
    """One judged result holding every cell of the results at ``paths`` (each read, upgraded and checked as ``load_result`` does).

    ``baseline``: the frontend every other is paired with (default: the first input's). ``judging`` defaults to the
    first input's policy. ``labels``: one per path, or ``None``: a labelled input's frontends are renamed
    ``LABEL.NAME`` (``xeon.python``), so two machines' results that both ran ``python`` merge without a re-run.

    Raises:
        ResultError: fewer than two inputs, one named twice, an unreadable one, specs of another workload, a cell in two
            inputs, a baseline no input ran (one line each, naming the files and what to do).
    """
    if len(paths) < 2:
        raise ResultError(f"merge needs two results or more, got {len(paths)}: name every result to merge (A.json B.json ...).")
    resolved = [os.path.realpath(p) for p in paths]
    twice = next((p for k, p in enumerate(paths) if resolved[k] in resolved[:k]), None)
    if twice is not None:
        raise ResultError(f"{twice} is named twice: name each result to merge once.")
    labels = list(labels) if labels is not None else [None] * len(paths)
    loaded = [load_result(Path(p)) for p in paths]
    results = [_labelled(result, label) for result, label in zip(loaded, labels, strict=True)]
    first, first_path = results[0], Path(paths[0])
    for path, result in zip(paths[1:], results[1:], strict=True):
        _check_same_workload(first, first_path, result, Path(path))
    owner: dict[str, Path] = {}
    for path, result in zip(paths, results, strict=True):
        for cell in result.cells:
            if cell.id in owner:
                raise ResultError(
                    f"cell {cell.id} is in both {owner[cell.id]} and {path}: two runs named an installation {cell.frontend!r} on "
                    f"{cell.device}. Label the inputs (harness merge A=a.json B=b.json: their frontends become A.NAME, B.NAME), "
                    f"or re-run one with another name (--frontend NAME={cell.language} or NAME={cell.language}:PATH)."
                )
            owner[cell.id] = Path(path)
    _refuse_shared_weights(paths, results)
    frontends = list(dict.fromkeys(name for r in results for name in r.frontends if any(c.frontend == name for c in r.cells)))
    chosen = baseline or first.baseline
    if chosen not in frontends:
        raise ResultError(f"baseline {chosen!r} ran in none of the merged results (they ran {', '.join(frontends)}): choose one "
                          "of those with --baseline.")
    merged = dataclasses.replace(
        first,
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        wall_seconds=sum(r.wall_seconds for r in results),
        workers={f"{name} ({Path(path).name})": info for path, r in zip(paths, results, strict=True) for name, info in r.workers.items()},
        reference=_every_reference(results),
        warnings=tuple(f"{Path(path).name}: {w}" for path, r in zip(paths, results, strict=True) for w in r.warnings)
        + _protocol_warnings(paths, results)
        + tuple(script_differences([(Path(p).name, r.provenance) for p, r in zip(paths, results, strict=True)])),
        cells=_in_matrix_order([c for r in results for c in r.cells], frontends),
        traces=tuple(t for r in results for t in r.traces),
        frontends=tuple(frontends), baseline=chosen,
        sources=tuple(s for path, r, labelled in zip(paths, loaded, results, strict=True) for s in _sources(Path(path), r, labelled)),
        pairs=(), targets=(),
    )
    return assess_result(keep_weights(merged), judging or first.judging, known)  # pairs across inputs, while their files are there


def _refuse_shared_weights(paths: Sequence[Path], results: Sequence[MatrixResult]) -> None:
    """Refuse two cells that read one weights file: the same run merged twice (once inside a merged input, once on its
    own, under two labels). Compared with itself, it would read as identical; the merged result would not load back.

    Raises:
        ResultError: naming both cells and their inputs.
    """
    seen: dict[str, tuple[str, Path]] = {}
    for path, result in zip(paths, results, strict=True):
        for cell in result.cells:
            weights = cell.record.weights_path if cell.record is not None else None
            if weights is None:
                continue
            key = os.path.realpath(weights)
            if key in seen:
                other, where = seen[key]
                raise ResultError(f"cell {cell.id} of {path} and cell {other} of {where} read one weights file ({weights}): "
                                  "the same run is merged twice. Merge each run once.")
            seen[key] = (cell.id, Path(path))


def blocking_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The fields in which two results' specs (JSON) differ and may not, for the results to merge (sorted; none: they merge)."""
    free = _DEVICE_DECIDES if a.get("device") != b.get("device") else frozenset()
    return [k for k in sorted(set(a) | set(b)) if k not in free and a.get(k) != b.get(k)]


def _labelled(result: MatrixResult, label: str | None) -> MatrixResult:
    """``result`` with every frontend ``NAME`` renamed ``LABEL.NAME`` (its cells, traces, order, baseline and workers)."""
    if label is None:
        return result

    def name(old: str) -> str:
        return f"{label}.{old}"

    # A cell of a result from before installations were recorded gets its language with the new name: ``LABEL.python``
    # no longer says it.
    renamed = {c.id: dataclasses.replace(c.cell, frontend=name(c.frontend)).id for c in result.cells}

    def kept(weights: FinalWeights | None) -> FinalWeights | None:  # what a cell kept is keyed by the other cell's (new) id
        if weights is None:
            return None
        return dataclasses.replace(weights, compared={renamed.get(k, k): v for k, v in weights.compared.items()})

    cells = tuple(dataclasses.replace(c, cell=dataclasses.replace(c.cell, frontend=name(c.frontend)),
                                      installation={**(c.installation or {"language": c.language}), "name": name(c.frontend)},
                                      weights=kept(c.weights))
                  for c in result.cells)
    traces = tuple(dataclasses.replace(t, frontends=(name(t.frontends[0]), name(t.frontends[1]))) for t in result.traces)
    return dataclasses.replace(result, cells=cells, traces=traces, frontends=tuple(map(name, result.frontends)),
                               baseline=name(result.baseline), workers={name(k): v for k, v in result.workers.items()})


def _check_same_workload(first: MatrixResult, first_path: Path, other: MatrixResult, path: Path) -> None:
    a, b = first.spec.to_json(), other.spec.to_json()
    differing = blocking_differences(a, b)
    if differing:
        k = differing[0]
        raise ResultError(
            f"{path} ran another workload than {first_path}: its spec's {k} is {b.get(k)!r}, not {a.get(k)!r}"
            + (f" ({len(differing) - 1} more field(s) differ)" if len(differing) > 1 else "")
            + ". Merge results of one workload: the same preset and flags; only the device (and the AMP dtype and threads "
            "it decides) may differ, between results on different devices."
        )
    if first.fixture.get("digest") != other.fixture.get("digest"):
        raise ResultError(f"{path} ran on another fixture ({other.fixture.get('digest')}) than {first_path} "
                          f"({first.fixture.get('digest')}): re-run one of them with this harness's fixtures.")


def _protocol_warnings(paths: Sequence[Path], results: Sequence[MatrixResult]) -> tuple[str, ...]:
    protocols = {r.protocol for r in results}
    if len(protocols) < 2:
        return ()
    listed = "; ".join(f"{Path(p).name}: {r.protocol.rounds} rounds" + (", interleaved" if r.protocol.interleave else "")
                       for p, r in zip(paths, results, strict=True))
    return (f"the merged results were timed under different protocols ({listed}): compare their times with care",)


def _sources(path: Path, result: MatrixResult, labelled: MatrixResult) -> list[dict[str, Any]]:
    """The ``sources`` entries of one input: the run it is, or, for a merged input, the runs it was merged from (their
    cells and frontends renamed as ``labelled``, the input as loaded and labelled, renamed them).

    Each entry keeps the spec, peaks and timing protocol its run was measured under, so every cell of the merged result
    is checked and judged against its own run's (:meth:`harness.model.result.MatrixResult.run_of`): a merged result
    written with ``--json`` loads back.
    """
    if not result.sources:
        return [_source(path, labelled)]
    renamed = {a.id: b.id for a, b in zip(result.cells, labelled.cells, strict=True)}
    names = dict(zip(result.frontends, labelled.frontends, strict=True))
    entries = []
    for source in result.sources:
        run = result.run_of_source(source)
        entries.append({
            **source, "cells": [renamed.get(str(c), str(c)) for c in source.get("cells") or ()],
            "frontends": [names.get(str(f), str(f)) for f in source.get("frontends") or ()], "merged_in": str(path),
            "spec": run.spec.to_json(), "peaks": run.peaks.to_json(), "protocol": run.protocol.to_json(),
            "reference": (run.reference or result.reference).to_json(),
        })
    return entries


def _every_reference(results: Sequence[MatrixResult]) -> ReferenceSummary:
    """Every input's float64 trajectories in one reference (each optimizer, clip and replay once, the first input's where
    two have it): a slice's own trajectories are never dropped for the first input's (issue 37). Each cell is still judged
    against its own input's (``sources[].reference``)."""
    available = [r.reference for r in results if r.reference.available]
    if not available:
        return results[0].reference
    seen: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    for reference in available:
        for t in reference.trajectories:
            seen.setdefault((t["optimizer"], bool(t["clip"]), tuple(t["skipped_steps"])), t)
    return dataclasses.replace(available[0], trajectories=tuple(seen.values()))


def _source(path: Path, result: MatrixResult) -> dict[str, Any]:
    hosts = sorted({str(c.installation.get("host")) for c in result.cells if c.installation and c.installation.get("host")})
    return {
        "file": str(path), "created": result.created, "host": ", ".join(hosts) or str(result.environment.get("platform", "")),
        "frontends": list(result.frontends), "devices": sorted({c.device for c in result.cells}),
        "cells": [c.id for c in result.cells], "environment": dict(result.environment), "provenance": result.provenance.to_json(),
        "spec": result.spec.to_json(), "peaks": result.peaks.to_json(), "protocol": result.protocol.to_json(),
        "reference": result.reference.to_json(),
    }


def _in_matrix_order(cells: list[CellResult], frontends: list[str]) -> tuple[CellResult, ...]:
    """Script, mode, optimizer, device, then frontend: a pair's cells side by side, as a run lists them."""
    scripts, optimizers = list(SCRIPTS), list(OPTIMIZERS)
    return tuple(sorted(cells, key=lambda c: (scripts.index(c.script), SCRIPTS[c.script].mode_names.index(c.mode),
                                              optimizers.index(c.optimizer), c.device, frontends.index(c.frontend))))


