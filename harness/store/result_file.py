"""The matrix result: one versioned JSON file, with a folder of final-weights files beside it.

Results are written atomically and never overwritten by accident (see :mod:`harness.claim` for how a
run claims its result path and publishes the result and its weights together). A file from a newer
schema version is refused with what to do, not half-read; older ones are read through ``_update_to_N``
steps (asv's way).

Weights paths are stored relative to the result file's folder (since schema 3), so a result and its
weights folder can be moved or read from any working directory; in memory (after :func:`load_result`)
they are absolute.

A result keeps what its verdicts read of the final weights (since schema 9: :mod:`harness.model.weights`), so its
weights files may go (a lean result: docs/results/README.md). :func:`load_result` judges such a result from what it
kept and says so; :func:`save_result` refuses a result whose weights went while it was in memory (a runner's folder
removed under it), since the file would name weights that are gone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.contract.optimizers import DEFAULT_OPTIMIZER
from harness.errors import ResultError
from harness.files.atomic import atomic_path
from harness.files.bounded_read import FileFormatError, FileSyntaxError, read_json_file
from harness.judge.assess import assess_result
from harness.judge.kept_weights import keep_weights
from harness.judge.known_differences import KnownDifference
from harness.judge.tolerances import DEFAULT_JUDGING
from harness.model.provenance import Provenance
from harness.model.result import RESULT_SCHEMA_VERSION, MatrixResult, Status, check_upgradable_shape, without_verdicts
from harness.store.consistency import check_consistency
from harness.workload.matrix import Cell

__all__ = [
    "MARKER_MAX_BYTES", "RESULT_MAX_BYTES", "WEIGHTS_MARKER", "WEIGHTS_SUFFIX", "is_result_file", "load_result",
    "read_weights_marker", "save_result", "stored_form", "stored_text", "weights_dir_for",
]

#: The weights folder's suffix; a result path may not end in it (it would be its own weights folder).
WEIGHTS_SUFFIX = ".weights"
#: The file in a weights folder that says this harness wrote it, and for which result (``{"result": "run.json"}``).
WEIGHTS_MARKER = ".amp-parity-weights.json"
#: A result holds a few thousand numbers (the weights are beside it, not in it): a few hundred kB for ``recipe``.
#: A file far larger is not one, and is refused rather than read into memory (``report /dev/zero`` read forever).
RESULT_MAX_BYTES = 64 * 2**20
#: A marker names its result and lists its folder's files: a few kB for any matrix. A larger one is not a marker.
MARKER_MAX_BYTES = 2**20
#: How every result file the harness writes begins (``json.dumps(..., indent=2)`` of :meth:`MatrixResult.to_json`, whose
#: first fields are these): what tells a result too large to read from another file, for ``--overwrite``.
_WRITTEN_HEAD = re.compile(rb'\{\n  "schema_version": \d+,\n  "created": "')
#: Weights folders carry the marker since schema 3; older results' folders have none.
_FIRST_MARKED_VERSION = 3


def weights_dir_for(result_path: Path) -> Path:
    """``run.json`` → ``run.weights/``; any other name keeps its suffix: ``run.txt`` → ``run.txt.weights/``.

    So ``B.json`` and ``B.txt`` never share a weights folder. (``B.txt.json`` and ``B.txt`` still map to
    the same one; the claim refuses whichever comes second, see :mod:`harness.store.result_claim`.)
    """
    if result_path.suffix == ".json":
        return result_path.with_suffix(WEIGHTS_SUFFIX)
    return result_path.with_name(result_path.name + WEIGHTS_SUFFIX)


def save_result(result: MatrixResult, path: Path, overwrite: bool = False) -> None:
    """Write ``result`` to ``path`` atomically, its weights paths made relative to ``path``'s folder.

    ``overwrite`` replaces only a result file this harness wrote (never another kind of file).

    Raises:
        ResultError: a cell's final-weights file is gone (the result would name weights that do not exist), ``path``
            exists and ``overwrite`` is false or it is not a result, or its folder is not writable.
    """
    named = [(k, c.id, c.record.weights_path) for k, c in enumerate(result.cells) if c.record is not None and c.record.weights_path]
    gone = [(k, cell_id, weights) for k, cell_id, weights in named if not os.path.isfile(weights)]
    if gone:
        k, cell_id, weights = gone[0]
        raise ResultError(
            f"cannot save the result to {path}: cells[{k}] ({cell_id}) names final weights {weights} "
            f"that are gone ({len(gone)} cell(s) in all), so the file would name weights that do not exist. Run with a staging "
            "folder that outlives the runner (a ResultClaim's, published with the result), and save before removing it."
        )
    check_result_place(path, overwrite)
    try:
        with atomic_path(path) as tmp:
            tmp.write_text(stored_text(result, path), encoding="utf-8")
    except OSError as err:
        raise ResultError(f"cannot write {path}: {err.strerror or err}. Choose a writable path.") from err


def check_result_place(path: Path, overwrite: bool = False) -> None:
    """Refuse ``path`` for a result unless it is free, or ``overwrite`` and a result this harness wrote is there.

    What :func:`save_result` checks before it writes; a command that writes other files first (``merge``'s report)
    calls it before them, so a refused result leaves nothing half-written.

    Raises:
        ResultError: ``path`` exists and ``overwrite`` is false, or it is not a result.
    """
    if os.path.lexists(path):
        if not overwrite:
            raise ResultError(f"{path} already exists; choose another path or pass --overwrite to replace it.")
        if not is_result_file(path):
            raise ResultError(
                f"{path} is not an amp-parity result; --overwrite replaces only those. Move it away or choose another path."
            )


def stored_form(result: MatrixResult, path: Path) -> dict[str, Any]:
    """``result`` as it is stored at ``path``: plain JSON data, weights paths relative to its folder."""
    folder = Path(os.path.abspath(path)).parent
    return result.map_weights_paths(lambda p: Path(os.path.relpath(os.path.abspath(p), folder)).as_posix()).to_json()


def stored_text(result: MatrixResult, path: Path) -> str:
    """The text of ``result``'s file at ``path`` (:func:`stored_form` as indented JSON), the one thing every writer of a
    result writes: refused here if :func:`load_result` would refuse it for its size, so no result is written that its
    own reader (``report``, ``merge``, an ``--overwrite`` onto it) refuses.

    Raises:
        ResultError: over :data:`RESULT_MAX_BYTES` (a merge of many large results): one line with the size and what to do.
    """
    text = json.dumps(stored_form(result, path), indent=2, allow_nan=True) + "\n"
    size = len(text.encode("utf-8"))
    if size > RESULT_MAX_BYTES:
        raise ResultError(
            f"cannot write {path}: the result would be {size / 2**20:.1f} MiB, over the {RESULT_MAX_BYTES // 2**20} MiB a result "
            f"file may hold ({len(result.cells)} cells); nothing was written. Merge fewer results into one (or write the "
            "report alone, without --json)."
        )
    return text


def is_result_file(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a link, device or folder) holding an amp-parity result."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        if path.stat().st_size > RESULT_MAX_BYTES:  # one an older harness wrote over its reader's limit (a large merge)
            with path.open("rb") as handle:
                return _WRITTEN_HEAD.match(handle.read(256)) is not None
        data = read_json_file(path, RESULT_MAX_BYTES)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "schema_version" in data and "cells" in data


def load_result(path: Path, judging: str | None = None, known: Sequence[KnownDifference] | None = None) -> MatrixResult:
    """Read a result file of this schema version or an older one (upgraded on the way), weights paths made absolute,
    and judge it: every verdict is judged again from what the file stores (:func:`harness.judge.assess.assess_result`,
    under ``judging``, by default the policy the run recorded, and ``known``, by default the committed list).

    The verdicts the file holds are never read back: a result is judged the same way however it was written.

    Raises:
        ResultError: unreadable, not a result, from a newer harness, or missing what a result holds (one line each).
        UsageError: an unknown judging policy.
        KnownDifferencesError: the committed known-differences list cannot be read.
    """
    path = Path(path)
    try:
        data = read_json_file(path, RESULT_MAX_BYTES)
    except OSError as err:
        raise ResultError(f"cannot read {path}: {err.strerror or err}.") from err
    except FileSyntaxError as err:
        raise ResultError(f"{path} is not valid JSON ({err}); was it written by `python -m harness run --json`?") from err
    except FileFormatError as err:
        raise ResultError(f"{path} is not a result file: {err}. Name the JSON file `python -m harness run --json` wrote.") from err
    if not isinstance(data, dict) or "schema_version" not in data or "cells" not in data:
        raise ResultError(f"{path} is not an amp-parity result (no schema_version/cells).")
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or (version not in _UPDATES and version != RESULT_SCHEMA_VERSION):
        newer = isinstance(version, int) and version > RESULT_SCHEMA_VERSION
        fix = "upgrade amp-parity to read it" if newer else "re-run `python -m harness run --json` to regenerate it"
        raise ResultError(
            f"{path} has result schema version {version!r}; this harness reads versions {min(_UPDATES)} to "
            f"{RESULT_SCHEMA_VERSION}: {fix}."
        )
    if version != RESULT_SCHEMA_VERSION:
        check_upgradable_shape(data, str(path))  # before the upgrades read it: a broken file is named, not half-upgraded
    for step in range(version, RESULT_SCHEMA_VERSION):
        data = _UPDATES[step](data, path)
    folder = Path(os.path.abspath(path)).parent
    # Every field checked (MatrixResult.from_json), but the stored verdicts: judged again below, never read back.
    result = MatrixResult.from_json(without_verdicts(data), str(path))
    result = _without_absent_traces(result.map_weights_paths(lambda p: os.path.normpath(os.path.join(folder, p))))
    check_consistency(result, str(path))
    if version >= _FIRST_MARKED_VERSION:
        _check_weights_owner(result, path)
    return assess_result(keep_weights(_without_absent_weights(result)), judging, known)


def _without_absent_traces(result: MatrixResult) -> MatrixResult:
    """``result`` without the trace files that are not there (a lean result: docs/results/ keeps no ``.safetensors``), and
    a warning saying so.

    Its pairs are then judged from the pair traces the result stored (``traces``: every traced pair's, with its
    reconciliation), as a result from before cells kept traces is; a file that is there is read and checked against its
    SHA-256 (a replaced one is refused), and a stored pair trace against it.
    """
    absent = [c.id for c in result.cells for t in (c.trace, c.reconciled) if t is not None and not os.path.isfile(t.path)]
    if not absent:
        return result
    gone = set(absent)
    cells = tuple(dataclasses.replace(c, trace=None, reconciled=None) if c.id in gone else c for c in result.cells)
    ids = list(dict.fromkeys(absent))
    note = (f"trace files not present for {len(ids)} cell(s) ({ids[0]}{', ...' if len(ids) > 1 else ''}): their pairs are judged "
            "from the pair traces the result stored (docs/results/README.md)")
    return dataclasses.replace(result, cells=cells, warnings=(*result.warnings, note))


def _without_absent_weights(result: MatrixResult) -> MatrixResult:
    """``result`` without the weights paths whose files are not there (a lean result), and a warning saying so.

    Its pairs are then judged from what it kept of them (:mod:`harness.judge.kept_weights`); a path to nothing is not
    kept, so a result saved again names no weights that do not exist.
    """
    absent = [c.id for c in result.cells if c.record is not None and c.record.weights_path is not None
              and not os.path.isfile(c.record.weights_path)]
    if not absent:
        return result
    cells = tuple(dataclasses.replace(c, record=dataclasses.replace(c.record, weights_path=None)) if c.id in absent and c.record
                  else c for c in result.cells)
    kept = sum(1 for c in result.cells if c.id in absent and c.weights is not None)
    note = (f"final weights not present for {len(absent)} cell(s) ({absent[0]}{', ...' if len(absent) > 1 else ''}): their pairs are "
            f"judged from the digests and measurements the result kept ({kept} of them kept some; docs/results/README.md)")
    return dataclasses.replace(result, cells=cells, warnings=(*result.warnings, note))


def _check_weights_owner(result: MatrixResult, path: Path) -> None:
    """Refuse weights read from this result's own weights folder when its marker says it holds another result's.

    ``mv b.weights a.weights`` (or a run for ``b.json`` whose folder was copied over ``a.weights``) leaves
    ``a.json`` pointing at ``b.json``'s weights: compared as ``a.json``'s, they gave ``b``'s verdicts (two
    copies of one file are "identical"). The marker, written with every weights folder since schema 3,
    says whose they are. A copied or renamed result still points at its original folder, whose marker
    names the original: those weights are its own, and are read.

    Raises:
        ResultError: one line naming the cell, the folder and the result its marker names.
    """
    own = Path(os.path.abspath(weights_dir_for(path)))
    marker = own / WEIGHTS_MARKER
    used = [k for k, c in enumerate(result.cells)
            if c.record is not None and c.record.weights_path is not None and Path(c.record.weights_path).parent == own]
    if not used or not os.path.lexists(marker):  # no marker: a folder from before markers; anything else is read
        return
    try:
        owner = read_weights_marker(marker)["result"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        why = f"{type(err).__name__}: {err}" if not isinstance(err, FileFormatError) else str(err)
        raise ResultError(f"{path}: the marker {marker} cannot be read ({why}); restore the weights "
                          "folder or re-run `python -m harness run --json`.") from err
    if owner != path.name:
        raise ResultError(
            f"{path}: cells[{used[0]}].record.weights_path is in {own}, which holds the weights of {owner!r}, not of "
            f"{path.name!r} (its {WEIGHTS_MARKER} says so): another run's weights folder replaced this one. Restore "
            f"{path.name}'s own weights folder, or re-run `python -m harness run --json`."
        )


def read_weights_marker(marker: Path) -> dict[str, Any]:
    """A weights folder's marker (``{"result": NAME, "files": [...]}``), read as every file is: a regular file, bounded.

    Raises:
        OSError: it cannot be opened.
        ValueError: it is not a regular file, is too large, is not JSON (:class:`harness.files.bounded_read.FileFormatError`),
            or not a JSON object.
    """
    data = read_json_file(marker, MARKER_MAX_BYTES)
    if not isinstance(data, dict):
        raise FileFormatError(f"not a JSON object: {type(data).__name__}")
    return data


def _update_to_3(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Version 2 → 3: a weights path relative to the run's working directory becomes relative to the result.

    Version 2 put the weights in ``<result without suffix>.weights/``; a relative path whose file is
    there is pointed at it, any other is kept as it was (it still works from the run's folder).
    """
    folder = Path(os.path.abspath(path)).parent
    beside = folder / path.with_suffix(WEIGHTS_SUFFIX).name

    def update(stored: str) -> str:
        if os.path.isabs(stored) or not (beside / Path(stored).name).exists():
            return os.path.relpath(os.path.abspath(stored), folder)
        return os.path.relpath(beside / Path(stored).name, folder)

    return _map_stored_weights_paths(data, update) | {"schema_version": 3}


