"""What a call leaves behind: its final weights and its run record. The twin of ``r_scripts/record.R``."""

from __future__ import annotations

import functools
import json
import os
import platform
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from py_scripts.model import named_parameters
from py_scripts.timing import CLOCK_NAME, clock

__all__ = ["device_name", "make_record", "record_to_json", "save_final_weights", "static_fields"]


def save_final_weights(net: torch.nn.Module, path: str | None) -> None:
    """The trained weights, named like the fixtures, as a CPU float32 safetensors file; nothing when ``path`` is None.

    The harness passes no path in timed rounds after the first call: their weights equal the first's.
    """
    if path is None:
        return
    # float32 whatever the weights' dtype: a bfloat16 or float16 weight (the lowp_weights modes) is exactly a float32, and
    # NumPy, which judges the weights, has no bfloat16.
    tensors = {name: param.detach().to("cpu", torch.float32).contiguous() for name, param in named_parameters(net)}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, path)
    # safetensors writes a mkstemp file (0600) and renames it: give it the mode a plain write gives, as R's has.
    mask = os.umask(0o022)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def make_record(spec: dict[str, Any], workload_start: float, **fields: Any) -> dict[str, Any]:
    """The run record with exactly the run spec's ``record_fields`` (harness/contract/record.py, the one list both
    languages read); a missing or extra field is a script bug.

    ``seconds_workload`` is stamped last, from ``workload_start`` (the first line of ``run_workload``), so
    building the record is the script's own cost: what the harness calls its bridge starts after it.
    The version strings are the same for every call of a process, so they are looked up once.
    """
    for name, value in static_fields().items():
        fields.setdefault(name, value)
    fields.setdefault("schema_version", spec["record_schema_version"])
    fields["seconds_workload"] = clock() - workload_start
    expected = list(spec["record_fields"])  # each field's kind by name: JSON knows a list here (R's writer reads the kinds)
    if set(fields) != set(expected):
        missing, extra = set(expected) - set(fields), set(fields) - set(expected)
        raise RuntimeError(f"run record fields differ from the contract: missing {sorted(missing)}, extra {sorted(extra)}")
    return {name: fields[name] for name in expected}


@functools.cache
def static_fields() -> dict[str, Any]:
    """The record fields that are the same for every call of a process, looked up once.

    ``str()``: ``torch.__version__`` is a ``TorchVersion``, and unpickling one in the harness's process would import torch there.
    """
    return {
        "frontend": "python", "torch_version": str(torch.__version__),
        "libtorch_version": torch.__version__.split("+")[0], "language_version": f"Python {platform.python_version()}",
        "clock": CLOCK_NAME,
    }


def device_name(device: str) -> str:
    """``cpu`` or the CUDA device's name."""
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


def record_to_json(record: dict[str, Any]) -> str:
    """The record as one JSON line (the shell summary and what the worker returns)."""
    return json.dumps(record, allow_nan=True)
