"""``run``: the matrix (installations × modes × optimizers × loop features) in workers, judged, timed, printed; the result
and report written where they were claimed before the first cell."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from typing import TYPE_CHECKING

from harness.cli.options import (
    add_frontend_arguments,
    add_judging_arguments,
    entry_texts_of,
    frontends_of,
    known_differences_of,
    matrix_of,
)
from harness.cli.outcome import exit_status, nothing_ran
from harness.cli.output import WRITTEN, go_quiet_on_broken_pipe, quiet_stdout, temporary_staging, write_report_or_say_why
from harness.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from harness.run.runner import MatrixRunner
    from harness.workload.spec import WorkloadSpec

__all__ = ["add_parser", "command", "print_header"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], switches: argparse.ArgumentParser) -> None:
    """The ``run`` command's flags (``switches``: ``--debug`` and ``-v``, accepted after the command too)."""
    from harness.model.timing import DEFAULT_MAX_SECONDS, DEFAULT_ROUNDS, DEFAULT_WARMUP_ROUNDS, PRESET_PROTOCOLS
    from harness.run.pool import DEFAULT_TIMEOUT_S
    from harness.workload.flags import add_spec_arguments, path_argument, positive_seconds, whole_number

    run = commands.add_parser("run", parents=[switches], help="run the matrix (frontends × modes) and print a table")
    add_spec_arguments(run)
    add_frontend_arguments(run)
    run.add_argument("--json", type=path_argument, default=None, help="write the whole result here (final weights go to <name>.weights/)")
    run.add_argument("--overwrite", action="store_true", help="replace an existing result and its weights (only what amp-parity wrote)")
    run.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S, help="seconds before a cell counts as hung")
    run.add_argument("--report", type=path_argument, default=None, metavar="DIR", help="also write the report (markdown + plots) into DIR")
    run.add_argument("--tolerance-only", action="store_true",
                     help="judge every pair by the tolerance; by default a pair expected bitwise identical (one libtorch, CPU) "
                          "that is not is diverged")
    add_judging_arguments(run)
    run.add_argument("--no-trace", dest="trace", action="store_false",
                     help="do not trace the pairs that are not identical (their explanation then cannot name where they part)")
    timing = run.add_argument_group("timing protocol (see harness/model/timing.py)")
    own_rounds = ", ".join(f"{preset} {rounds}" for preset, (_, rounds) in PRESET_PROTOCOLS.items())
    own_warmups = ", ".join(f"{preset} {warmup}" for preset, (warmup, _) in PRESET_PROTOCOLS.items())
    timing.add_argument("--rounds", type=whole_number, default=None,
                        help=f"timed rounds per cell, at most (default {DEFAULT_ROUNDS}; {own_rounds})")
    timing.add_argument("--warmup-rounds", type=whole_number, default=None,
                        help=f"untimed calls per cell, the first (which writes the weights) included (default "
                             f"{DEFAULT_WARMUP_ROUNDS}; {own_warmups})")
    timing.add_argument("--max-seconds", type=positive_seconds, default=DEFAULT_MAX_SECONDS,
                        help=f"no more timed rounds for a cell once its rounds took this long; it gets one at least "
                             f"(default {DEFAULT_MAX_SECONDS:g})")
    timing.add_argument("--interleave", action="store_true", help="time the cells round-robin (A, B, A, B, ...) instead of back to back")
    timing.add_argument("--profile", action=argparse.BooleanOptionalAction, default=None,
                        help="profile one step of each Python cell's GEMMs with torch.profiler (default: on CUDA only)")


