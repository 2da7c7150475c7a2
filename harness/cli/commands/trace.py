"""``trace``: the record calls of the chosen cells, every pair traced point by point, each pair's whole explanation."""

from __future__ import annotations

import argparse

from harness.cli.options import add_frontend_arguments, add_judging_arguments, frontends_of, known_differences_of, matrix_of
from harness.cli.outcome import exit_status
from harness.cli.output import temporary_staging
from harness.errors import ExitCode

__all__ = ["add_parser", "command"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], switches: argparse.ArgumentParser) -> None:
    """The ``trace`` command's flags (``switches``: ``--debug`` and ``-v``, accepted after the command too)."""
    from harness.run.pool import DEFAULT_TIMEOUT_S
    from harness.workload.flags import add_spec_arguments, positive_seconds

    trace = commands.add_parser(
        "trace", parents=[switches],
        help="run the record calls and trace every pair point by point: where the frontends part, or that they never do",
    )
    add_spec_arguments(trace)
    add_frontend_arguments(trace)
    trace.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S, help="seconds before a cell counts as hung")
    trace.add_argument("--tolerance-only", action="store_true", help="judge every pair by the tolerance (see run --help)")
    add_judging_arguments(trace)


def command(args: argparse.Namespace) -> ExitCode:
    """``harness trace``: the record calls of the chosen cells, then every pair traced; each pair's whole explanation."""
    from rich.text import Text

    from harness.errors import UsageError
    from harness.run.prepare import require_device
    from harness.run.runner import MatrixRunner
    from harness.views.table import make_console, print_trace

    spec, modes, optimizers, features, models = matrix_of(args)
    frontends = frontends_of(args)
    if len(frontends) < 2:  # a trace is of pairs: one frontend ran its cells, traced nothing and said nothing
        raise UsageError("--frontend", ",".join(args.frontend or ()), "two frontends or more for trace (it traces pairs)")
    require_device(spec)
    console = make_console()
    with temporary_staging() as staging, MatrixRunner(
        spec, frontends, timeout=args.timeout, staging=staging.path, scaler_lift=args.scaler_lift,
        known=known_differences_of(args), baseline=args.baseline,
    ) as runner:
        with console.status("running cells...") as status:
            # plain text: a unit names installations by their paths, which rich would read as markup
            result = runner.run(modes, optimizers, on_progress=lambda text: status.update(Text(text)),
                                judging="tolerance_only" if args.tolerance_only else "strict", measure=False, features=features,
                                models=models)
    print_trace(result, console)
    return exit_status(result)
