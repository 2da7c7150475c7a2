"""Spec fields as command-line flags: ``--batch-size``, ``--lr``, ... named after the fields.

One parser for every entry point (``harness run``, ``harness prepare``, the Python scripts' shell
mode, and through ``prepare`` the R scripts' shell mode), so a flag means the same everywhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from harness.contract.models import DEFAULT_MODEL, MODELS
from harness.contract.modes import all_mode_names
from harness.errors import ExitCode, UsageError
from harness.files.bounded_read import FileFormatError, FileSyntaxError, read_json_file
from harness.workload.features import FEATURES, NO_FEATURE
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import AMP_DTYPES, DEVICES, PRESETS, WorkloadSpec, available_cores

__all__ = [
    "OneLineParser",
    "ThreadsWarning",
    "add_spec_arguments",
    "finite_number",
    "for_optimizers",
    "path_argument",
    "positive_seconds",
    "spec_from_args",
    "whole_number",
]


class ThreadsWarning(UserWarning):
    """More threads than cores: it runs, but oversubscribed threads make every GEMM many times slower."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors read like the harness's own: one ``error:`` line, exit ``USAGE_ERROR`` (4).

    argparse prints a usage block and exits 2; the README promises every bad input one line that says
    what was wrong and what to do, and the R shell mode relays exactly one ``error:`` line. ``--help``
    still prints the whole help and exits 0. Subcommand parsers are built with this class too
    (``add_subparsers`` passes the parent's class on), so ``run --lr inf`` names ``run --help``.
    """

    #: What reads as a negative number, so a flag's value (``--lr -inf``, ``--lr -1e-3``) is taken as that value and
    #: refused for what it is; argparse's own pattern knows only ``-5`` and ``-.5`` and took ``-inf`` for a flag
    #: ("expected one argument"). No flag of the harness looks like a number, so nothing is shadowed.
    _NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = self._NEGATIVE_NUMBER

    def error(self, message: str) -> NoReturn:
        """Print ``error: <argparse's message> (see <prog> --help).`` and exit ``USAGE_ERROR``."""
        print(f"error: {message} (see {self.prog} --help).", file=sys.stderr)
        sys.exit(ExitCode.USAGE_ERROR)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        """As argparse's, but an unknown flag points at the help of the command it was given to."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            prog = f"{self.prog} {command}" if isinstance(command, str) else self.prog
            print(f"error: unrecognized arguments: {' '.join(extras)} (see {prog} --help).", file=sys.stderr)
            sys.exit(ExitCode.USAGE_ERROR)
        namespace_out: argparse.Namespace = parsed
        return namespace_out

_HELP = {
    "batch_size": "rows per batch", "in_size": "input and hidden width", "out_size": "output width",
    "num_layers": "Linear layers", "num_batches": "batches per epoch", "epochs": "passes over the batches",
    "lr": "learning rate of the SGD-like optimizers (the others have their own: harness/workload/optimizers.py)",
    "seed": "fixture seed", "device": f"one of {', '.join(DEVICES)}",
    "amp_dtype": f"autocast dtype: {', '.join(AMP_DTYPES)} (default: bfloat16 on cpu, float16 on cuda)",
    "init_scale": "GradScaler initial scale", "growth_factor": "GradScaler growth factor",
    "backoff_factor": "GradScaler backoff factor", "growth_interval": "GradScaler growth interval",
    "clip_max_norm": "max gradient norm in autocast_scaler_clip", "threads": "torch threads (0 = every core this process may use)",
    "overflow_steps": "comma-separated 0-based steps at which the scaler modes put an inf into one gradient (e.g. 3,7; "
                      "default: the preset's middle step, tiny 9; \"\" for none)",
    "overflow_point": "where --overflow-steps put the inf: backward (after backward(), default) or unscale (after unscale_())",
    "static_loss_scale": "the static loss scale of mode lowp_weights_scaled (the AMP guide's -s)",
    "model": f"the model trained: one of {', '.join(MODELS)} (harness/contract/models.py; default {DEFAULT_MODEL}); run and "
             "trace take several, comma-separated, or all (the tiny preset's default: each beside the MLP by its covering "
             "design, harness/workload/model_designs.py)",
}


def add_spec_arguments(parser: argparse.ArgumentParser, with_modes: bool = True) -> None:
    """Add ``--preset``, ``--spec-file``, one flag per spec field, and (optionally) ``--mode``."""
    group = parser.add_argument_group("workload spec (any field overrides the preset)")
    group.add_argument("--preset", default=None, help=f"one of {', '.join(PRESETS)} (default tiny)")
    group.add_argument("--spec-file", type=path_argument, default=None, help="a JSON object of spec fields")
    for field in dataclasses.fields(WorkloadSpec):
        if field.name in ("preset", "optimizer_args"):
            continue
        group.add_argument(
            "--" + field.name.replace("_", "-"), dest=field.name, default=None,
            type=_CONVERTERS.get(str(field.type), str), help=_HELP.get(field.name),
        )
    group.add_argument(
        "--optimizer-arg", dest="optimizer_args", action="append", default=None, type=_optimizer_arg,
        metavar="OPTIMIZER.ARG=VALUE",
        help="replace one hyperparameter of one optimizer (repeatable), e.g. adam.eps=1e-6, adam.betas=0.8,0.99, "
             "sgd_nesterov.nesterov=false",
    )
    if with_modes:
        parser.add_argument(
            "--mode", action="append", default=None,
            help=f"mode(s) to run, repeatable or comma-separated: {', '.join(all_mode_names())} (a name runs in every script that has it)",
        )
        parser.add_argument(
            "--optimizer", action="append", default=None,
            help=f"optimizer(s) to run, repeatable or comma-separated, or all (default: the preset's; tiny runs all): "
                 f"{', '.join(OPTIMIZERS)}",
        )
        parser.add_argument(
            "--feature", action="append", default=None,
            help=f"loop feature(s) to run where each one's covering design puts it, repeatable or comma-separated, or all "
                 f"(default: the preset's, tiny runs all; with --mode or --optimizer, none): {', '.join((NO_FEATURE, *FEATURES))}",
        )


def spec_from_args(args: argparse.Namespace) -> WorkloadSpec:
    """The spec: preset, then the spec file's fields, then the command line's flags.

    Raises:
        SpecError: an invalid value.
        UsageError: an unreadable spec file.
    """
    values: dict[str, Any] = {}
    if args.spec_file is not None:
        values.update(_read_spec_file(args.spec_file))
    for field in dataclasses.fields(WorkloadSpec):
        given = getattr(args, field.name, None)
        if given is not None and field.name not in ("preset", "optimizer_args"):
            values[field.name] = given
    for name, arg, value in getattr(args, "optimizer_args", None) or ():  # flags add to (or replace) the spec file's
        table = dict(values.get("optimizer_args") or {})
        table[name] = {**dict(table.get(name) or {}), arg: value}
        values["optimizer_args"] = table
    # Only an absent (or null) preset means the default: --preset "" is refused, not run as tiny.
    preset = args.preset if args.preset is not None else values.get("preset")
    values.pop("preset", None)
    preset = "tiny" if preset is None else preset
    spec = WorkloadSpec.from_preset(preset, **values)
    _warn_oversubscribed(spec.threads)
    return spec


def _warn_oversubscribed(threads: int) -> None:
    """Warn, before any cell runs, that more threads than cores will make the run far slower.

    Checked here (the command line of this machine) and not in the spec itself: a stored result read
    on another machine must not warn about the cores of the machine that reads it.
    """
    cores = available_cores()
    if threads > cores:
        warnings.warn(
            f"threads={threads} is more than the {cores} cores this process may use: threads that share a core "
            f"make every GEMM many times slower. Pass --threads {cores} (or 0 for all cores).",
            ThreadsWarning,
            stacklevel=3,
        )


#: A spec file is a few hundred bytes; a megabyte is more than any can hold (``/dev/zero`` is refused, not read).
SPEC_FILE_MAX_BYTES = 2**20


def _read_spec_file(path: Path) -> dict[str, Any]:
    try:
        data = read_json_file(path, SPEC_FILE_MAX_BYTES)
    except OSError as err:
        raise UsageError("spec_file", str(path), f"a readable file ({err.strerror})") from err
    except FileSyntaxError as err:
        raise UsageError("spec_file", str(path), f"valid JSON ({err})") from err
    except FileFormatError as err:
        raise UsageError("spec_file", str(path), f"a regular file holding a JSON object of spec fields ({err})") from err
    if not isinstance(data, dict):
        raise UsageError("spec_file", str(path), "a JSON object of spec fields")
    return data


def path_argument(text: str) -> Path:
    """A path flag's value (argparse ``type``): a blank one is refused, as is a name that begins or ends with a blank.

    ``Path("")`` is ``Path(".")``: ``--report ""`` wrote into the current folder and ``--json ""`` failed after
    the flags were read, with an unexpected ``ValueError``. ``--json ' '`` wrote a file named by a blank, and
    ``--json 'run.json '`` one whose name ends in one: a stray quote or space, never a name anyone means.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {'an empty string' if not text else 'only blanks'} {text!r}; "
                                         "name a file or folder")
    blank = next((part for part in Path(text).parts if part != part.strip()), None)
    if blank is not None:
        raise argparse.ArgumentTypeError(f"expected a path whose names neither begin nor end with a blank, got {text!r} "
                                         f"(the name {blank!r}); name a file or folder without them")
    return Path(text)


