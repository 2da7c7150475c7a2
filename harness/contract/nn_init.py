"""Every ``nn_init_*`` function R torch ships, with the shapes and options PyTorch users pass it: declared once.

One row per function of ``torch.nn.init`` that R torch ships as ``nn_init_<function>`` (R torch 0.17.0.9000:
``grep("^nn_init_", ls("package:torch"))``, 15 functions). :func:`init_cases` expands each row into cases (shape ×
dtype × options); both twin scripts (``py_scripts/nn_init.py`` ↔ ``r_scripts/nn_init.R``) read the same cases as JSON,
run each after the same manual seed on a fresh ``empty`` tensor, and write the results (or the error, in the binding's own
words) to a safetensors file; :mod:`harness.judge.init_parity` compares them bitwise and explains each difference.
``python -m harness inits`` runs it (docs/init-parity.md has what it found).

The option names are both bindings' (``a``, ``b``, ``mean``, ``std``, ``gain``, ``mode``, ``nonlinearity``, ``val``,
``sparsity``, ``groups``, ``param``: R torch kept PyTorch's). Values are those the PyTorch documentation and its own modules
pass (the reason is beside each). Shapes PyTorch refuses for a function are kept: a binding that accepts what the other
refuses is a finding too.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["INIT_ROWS", "INIT_SEED", "InitRow", "InitVerdict", "case_id", "init_cases", "init_cases_json"]


class InitVerdict(StrEnum):
    """What a case of the nn_init comparison comes to (harness/judge/init_parity.py says how each is decided)."""

    IDENTICAL = "identical"
    DIVERGED = "diverged"
    UNSUPPORTED = "unsupported"
    R_ACCEPTS = "r_accepts"
    BOTH_REFUSE = "both_refuse"

#: The manual seed set before each case, in both languages: any fixed seed does (both bindings seed libtorch's CPU
#: generator, a Mersenne Twister, with it).
INIT_SEED = 0

#: A Linear layer's weight (out 5, in 3: fan_in 3, fan_out 5).
LINEAR = (5, 3)
#: A wide Linear weight (rows < cols: orthogonal_ takes the QR of the transpose).
WIDE = (3, 5)
#: A Conv2d weight (out 4, in 3, 3x3 kernel: fan_in 27, fan_out 36; R computes the receptive field with 1-based dims).
CONV2D = (4, 3, 3, 3)
#: A bias or a 1-D parameter: allowed only where the function needs no fans (PyTorch refuses it elsewhere; kept there to
#: see whether R refuses it too).
VECTOR = (7,)
#: A Conv1d and a Conv3d weight, for dirac_ (3, 4 or 5 dimensions).
CONV1D = (4, 2, 3)
CONV3D = (4, 2, 3, 3, 3)
#: A bigger matrix: more than 16 elements, so normal_ takes its vectorised path (16 at a time) for most of it.
BIG = (20, 30)


@dataclass(frozen=True)
class InitRow:
    """One function: ``function`` is torch.nn.init's name (R torch's is ``nn_init_<function>``); ``options``, each a case's
    keyword arguments; ``shapes`` the tensors it initialises (none for ``calculate_gain``, which returns a number);
    ``dtypes`` theirs; ``why`` the reason for the options."""

    function: str
    options: tuple[dict[str, Any], ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...] = ("float32", "float64")
    why: str = ""


_FLOATS = ("float32", "float64")
INIT_ROWS: tuple[InitRow, ...] = (
    InitRow("calculate_gain", (
        {"nonlinearity": "linear"}, {"nonlinearity": "conv2d"}, {"nonlinearity": "sigmoid"}, {"nonlinearity": "tanh"},
        {"nonlinearity": "relu"}, {"nonlinearity": "leaky_relu"}, {"nonlinearity": "leaky_relu", "param": 0.2},
        {"nonlinearity": "selu"},
    ), (), ("float64",), why="every nonlinearity PyTorch's calculate_gain names (its result is a number, stored as float64)"),
    InitRow("uniform_", ({}, {"a": -0.5, "b": 2.0}), (LINEAR, CONV2D, VECTOR, BIG), why="the default U(0, 1) and a shifted interval"),
    InitRow("normal_", ({}, {"mean": 0.5, "std": 2.0}), (LINEAR, CONV2D, VECTOR, BIG), why="the default N(0, 1) and another mean and std"),
    InitRow("trunc_normal_", ({}, {"mean": 0.5, "std": 2.0, "a": -1.0, "b": 3.0}, {"a": 1.0, "b": 4.0}),
            (LINEAR, CONV2D, VECTOR), why="the default [-2, 2] (ViT's init), a shifted one, and a tail (most mass outside)"),
    InitRow("constant_", ({"val": 0.3},), (LINEAR, VECTOR), why="a bias filled with a constant"),
    InitRow("ones_", ({},), (LINEAR, VECTOR), why="a norm layer's weight"),
    InitRow("zeros_", ({},), (LINEAR, VECTOR), why="a bias"),
    InitRow("eye_", ({},), (LINEAR, WIDE, CONV2D), why="identity init of a square or rectangular Linear weight"),
    InitRow("dirac_", ({}, {"groups": 2}), (CONV1D, CONV2D, CONV3D, LINEAR), ("float32",),
            why="identity-preserving convolutions (groups 2: a grouped convolution's weight)"),
    InitRow("xavier_uniform_", ({}, {"gain": math.sqrt(2.0)}), (LINEAR, CONV2D, VECTOR),
            why="Glorot's default, and the gain calculate_gain('relu') gives"),
    InitRow("xavier_normal_", ({}, {"gain": 5.0 / 3}), (LINEAR, CONV2D, VECTOR), why="Glorot's default, and tanh's gain"),
    InitRow("kaiming_uniform_", (
        {}, {"a": math.sqrt(5.0)}, {"mode": "fan_out", "nonlinearity": "relu"}, {"a": 0.1, "nonlinearity": "leaky_relu"},
        {"nonlinearity": "tanh"}, {"nonlinearity": "selu"},
    ), (LINEAR, CONV2D, VECTOR), why="the default; a = sqrt(5), what nn.Linear and nn.Conv2d's reset_parameters pass; "
                                     "ResNet's fan_out/relu; a leaky slope; tanh; selu (the gain PyTorch documents for it)"),
    InitRow("kaiming_normal_", (
        {}, {"mode": "fan_out", "nonlinearity": "relu"}, {"a": 0.1, "nonlinearity": "leaky_relu"}, {"nonlinearity": "selu"},
    ), (LINEAR, CONV2D, VECTOR), why="the default; ResNet's fan_out/relu (torchvision); a leaky slope; selu"),
    InitRow("orthogonal_", ({}, {"gain": 2.0}), (LINEAR, WIDE, CONV2D, BIG, VECTOR), why="the default and a gain (RNN weights)"),
    InitRow("sparse_", ({"sparsity": 0.3}, {"sparsity": 0.5, "std": 0.02}), (LINEAR, BIG), ("float32",),
            why="Martens' sparse init at two sparsities"),
)


def case_id(function: str, shape: tuple[int, ...], dtype: str, options: dict[str, Any]) -> str:
    """``kaiming_uniform_ 4x3x3x3 float32 mode=fan_out,nonlinearity=relu``: a case's name, a safetensors key."""
    written = ",".join(f"{k}={v!r}" for k, v in options.items()) or "defaults"
    return f"{function} {'x'.join(map(str, shape)) or 'number'} {dtype} {written}"


def init_cases(rows: tuple[InitRow, ...] = INIT_ROWS) -> list[dict[str, Any]]:
    """Every case of ``rows``: ``{"id", "function", "shape", "dtype", "options"}`` (``shape`` is null for a number)."""
    cases = []
    for row in rows:
        for shape in row.shapes or (None,):
            for dtype in row.dtypes:
                for options in row.options:
                    cases.append({"id": case_id(row.function, shape or (), dtype, options), "function": row.function,
                                  "shape": None if shape is None else list(shape), "dtype": dtype, "options": dict(options)})
    return cases


def init_cases_json(rows: tuple[InitRow, ...] = INIT_ROWS) -> str:
    """What both scripts read: the seed and the cases."""
    return json.dumps({"seed": INIT_SEED, "cases": init_cases(rows)}, indent=1)