def command(args: argparse.Namespace) -> ExitCode:
    """``harness run``: its exit status is the result's (a refused output place or a report not written: a usage error)."""
    from harness.model.timing import TimingProtocol
    from harness.run.prepare import require_device
    from harness.run.runner import MatrixRunner
    from harness.store.report_claim import ReportClaim
    from harness.store.result_claim import ResultClaim, publish_or_rescue
    from harness.views.progress import progress_for
    from harness.views.table import make_console, print_result
    from harness.views.timing_sections import limit_line, phases_line

    spec, modes, optimizers, features, models = matrix_of(args)
    protocol = TimingProtocol.for_preset(spec.preset, args.warmup_rounds, args.rounds, args.max_seconds, args.interleave)
    frontends = frontends_of(args)
    require_device(spec)
    console = make_console()
    go_quiet_on_broken_pipe(console)
    with contextlib.ExitStack() as claimed:
        # Claimed before the first cell and held to the end: a second run for the same --json (or --report) is
        # refused, and a report folder is never the result or its weights folder.
        claim = claimed.enter_context(ResultClaim(args.json, args.overwrite)) if args.json is not None else None
        reports = None
        if args.report is not None:
            from harness.views.report import REPORT_FILES  # matplotlib: a quarter second, paid only where a report is asked for

            reports = claimed.enter_context(ReportClaim(args.report, REPORT_FILES, args.overwrite, result=claim))
        # Without --json nothing keeps the weights: they are staged in a temporary folder, dropped when the run ends.
        staging = claim.staging if claim else claimed.enter_context(temporary_staging()).path
        with MatrixRunner(
            spec, frontends, timeout=args.timeout, staging=staging, scaler_lift=args.scaler_lift,
            trace=args.trace, known=known_differences_of(args), baseline=args.baseline,
        ) as runner:
            print_header(console, spec, runner, modes, optimizers, features, models)
            with progress_for(console, getattr(args, "verbose", False)) as progress:
                result = runner.run(modes, optimizers, on_progress=progress, protocol=protocol, profile=args.profile,
                                    judging="tolerance_only" if args.tolerance_only else "strict", features=features,
                                models=models)
            saved = None
            writing = time.perf_counter()
            if claim is not None:
                result, saved, where = publish_or_rescue(result, claim)
                if where is not None:
                    WRITTEN.append(f"the result was written to {where}")
            # The report shows the result's writing (the file cannot hold its own); -v prints the report's too.
            result = dataclasses.replace(result, phases=result.phases.with_phase("writing", time.perf_counter() - writing))
            written = write_report_or_say_why(result, reports, entry_texts_of(args)) if reports is not None else None  # reads the weights
            if reports is not None and reports.published:
                WRITTEN.append(f"the report was written to {reports.folder}")
            result = dataclasses.replace(result, phases=result.phases.with_phase("writing", time.perf_counter() - writing))
    if saved is not None and written is not None and not written.startswith("error:"):
        saved, written = f"{saved}; {written}", None  # where the run's files are, on one line
    lines = [line for line in (saved, written, nothing_ran(result), limit_line(result)) if line is not None]
    if getattr(args, "verbose", False):  # where the time went, phase by phase (the report has it too)
        lines.append(phases_line(result) or "phases: none recorded")
    try:
        print_result(result, console, verbose=getattr(args, "verbose", False))
        for line in lines:
            if not line.startswith("error:"):
                console.print(line, soft_wrap=True, markup=False)  # one line each, whatever the width: grep finds it whole
    except BrokenPipeError:
        quiet_stdout()  # `run ... | head`: the table was cut short, the run's outcome stands
    for line in lines:
        if line.startswith("error:"):
            print(line, file=sys.stderr)
    return ExitCode.USAGE_ERROR if any(line.startswith("error:") for line in lines) else exit_status(result)


def print_header(console: Console, spec: WorkloadSpec, runner: MatrixRunner, modes: tuple[str, ...],
                  optimizers: tuple[str, ...], features: tuple[str, ...] | None = None,
                  models: tuple[str, ...] | None = None) -> None:
    """The run's header, before its first cell: what runs, on how many cores, and (once) what this CPU cannot do."""
    from rich.markup import escape

    from harness.run.cpu_features import cpu_has_bf16, usable_cpus
    from harness.views.timing_sections import bf16_note
    from harness.workload.matrix import cells_for

    matrix = cells_for(runner.frontends, modes, optimizers, spec.device, features or ("none",), models or spec.model)
    per_model = {m: sum(c.model == m for c in matrix) for m in dict.fromkeys(c.model for c in matrix)}
    models_said = f" ({', '.join(f'{m} {n}' for m, n in per_model.items())})" if len(per_model) > 1 else ""
    console.print(f"amp-parity run: preset {spec.preset}, {len(matrix)} cells{models_said} ({', '.join(runner.frontends)}), "
                  f"{spec.device}, {usable_cpus()} cores", soft_wrap=True, highlight=False, markup=False)
    note = bf16_note(cpu_has_bf16()) if spec.device == "cpu" else None
    if note:
        console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True, highlight=False)
