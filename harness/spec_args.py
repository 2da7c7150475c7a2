"""Spec fields as command-line flags: ``--batch-size``, ``--lr``, ... named after the fields.

One parser for every entry point (``harness run``, ``harness prepare``, the Python scripts' shell
mode, and through ``prepare`` the R scripts' shell mode), so a flag means the same everywhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from harness.errors import SpecError
from harness.spec import AMP_DTYPES, DEVICES, MODES, PRESETS, WorkloadSpec

__all__ = ["add_spec_arguments", "spec_from_args"]

_HELP = {
    "batch_size": "rows per batch", "in_size": "input and hidden width", "out_size": "output width",
    "num_layers": "Linear layers", "num_batches": "batches per epoch", "epochs": "passes over the batches",
    "lr": "SGD learning rate", "seed": "fixture seed", "device": f"one of {', '.join(DEVICES)}",
    "amp_dtype": f"autocast dtype: {', '.join(AMP_DTYPES)} (default: bfloat16 on cpu, float16 on cuda)",
    "init_scale": "GradScaler initial scale", "growth_factor": "GradScaler growth factor",
    "backoff_factor": "GradScaler backoff factor", "growth_interval": "GradScaler growth interval",
    "clip_max_norm": "max gradient norm in autocast_scaler_clip", "threads": "torch threads (0 = all cores)",
    "overflow_steps": "comma-separated 0-based steps at which the scaler modes put an inf into one gradient (e.g. 3,7)",
}


def add_spec_arguments(parser: argparse.ArgumentParser, with_modes: bool = True) -> None:
    """Add ``--preset``, ``--spec-file``, one flag per spec field, and (optionally) ``--mode``."""
    group = parser.add_argument_group("workload spec (any field overrides the preset)")
    group.add_argument("--preset", default=None, help=f"one of {', '.join(PRESETS)} (default tiny)")
    group.add_argument("--spec-file", type=Path, default=None, help="a JSON object of spec fields")
    for field in dataclasses.fields(WorkloadSpec):
        if field.name == "preset":
            continue
        group.add_argument(
            "--" + field.name.replace("_", "-"), dest=field.name, default=None,
            type=_CONVERTERS.get(str(field.type), str), help=_HELP.get(field.name),
        )
    if with_modes:
        parser.add_argument(
            "--mode", action="append", default=None,
            help=f"mode(s) to run, repeatable or comma-separated: {', '.join(MODES)}",
        )


def spec_from_args(args: argparse.Namespace) -> WorkloadSpec:
    """The spec: preset, then the spec file's fields, then the command line's flags.

    Raises:
        SpecError: an invalid value or an unreadable spec file.
    """
    values: dict[str, Any] = {}
    if args.spec_file is not None:
        values.update(_read_spec_file(args.spec_file))
    for field in dataclasses.fields(WorkloadSpec):
        given = getattr(args, field.name, None)
        if given is not None and field.name != "preset":
            values[field.name] = given
    preset = args.preset or values.pop("preset", None) or "tiny"
    values.pop("preset", None)
    return WorkloadSpec.from_preset(str(preset), **values)


def _read_spec_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise SpecError("spec_file", str(path), f"a readable file ({err.strerror})") from err
    except ValueError as err:
        raise SpecError("spec_file", str(path), f"valid JSON ({err})") from err
    if not isinstance(data, dict):
        raise SpecError("spec_file", str(path), "a JSON object of spec fields")
    return data


def _to_int(text: str) -> int:
    """argparse prefixes the flag's name, so the message says what is allowed and what was got."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def _to_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _to_steps(text: str) -> tuple[int, ...]:
    """``3,7`` → (3, 7); an empty string is no steps. Range, order and repeats are the spec's to check."""
    return tuple(_to_int(part.strip()) for part in text.split(",") if part.strip())


#: The flag converter for each annotation of a WorkloadSpec field (anything else is text).
_CONVERTERS = {"int": _to_int, "float": _to_float, "tuple[int, ...]": _to_steps}
