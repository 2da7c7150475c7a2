"""The run spec handed to a script: the validated spec, its fixture file and where weights go.

``python -m harness prepare`` prints it, which is how the R scripts' shell mode gets a spec validated
by the same code as everything else and fixtures drawn by the same generator.
"""

from __future__ import annotations

import argparse
import secrets
import tempfile
from pathlib import Path
from typing import Any

from harness.errors import SpecError
from harness.fixtures import FixtureFile, ensure_fixtures
from harness.spec import WorkloadSpec
from harness.spec_args import add_spec_arguments, spec_from_args

__all__ = ["prepare_from_argv", "prepare_run_spec"]


def prepare_run_spec(
    spec: WorkloadSpec, weights_out: Path | None = None, fixture: FixtureFile | None = None, save_weights: bool = True
) -> dict[str, Any]:
    """Plain data for ``run_workload(spec, mode)``: the spec's fields plus ``fixture_path`` and ``weights_out``.

    ``fixture``, when given, is an already verified fixture file (skips re-hashing it: at ``recipe``
    that is a gigabyte, which must not land inside a timed benchmark round). ``save_weights=False``
    sets ``weights_out`` to null: the script writes no weights (a timed round after the first call).
    """
    fixture = fixture or ensure_fixtures(spec)
    if not save_weights:
        return {**spec.to_dict(), "fixture_path": str(fixture.path), "weights_out": None}
    if weights_out is None:  # a fresh name, not a folder: a call that never runs the script leaves nothing behind
        weights_out = Path(tempfile.gettempdir()) / f"amp-parity-final-weights-{secrets.token_hex(6)}.safetensors"
    return {**spec.to_dict(), "fixture_path": str(fixture.path), "weights_out": str(weights_out)}


def prepare_from_argv(argv: list[str], modes: tuple[str, ...], prog: str) -> tuple[dict[str, Any], str]:
    """Shell mode of a script: its flags → (run spec, the one mode this script was asked to run).

    Raises:
        SpecError: no ``--mode``, a mode this script does not run, or an invalid spec value.
    """
    parser = argparse.ArgumentParser(prog=prog, description="Run one mode of this script and print its run record as JSON.")
    add_spec_arguments(parser, with_modes=False)
    parser.add_argument("--mode", required=False, help=f"one of {', '.join(modes)}")
    parser.add_argument("--weights-out", type=Path, default=None, help="where to write the final weights")
    args = parser.parse_args(argv)
    if args.mode not in modes:
        raise SpecError("mode", args.mode, f"one of {', '.join(repr(m) for m in modes)} for {prog}")
    return prepare_run_spec(spec_from_args(args), args.weights_out), args.mode
