"""The matrix result: one versioned JSON file (plus a folder of final-weights files beside it).

Results are written atomically and never overwritten by accident; a file from another schema version
is refused with what to do, not half-read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.atomic import write_json_atomic
from harness.errors import ResultError

__all__ = ["CELL_STATUSES", "RECORD_SCHEMA_VERSION", "RESULT_SCHEMA_VERSION", "load_result", "save_result", "weights_dir_for"]

#: Version 2 added the timing protocol (``protocol``, per-cell ``timing``), ``peaks``, ``efficiency``,
#: ``memory`` and GEMM profiles.
RESULT_SCHEMA_VERSION = 2
#: The run record's version, written by py_scripts/common.py and r_scripts/common.R (2: seconds_workload,
#: gc_seconds; 3: ``clock``, the clock the frontend timed its loop with).
RECORD_SCHEMA_VERSION = 3
#: ``ok``: a record came back; ``unsupported``: the binding refused a cell it is known not to support
#: (the binding's own message is the reason); ``skipped``: the frontend is not available here;
#: ``numerical_failure``: non-finite loss in a mode without a scaler; ``error``: anything else.
CELL_STATUSES = ("ok", "unsupported", "skipped", "numerical_failure", "error")


def weights_dir_for(result_path: Path) -> Path:
    """``run.json`` → ``run.weights/``: the final-weights files live beside their result."""
    return result_path.with_suffix(".weights")


def save_result(result: dict[str, Any], path: Path, overwrite: bool = False) -> None:
    """Write ``result`` to ``path`` atomically.

    Raises:
        ResultError: ``path`` exists and ``overwrite`` is false, or its folder is not writable.
    """
    if path.exists() and not overwrite:
        raise ResultError(f"{path} already exists; choose another path or pass --overwrite to replace it.")
    try:
        write_json_atomic(path, result)
    except OSError as err:
        raise ResultError(f"cannot write {path}: {err.strerror or err}. Choose a writable path.") from err


def load_result(path: Path) -> dict[str, Any]:
    """Read a result file of this schema version.

    Raises:
        ResultError: unreadable, not a result, or another schema version (with what to do).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise ResultError(f"cannot read {path}: {err.strerror or err}.") from err
    except ValueError as err:
        raise ResultError(f"{path} is not valid JSON ({err}); was it written by `python -m harness run --json`?") from err
    if not isinstance(data, dict) or "schema_version" not in data or "cells" not in data:
        raise ResultError(f"{path} is not an amp-parity result (no schema_version/cells).")
    version = data["schema_version"]
    if version != RESULT_SCHEMA_VERSION:
        newer = isinstance(version, int) and version > RESULT_SCHEMA_VERSION
        fix = "upgrade amp-parity to read it" if newer else "re-run `python -m harness run --json` to regenerate it"
        raise ResultError(
            f"{path} has result schema version {version!r}; this harness reads version {RESULT_SCHEMA_VERSION}: {fix}."
        )
    return data