def _update_to_4(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Version 3 → 4: ``speedup_vs_default`` (default ÷ cell) becomes ``time_vs_default`` (cell ÷ default).

    Fields older runs did not write get what the harness of their time meant: ``judging`` the policy
    :func:`harness.judge.pairs.compare_result` applied to a result without one, a timing's ``setup_share``
    its set-up over the median call.
    """
    cells = []
    for k, cell in enumerate(data["cells"]):
        cell = dict(cell)
        speedup = _stored_number(cell.pop("speedup_vs_default", None), path, f"cells[{k}].speedup_vs_default")
        note = cell.pop("speedup_note", None)
        cell["time_vs_default"] = None if not speedup else 1 / speedup
        cell["time_vs_default_note"] = note
        timing = cell.get("timing")
        if isinstance(timing, dict) and "setup_share" not in timing and "setup_seconds" in timing:
            setup = _stored_number(timing["setup_seconds"], path, f"cells[{k}].timing.setup_seconds")
            call = timing.get("call")
            median = _stored_number(call.get("median") if isinstance(call, dict) else call, path, f"cells[{k}].timing.call.median")
            cell["timing"] = timing | {"setup_share": None if setup is None or not median else setup / median}
        cells.append(cell)
    return data | {"schema_version": 4, "cells": cells, "judging": data.get("judging") or DEFAULT_JUDGING}


def _update_to_5(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Version 4 → 5: ``traces`` (each traced pair: where its runs part; nothing was traced before) and the spec's
    ``overflow_point`` (before it, every injected overflow went in after ``backward``)."""
    spec = data["spec"] if isinstance(data.get("spec"), dict) else {}
    return data | {"schema_version": 5, "traces": [], "spec": {"overflow_point": "backward"} | spec}


def _update_to_6(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Version 5 → 6: ``figures`` becomes ``targets`` (each entry's ``figure`` its ``name``), and each cell's
    ``reference_distance`` gets the worst tensor its float64 check named (what a cell is judged from on load)."""
    targets = [({"name": f.get("figure")} | {k: v for k, v in f.items() if k != "figure"}) if isinstance(f, dict) else f
               for f in data.get("figures") or ()]
    cells = []
    for cell in data["cells"]:
        distance, verdict = cell.get("reference_distance"), cell.get("verdict")
        float64 = verdict.get("float64") if isinstance(verdict, dict) else None
        if isinstance(distance, dict) and isinstance(float64, dict):
            distance = distance | {name: float64.get(name) for name in ("worst_tensor", "worst_tensor_rel_error")}
        cells.append(cell | {"reference_distance": distance})
    upgraded = {k: v for k, v in data.items() if k != "figures"}
    return upgraded | {"schema_version": 6, "targets": targets, "cells": cells}


def _update_to_7(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Version 6 → 7: installations as frontends. Before, the frontends were python then r (this harness's own) and python
    the baseline; no installation facts were reported (pairs are judged by the records' libtorch versions, as then)."""
    named = [c.get("frontend") for c in data["cells"] if isinstance(c, dict)]
    frontends = [f for f in ("python", "r") if f in named] + sorted({f for f in named if isinstance(f, str)} - {"python", "r"})
    return data | {"schema_version": 7, "frontends": frontends, "baseline": "python", "sources": []}


#: The optimizer every result before schema 8 ran: the AMP recipe's plain SGD (the ``sgd`` row).
_OPTIMIZER_BEFORE_8 = DEFAULT_OPTIMIZER


def _update_to_8(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Version 7 → 8: the optimizer axis. Every earlier cell ran plain SGD (the ``sgd`` row), so each gets that optimizer
    and the ids that name it (cells, traces, a merge's sources); the float64 reference becomes one trajectory per
    optimizer. ×default now compares within one script: ``cuda_amp_grad_scaler`` had no default of its own then, so its
    cells' ratios (taken over with_autocast's default) are not shown."""
    renamed: dict[str, str] = {}
    cells = []
    for cell in data["cells"]:
        cell = dict(cell) | {"optimizer": _OPTIMIZER_BEFORE_8}
        new = Cell(cell["frontend"], cell["script"], cell["mode"], _OPTIMIZER_BEFORE_8, cell["device"])
        renamed[str(cell.get("id"))] = new.id
        cell |= {"id": new.id, "pair": new.pair}
        # Every ratio or note of a scaler cell that ran spoke of with_autocast's default (a spread too wide, say): none is kept.
        if cell["script"] == "cuda_amp_grad_scaler" and (cell.get("time_vs_default") is not None or cell.get("status") == Status.OK):
            cell |= {"time_vs_default": None,
                     "time_vs_default_note": "not shown: before schema 8 it divided by with_autocast's default cell"}
        cells.append(cell)

    def pair(old: Any) -> Any:  # script-mode-device → script-mode-sgd-device (script and mode names have no '-')
        base, dash, device = str(old).rpartition("-")
        return f"{base}-{_OPTIMIZER_BEFORE_8}-{device}" if dash else old

    traces = [t | {"pair": pair(t.get("pair"))} if isinstance(t, dict) else t for t in data.get("traces") or ()]
    sources = [s | {"cells": [renamed.get(str(c), c) for c in s.get("cells") or ()]} if isinstance(s, dict) else s
               for s in data.get("sources") or ()]
    reference = data.get("reference")
    if isinstance(reference, dict) and reference.get("available"):
        trajectories: list[dict[str, Any]] = [
            {"optimizer": _OPTIMIZER_BEFORE_8, "clip": clip, "skipped_steps": [], "losses": reference.get(name)}
            for clip, name in ((False, "losses"), (True, "losses_clipped")) if reference.get(name) is not None
        ]
        trajectories += [{"optimizer": _OPTIMIZER_BEFORE_8} | dict(r) for r in reference.get("replayed") or () if isinstance(r, dict)]
        reference = {"available": True, "reason": reference.get("reason"), "trajectories": trajectories}
    return data | {"schema_version": 8, "cells": cells, "traces": traces, "sources": sources, "reference": reference}


def _update_to_9(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Version 8 → 9: ``provenance`` (unknown before: it says so) and each cell's kept final weights (none kept before:
    :func:`load_result` keeps them now where the weights files are still there)."""
    cells = [cell | {"weights": None} if isinstance(cell, dict) else cell for cell in data["cells"]]
    return data | {"schema_version": 9, "provenance": Provenance.unknown().to_json(), "cells": cells}


def _update_to_10(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Version 9 → 10: ``phases``, where the run's time went (not recorded before: none)."""
    return data | {"schema_version": 10, "phases": []}


def _stored_number(value: Any, path: Path, where: str) -> float | None:
    """``value`` if it is a number or null; an upgrade step computes with it.

    Raises:
        ResultError: it is another type (one line naming the field).
    """
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    raise ResultError(f"{path}: {where} must be a number or null, but got {value!r:.60}; a result edited by hand? "
                      "Re-run `python -m harness run --json`, or restore the file.")


#: The step that upgrades a file of each older version by one.
_UPDATES: dict[int, Callable[[dict[str, Any], Path], dict[str, Any]]] = {2: _update_to_3, 3: _update_to_4, 4: _update_to_5, 5: _update_to_6,
                                                                      6: _update_to_7, 7: _update_to_8, 8: _update_to_9,
                                                                      9: _update_to_10}


def _map_stored_weights_paths(result: dict[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    """Apply ``change`` to every cell record's ``weights_path`` (in place); records without one are kept."""
    cells = result.get("cells")
    for cell in cells if isinstance(cells, list) else ():
        record = cell.get("record") if isinstance(cell, dict) else None
        if isinstance(record, dict) and isinstance(record.get("weights_path"), str):
            record["weights_path"] = change(record["weights_path"])
    return result