def whole_number(text: str) -> int:
    """A flag's whole number; argparse prefixes the flag's name, so the message says what is allowed and what was got."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def finite_number(text: str) -> float:
    """A flag's finite number: ``inf`` and ``nan`` parse as floats but no spec field or limit can use them."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A flag's number of seconds: finite and > 0 (``--timeout nan`` or ``0`` would stop every cell at once or never)."""
    value = finite_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


#: The flag converter for each annotation of a WorkloadSpec field (anything else is text).
def _to_steps(text: str) -> tuple[int, ...]:
    """``3,7`` → (3, 7); an empty string is no steps. Range, order and repeats are the spec's to check.

    An empty step between commas (``3,,7``, ``3,``) is refused: a typo, not a step to leave out.
    """
    if not text.strip():
        return ()
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise argparse.ArgumentTypeError(f"must be whole numbers separated by single commas (e.g. 3,7), got {text!r}")
    return tuple(whole_number(part) for part in parts)



def for_optimizers(spec: WorkloadSpec, args: argparse.Namespace, optimizers: tuple[str, ...]) -> WorkloadSpec:
    """``spec`` with the optimizer arguments of ``optimizers`` only: an argument of an optimizer that does not run would
    change nothing but the spec (and its digest), so two runs of the same cells would not compare as the same spec.

    A spec file's arguments for other optimizers are set aside (one file may serve every optimizer); an
    ``--optimizer-arg`` flag for one is a mistake the user wants to hear of.

    Raises:
        UsageError: an ``--optimizer-arg`` names an optimizer this run does not run.
    """
    from harness.errors import UsageError

    unused = [name for name, _, _ in getattr(args, "optimizer_args", None) or () if name not in optimizers]
    if unused:
        raise UsageError("--optimizer-arg", f"{unused[0]}.…", f"about an optimizer this run runs ({', '.join(optimizers)}): "
                         f"add --optimizer {unused[0]}, or drop the flag")
    kept = {name: row for name, row in spec.optimizer_args.items() if name in optimizers}
    return spec if kept == dict(spec.optimizer_args) else dataclasses.replace(spec, optimizer_args=kept)

_CONVERTERS = {"int": whole_number, "float": finite_number, "tuple[int, ...]": _to_steps}


def _optimizer_arg(text: str) -> tuple[str, str, Any]:
    """``adam.betas=0.8,0.99`` → ("adam", "betas", [0.8, 0.99]); ``true``/``false`` are flags, anything else a number.

    Which optimizer and argument exist, and whether the value is of the argument's kind, is the spec's to check
    (:func:`harness.workload.optimizers.check_optimizer_args`); this only splits the text.
    """
    name, dot, rest = text.partition(".")
    arg, equals, value = rest.partition("=")
    if not (dot and equals and name.strip() and arg.strip() and value.strip()):
        raise argparse.ArgumentTypeError(f"must be OPTIMIZER.ARG=VALUE (e.g. adam.eps=1e-6), got {text!r}")
    value = value.strip()
    parsed: Any
    if value.lower() in ("true", "false"):
        parsed = value.lower() == "true"
    elif "," in value:
        parsed = [finite_number(part.strip()) for part in value.split(",")]
    else:
        parsed = finite_number(value)
    return name.strip(), arg.strip(), parsed
