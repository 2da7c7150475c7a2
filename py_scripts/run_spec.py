"""What a script reads from its run spec: the mode's properties, dtypes by their contract names and the fixture tensors.
The twin of ``r_scripts/run_spec.R``.

The Python scripts' shared code is split by job, each module the twin of the R file of its stem (the same names in the
same order: tests/unit/scripts/test_r_scripts.py checks it): this one; :mod:`py_scripts.model` (the run spec's model,
its parameters by name), :mod:`py_scripts.optimizer`, :mod:`py_scripts.scaler`, :mod:`py_scripts.features` (each kind
of loop feature's hooks), :mod:`py_scripts.checkpoint`, :mod:`py_scripts.loop` (the training loop's frame both scripts
share), :mod:`py_scripts.tracing`, :mod:`py_scripts.timing`, :mod:`py_scripts.record`, :mod:`py_scripts.patches` and
:mod:`py_scripts.shell`; each model's forward is a module of :mod:`py_scripts.models`. The contract both halves follow is
``docs/contract.md``. Only plain data leaves the scripts: the run record is a dict of numbers, strings and lists, the
final weights a safetensors file. A script run by hand goes through :mod:`py_scripts.shell`; the harness's worker
imports the scripts (harness/worker_side/python_handler.py).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from safetensors.torch import load_file

__all__ = ["dtype_name", "load_fixtures", "mode_properties", "torch_dtype"]


def mode_properties(spec: dict[str, Any], mode: str) -> dict[str, Any]:
    """What ``mode`` does (autocast, the weights' dtype, the loss scaler, clipping), from the modes the run spec declares
    for this script (docs/contract.md); a mode the script does not run is refused, naming the ones it does."""
    modes = spec["modes"]
    if mode not in modes:
        raise ValueError(f"mode must be one of {', '.join(repr(m) for m in modes)}, but got {mode!r}.")
    properties: dict[str, Any] = modes[mode]
    return properties


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype for a contract dtype name (``bfloat16``, ``float16``, ...): torch's own of that name."""
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype must name a dtype of torch, but got {name!r}.")
    return dtype


def dtype_name(dtype: torch.dtype, spec: dict[str, Any]) -> str:
    """The contract's name for a torch dtype (``torch.bfloat16`` → ``bfloat16``), one of the run spec's ``dtypes``
    (harness/contract/dtypes.py; R maps libtorch's names back through the same table)."""
    name = str(dtype).removeprefix("torch.")
    if name not in spec["dtypes"]:
        raise ValueError(f"Unexpected dtype {name!r}: expected one of {', '.join(map(repr, spec['dtypes']))}.")
    return name


#: The last fixture file loaded, on its device, keyed by (path, mtime, size, device).
_fixture_cache: dict[tuple[str, int, int, str], dict[str, torch.Tensor]] = {}


def load_fixtures(spec: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The fixture tensors on the spec's device (the same file R loads with ``safe_load_file``).

    The last file loaded stays in memory for the next call in this process: the harness times
    repeated calls, and a timed round must measure training, not reading a gigabyte from disk (at
    ``recipe``). A rewritten file (new mtime or size) is read again. The tensors are never written to.
    """
    stat = os.stat(spec["fixture_path"])
    key = (spec["fixture_path"], stat.st_mtime_ns, stat.st_size, spec["device"])
    if key not in _fixture_cache:
        _fixture_cache.clear()  # one file at a time: a recipe fixture is a gigabyte
        _fixture_cache[key] = load_file(spec["fixture_path"], device=spec["device"])
    return _fixture_cache[key]
