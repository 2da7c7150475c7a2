"""``prepare``: the run spec a script receives, printed (the R scripts' shell mode asks for it)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.cli import lines

__all__ = ["add_parser", "command"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], switches: argparse.ArgumentParser) -> None:
    """The ``prepare`` command's flags (``switches``: ``--debug`` and ``-v``, accepted after the command too)."""
    from harness.contract.modes import SCRIPTS
    from harness.contract.optimizers import DEFAULT_OPTIMIZER
    from harness.run.prepare import add_scaler_lift_argument, add_weights_out_arguments
    from harness.workload.flags import add_spec_arguments
    from harness.workload.optimizers import OPTIMIZERS

    prepare = commands.add_parser(
        "prepare", parents=[switches], help="print the run spec a script receives (used by the R scripts' shell mode)"
    )
    add_spec_arguments(prepare, with_modes=False)
    add_weights_out_arguments(prepare)
    add_scaler_lift_argument(prepare)
    prepare.add_argument("--script", default="with_autocast", choices=tuple(SCRIPTS),
                         help="the script pair whose run spec to print (its modes are part of it)")
    prepare.add_argument("--optimizer", default=DEFAULT_OPTIMIZER, help=f"the optimizer the run spec names: one of {', '.join(OPTIMIZERS)}")
    # R's shell mode: `prepare --shell-of with_autocast.R -- ARGS` parses the script's own ARGS with the Python
    # scripts' parser (harness.run.prepare.prepare_shell_run); the pair is the file's stem. Not for people.
    prepare.add_argument("--shell-of", default=None, help=argparse.SUPPRESS)
    prepare.add_argument("shell_args", nargs="*", help=argparse.SUPPRESS)


def command(args: argparse.Namespace) -> None:
    """Print the run spec: for ``prepare``'s own flags, or (``--shell-of``) for a script's flags given after ``--``."""
    from harness.contract.modes import SCRIPTS
    from harness.errors import UsageError
    from harness.run.prepare import prepare_shell_run, prepare_shell_run_spec

    if args.shell_of is None:
        if args.shell_args:
            raise UsageError("prepare", " ".join(args.shell_args), "given flags only (see python -m harness prepare --help)")
        print(json.dumps(prepare_shell_run_spec(args, args.script)))
        return
    try:
        script = Path(args.shell_of).stem
        if script not in SCRIPTS:
            raise UsageError("--shell-of", args.shell_of, f"one of the scripts: {', '.join(f'{s}.R' for s in SCRIPTS)}")
        prepared = prepare_shell_run(args.shell_args, script, prog=args.shell_of)
    except Exception as err:
        lines.exit_with_error(err, debug=lines.debugging() or "--debug" in args.shell_args)
    print(json.dumps(prepared))
