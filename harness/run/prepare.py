"""The run spec handed to a script: the validated spec, its fixture file and where weights go.

``python -m harness prepare`` prints it, which is how the R scripts' shell mode gets a spec validated
by the same code as everything else and fixtures drawn by the same generator.
"""

from __future__ import annotations

import argparse
import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Any

from harness.contract.modes import SCRIPTS
from harness.contract.optimizers import DEFAULT_OPTIMIZER
from harness.errors import ExitCode, SpecError, UsageError
from harness.workload.features import NO_FEATURE
from harness.workload.fixtures import FixtureFile, ensure_fixtures
from harness.workload.flags import OneLineParser, add_spec_arguments, path_argument, spec_from_args
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.run_spec import run_spec_for
from harness.workload.spec import WorkloadSpec

__all__ = [
    "add_scaler_lift_argument",
    "add_weights_out_arguments",
    "check_shell_mode",
    "check_shell_optimizer",
    "path_argument",
    "check_weights_out",
    "parse_shell_args",
    "prepare_run_spec",
    "prepare_shell_run",
    "prepare_shell_run_spec",
    "require_device",
]


#: The presets whose loops are too short for a full collection of R's garbage before them to pay (see
#: :func:`collect_before_loop`).
_YOUNG_COLLECTION_PRESETS = ("tiny",)


def collect_before_loop(spec: WorkloadSpec) -> str:
    """What R collects before its timed loop: ``full`` (every generation) or ``young`` (the young generation only).

    R frees a tensor only when its collector finds it dead, and a young collection leaves the previous call's promoted
    tensors held, so the next loop allocates afresh and pays page faults in some rounds: a full collection (and, with it,
    any escalation of R's collector due within the loop, ``collect_ahead()`` in timing.R) keeps ``bench`` and ``recipe``
    loops quiet. It costs about as much as a whole ``tiny`` call, so ``tiny`` keeps the young one. The measurements are
    in docs/timing.md (R's young collection before the loop). Python has nothing to collect: its script ignores this.
    """
    return "young" if spec.preset in _YOUNG_COLLECTION_PRESETS else "full"


def prepare_run_spec(
    spec: WorkloadSpec, script: str, optimizer: str, weights_out: Path | None = None, fixture: FixtureFile | None = None,
    save_weights: bool = True, scaler_lift: bool = True, switches: tuple[str, ...] = (), feature: str = NO_FEATURE,
) -> dict[str, Any]:
    """Plain data for ``run_workload(spec, mode)`` of ``script`` with ``optimizer``: the spec's fields plus ``fixture_path``,
    ``weights_out``, ``scaler_lift`` and the contract's part (:func:`harness.workload.run_spec.run_spec_for`: the
    script's modes, the optimizer row, the ``switches`` to apply and the record's fields).

    ``fixture``, when given, is an already verified fixture file (skips re-hashing it: at ``recipe``
    that is a gigabyte, which must not land inside a timed benchmark round). ``save_weights=False``
    sets ``weights_out`` to null: the script writes no weights (a timed round after the first call).
    ``scaler_lift``: whether R's scaler script may lift R torch's CUDA-only check on CPU (docs/contract.md);
    not a spec field, so it changes no digest: it decides whether the cell runs, not what it computes. Nor is
    ``collect_before_loop`` (:func:`collect_before_loop`): it decides how the loop is timed, not what it computes.
    """
    fixture = fixture or ensure_fixtures(spec)
    if save_weights and weights_out is None:  # a fresh name, not a folder: a call that never runs the script leaves nothing behind
        weights_out = Path(tempfile.gettempdir()) / f"amp-parity-final-weights-{secrets.token_hex(6)}.safetensors"
    return run_spec_for(spec, script, optimizer, str(fixture.path), str(weights_out) if save_weights else None, scaler_lift,
                        collect_before_loop(spec), switches, feature).to_json()


def add_scaler_lift_argument(parser: argparse.ArgumentParser) -> None:
    """``--no-scaler-lift``: run R torch's scaler on CPU as R torch ships it (its cells are then unsupported)."""
    parser.add_argument(
        "--no-scaler-lift", dest="scaler_lift", action="store_false",
        help="on CPU, do not lift the CUDA-only check of R torch's cuda_amp_grad_scaler() (its cells are then unsupported)",
    )


def add_weights_out_arguments(parser: argparse.ArgumentParser) -> None:
    """``--weights-out FILE`` and ``--overwrite``: the shell modes' (Python's and, through ``prepare``, R's)."""
    parser.add_argument("--weights-out", type=path_argument, default=None, help="where the script writes its final weights")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --weights-out file (a regular file only)")


