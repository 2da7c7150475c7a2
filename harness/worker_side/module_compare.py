"""The module sweep's comparison, in the Python worker: both languages' files of one ``module_db`` entry read back and
compared, tensor by tensor (the facts :mod:`harness.judge.modules` judges).

The scripts (``py_scripts/modules.py`` and ``r_scripts/modules.R``) write each sample's tensors in every mode; this reads
them, as the trace recorder reads a cell's points: the worker's measurement, not a script's job. A bfloat16 tensor is
compared as torch holds it (NumPy has no bfloat16), so this runs where torch is: the Python worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

__all__ = ["compare_module"]


def compare_module(request: dict[str, Any]) -> dict[str, Any]:
    """Both languages' outputs of one entry compared: per sample and mode, per tensor, the facts the judge reads.

    ``request``: ``folder``, ``samples`` (each ``{"index", "modes": [names R ran]}``), ``switch`` (compare the Python
    runs made with that switch on; default the plain ones). Each tensor: ``python_dtype``,
    ``r_dtype``, ``python_shape``, ``r_shape``, ``identical`` (bitwise, same dtype and shape), ``max_abs`` (between the
    two, in float64), and ``python_f64`` / ``r_f64``: each side's largest difference from float64, relative to the
    float64 tensor's largest magnitude. A name one side lacks is listed in ``missing``.
    """
    folder = Path(request["folder"])
    suffix = "python" if request.get("switch") is None else f"python.{request['switch']}"
    answers = []
    for sample in request["samples"]:
        base = folder / f"{sample['index']}"
        ref_path = Path(str(base) + ".float64.python.safetensors")
        reference = load_file(str(ref_path)) if ref_path.is_file() else {}
        modes = {}
        for mode in sample["modes"]:
            py = load_file(str(base) + f".{mode}.{suffix}.safetensors")
            r = load_file(str(base) + f".{mode}.r.safetensors")
            modes[mode] = _compare(py, r, reference)
        init = {}
        init_r = Path(str(base) + ".init.r.safetensors")
        if init_r.is_file():
            py_init = {k.removeprefix("init."): v for k, v in load_file(str(base) + ".inputs.safetensors").items()
                       if k.startswith("init.")}
            init = _compare(py_init, load_file(str(init_r)), {})
        answers.append({"index": sample["index"], "modes": modes, "init": init})
    return {"samples": answers}


def _compare(py: dict[str, torch.Tensor], r: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> dict[str, Any]:
    tensors = {}
    for name in sorted(set(py) & set(r)):
        a, b = py[name], r[name]
        same = a.dtype == b.dtype and a.shape == b.shape
        fact: dict[str, Any] = {"python_dtype": str(a.dtype).removeprefix("torch."),
                                "r_dtype": str(b.dtype).removeprefix("torch."),
                                "python_shape": list(a.shape), "r_shape": list(b.shape)}
        identical = same and _bitwise(a, b)
        fact["identical"] = identical
        if not identical and a.numel() == b.numel():
            fact["max_abs"] = _max_abs(a.double().reshape(-1), b.double().reshape(-1))
        ref = reference.get(name)
        if ref is not None and ref.is_floating_point() and ref.numel() == a.numel() == b.numel():
            fact["python_f64"] = _relative(a, ref)
            fact["r_f64"] = _relative(b, ref)
        tensors[name] = fact
    return {"tensors": tensors, "missing": {"python": sorted(set(r) - set(py)), "r": sorted(set(py) - set(r))}}


def _bitwise(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0:
        return True
    if a.is_floating_point():
        width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return bool(torch.equal(a.contiguous().view(width), b.contiguous().view(width)))
    return bool(torch.equal(a, b))


def _max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.numel() == 0:
        return 0.0
    d = (a - b).abs()
    d = torch.where(torch.isnan(a) & torch.isnan(b), torch.zeros_like(d), d)
    return float(d.max())


def _relative(value: torch.Tensor, ref: torch.Tensor) -> float:
    if ref.numel() == 0:
        return 0.0
    ref = ref.double().reshape(-1)
    v = value.double().reshape(-1)
    both_nan = torch.isnan(ref) & torch.isnan(v)
    d = torch.where(both_nan, torch.zeros_like(v), (v - ref).abs())
    scale = float(torch.where(torch.isfinite(ref), ref.abs(), torch.zeros_like(ref)).max())
    return float(d.max()) / max(scale, 1e-30)