def parse_shell_args(argv: list[str], script: str, prog: str) -> argparse.Namespace:
    """A script's shell-mode flags: the spec flags, ``--mode``, ``--optimizer``, ``--weights-out``, ``--overwrite`` and ``--debug``.

    A usage error prints one ``error:`` line and exits ``USAGE_ERROR`` (:class:`harness.workload.flags.OneLineParser`).
    """
    parser = OneLineParser(prog=prog, description="Run one mode of this script and print its run record as JSON.")
    add_spec_arguments(parser, with_modes=False)
    parser.add_argument("--mode", required=False, help=f"one of {', '.join(SCRIPTS[script].mode_names)}")
    parser.add_argument("--optimizer", default=DEFAULT_OPTIMIZER,
                        help=f"the optimizer (default {DEFAULT_OPTIMIZER}): one of {', '.join(OPTIMIZERS)}")
    add_weights_out_arguments(parser)
    add_scaler_lift_argument(parser)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return parser.parse_args(argv)


def check_shell_mode(mode: str | None, script: str, prog: str) -> str:
    """``mode`` if the script ``prog`` (the pair ``script``) runs it (the shell modes of both languages check it here).

    Raises:
        SpecError: no ``--mode``, or one the script does not run; the line names the script's modes.
    """
    modes = SCRIPTS[script].mode_names
    if mode not in modes:
        raise SpecError("mode", mode, f"one of {', '.join(repr(m) for m in modes)} for {prog}")
    return mode


def check_shell_optimizer(optimizer: str) -> str:
    """``optimizer`` if the table has it.

    Raises:
        SpecError: an unknown optimizer; the line names them all.
    """
    if optimizer not in OPTIMIZERS:
        raise SpecError("optimizer", optimizer, f"one of {', '.join(OPTIMIZERS)}")
    return optimizer


def prepare_shell_run(argv: list[str], script: str, prog: str) -> dict[str, Any]:
    """R's shell mode in one call: ``argv`` parsed as ``prog``'s flags, its mode checked, and the run spec.

    ``Rscript r_scripts/with_autocast.R ARGS`` hands its ``ARGS`` here unparsed (through ``python -m harness
    prepare --shell-of with_autocast.R -- ARGS``), so both languages' scripts
    take the same flags, print the same ``--help`` and refuse the same input in the same one line: there is
    one parser. ``--help`` prints the help and exits 0; a usage error prints one ``error:`` line and exits ``USAGE_ERROR``.

    Returns:
        ``{"mode": ..., "debug": ..., "spec": <the run spec>, "exit_status": {"usage_error": 4, "internal_error": 3}}``:
        the statuses the R script ends with on its own errors, from :class:`harness.errors.ExitCode` (one place for both
        languages).

    Raises:
        SpecError, UsageError: as :func:`check_shell_mode` and :func:`prepare_shell_run_spec`.
    """
    args = parse_shell_args(argv, script, prog=prog)
    mode = check_shell_mode(args.mode, script, prog)
    statuses = {"usage_error": int(ExitCode.USAGE_ERROR), "internal_error": int(ExitCode.INTERNAL_ERROR)}
    return {"mode": mode, "debug": args.debug, "spec": prepare_shell_run_spec(args, script), "exit_status": statuses}


def prepare_shell_run_spec(args: argparse.Namespace, script: str) -> dict[str, Any]:
    """The run spec for a script run by hand (``python script.py ...`` or ``harness prepare`` for R's shell mode).

    Everything that cannot work is refused before the fixtures are drawn: an invalid spec, a device
    this machine lacks (the same check as ``harness run``), a weights file that would be overwritten.

    Raises:
        SpecError: an invalid spec or a device this machine lacks; UsageError: a weights file in the way. Each
            names the field or flag, the value and what would work.
    """
    spec = spec_from_args(args)
    optimizer = check_shell_optimizer(args.optimizer)
    require_device(spec)
    check_weights_out(args.weights_out, args.overwrite)
    return prepare_run_spec(spec, script, optimizer, args.weights_out, scaler_lift=getattr(args, "scaler_lift", True))


def check_weights_out(path: Path | None, overwrite: bool) -> None:
    """Refuse to write weights over an existing file unless ``overwrite``, and then over a regular file only.

    A user's file (a result JSON, a device node, a link to elsewhere) must never become safetensors bytes
    because a path was mistyped.

    Raises:
        UsageError: ``path`` exists and ``overwrite`` is false, or it is not a regular file.
    """
    if path is None:
        return
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as err:
        raise UsageError("--weights-out", str(path), f"a path that can be written ({err.strerror})") from err
    if not stat.S_ISREG(mode):
        kind = "folder" if stat.S_ISDIR(mode) else "symbolic link" if stat.S_ISLNK(mode) else "special file"
        raise UsageError("--weights-out", str(path), f"a new file or a regular file to replace (this is a {kind})")
    if not overwrite:
        raise UsageError("--weights-out", str(path), "a path that does not exist yet (or pass --overwrite to replace it)")


def require_device(spec: WorkloadSpec) -> None:
    """Refuse ``cuda`` on a machine without one, and bf16 on a GPU without it, before any cell runs.

    The one check for ``harness run`` and both languages' shell modes (R's through ``harness prepare``).
    """
    if spec.device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise SpecError("device", "cuda", "'cpu' on this machine: torch sees no CUDA GPU")
    if spec.amp_dtype == "bfloat16" and not torch.cuda.is_bf16_supported():
        raise SpecError("amp_dtype", "bfloat16", f"'float16' on {torch.cuda.get_device_name()}, which has no bf16 support")
