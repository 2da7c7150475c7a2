"""``amp-parity`` (or ``python -m harness``): run, trace, report, merge, doctor, prepare. Parses options and hands them to
the objects that work.

The harness's own errors print ``error: <message>``, with no traceback unless ``--debug``. Every command ends with a
:class:`harness.errors.ExitCode`: one meaning per status (docs/cli.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from harness.cli import lines
from harness.errors import AmpParityError, ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from harness.files.staging import StagingDir
    from harness.judge.known_differences import KnownDifference
    from harness.model.result import MatrixResult
    from harness.run.runner import MatrixRunner
    from harness.store.claims import ReportClaim
    from harness.views.page import EntryText
    from harness.workload.installations import Installation
    from harness.workload.spec import WorkloadSpec

__all__ = ["BLAS_THREADS", "DEFAULT_PROG", "console_main", "exit_status", "main"]

#: How the commands are named in help and errors when run as ``python -m harness``; the console command names itself.
DEFAULT_PROG = "python -m harness"

#: NumPy's BLAS in this process (the float64 reference, the judging) on one thread, unless the user set it: its matrices
#: are tiny beside a thread's start, and the workers hold the cores. Two OpenBLAS threads spinning beside two busy workers
#: made tiny's 34 float64 references take 14-38 s, against 0.8-1.3 s on one (issue 38, measured one after the other on the
#: loaded 2-vCPU EPYC). Set before NumPy is first imported (OpenBLAS reads it once); the workers' torch does not read it.
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}

#: What the command has written so far, for the line an interruption prints ("say what exists").
_WRITTEN: list[str] = []


def add_judging_arguments(parser: argparse.ArgumentParser) -> None:
    """``--no-scaler-lift`` and ``--known-differences``: what ``run`` and ``trace`` share about how cells run and pairs are judged."""
    from harness.run.prepare import add_scaler_lift_argument

    add_scaler_lift_argument(parser)
    add_known_differences_argument(parser)


def add_known_differences_argument(parser: argparse.ArgumentParser) -> None:
    """``--known-differences FILE``: the list every command that judges pairs is judged against."""
    from harness.workload.flags import path_argument

    parser.add_argument("--known-differences", type=path_argument, default=None, metavar="FILE",
                        help="judge against this known-differences list (default: harness/judge/known_differences.toml)")


def add_rejudging_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    """``--[no-]tolerance-only`` and ``--known-differences``: how ``report`` and ``merge`` judge stored results again."""
    parser.add_argument("--tolerance-only", action=argparse.BooleanOptionalAction, default=None,
                        help=f"judge every pair by the tolerance (--no-tolerance-only: strictly); default: {default}")
    add_known_differences_argument(parser)


def _rejudging(args: argparse.Namespace) -> str | None:
    """The judging policy ``--[no-]tolerance-only`` asks for, or ``None``: the stored result's own."""
    return None if args.tolerance_only is None else "tolerance_only" if args.tolerance_only else "strict"


def add_frontend_arguments(parser: argparse.ArgumentParser) -> None:
    """``--frontend``, ``--installations`` and ``--baseline``: which installations ``run`` and ``trace`` pair, and with which."""
    from harness.workload.flags import path_argument

    parser.add_argument("--frontend", action="append", default=None, metavar="NAME[=LANGUAGE[:PATH]]",
                        help="installations to run, in order (repeatable or comma-separated; default python,r): python, r, "
                             "a name from --installations, or NAME=python:/venv/bin/python, NAME=r:/R/library, "
                             "NAME=r:/bundle/activate.sh")
    parser.add_argument("--installations", type=path_argument, default=None, metavar="FILE",
                        help="a TOML file of named installations ([NAME] language, python, r_libs, activate, env)")
    parser.add_argument("--baseline", default=None, metavar="NAME",
                        help="the frontend every other is paired with (default: the first --frontend)")


def _parser(prog: str = DEFAULT_PROG) -> argparse.ArgumentParser:
    from harness.contract.modes import SCRIPTS
    from harness.contract.optimizers import DEFAULT_OPTIMIZER
    from harness.model.timing import DEFAULT_MAX_SECONDS, DEFAULT_ROUNDS, DEFAULT_WARMUP_ROUNDS, PRESET_PROTOCOLS
    from harness.run.pool import DEFAULT_TIMEOUT_S
    from harness.run.prepare import add_scaler_lift_argument, add_weights_out_arguments
    from harness.workload.flags import OneLineParser, add_spec_arguments, path_argument, positive_seconds, whole_number
    from harness.workload.optimizers import OPTIMIZERS

    # --debug and -v are accepted before or after the command ("run with --debug" must work as printed):
    # every parser shares the two actions, which leave their name unset unless given (see main()), so the
    # command's parser never resets what the top level parsed.
    switches = OneLineParser(add_help=False)
    switches.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    switches.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                          help="log progress and R console output")
    parser = OneLineParser(prog=prog, description="AMP parity between PyTorch and R torch.", parents=[switches])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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

    report = commands.add_parser("report", parents=[switches], help="write the markdown report and plots of a result file")
    report.add_argument("result", type=path_argument, help="a result written by `run --json`")
    report.add_argument("--out", type=path_argument, required=True, metavar="DIR", help="folder for report.md and the PNG plots")
    report.add_argument("--overwrite", action="store_true", help="replace a report already in DIR")
    report.add_argument("--exit-zero", action="store_true",
                        help="exit 0 even when the result fails its checks (viewing only; a refused input still fails)")
    add_rejudging_arguments(report, "as the run did")

    merge = commands.add_parser(
        "merge", parents=[switches],
        help="merge results run on several machines, devices or installations into one judged report (one parity tracker)",
    )
    merge.add_argument("results", nargs="+", metavar="[LABEL=]RESULT",
                       help="results written by `run --json` (two or more); LABEL=RESULT renames that result's frontends LABEL.NAME "
                            "(two machines that both ran python: xeon=a.json epyc=b.json)")
    merge.add_argument("--out", type=path_argument, required=True, metavar="DIR", help="folder for report.md and the PNG plots")
    merge.add_argument("--json", type=path_argument, default=None, metavar="FILE",
                       help="also write the merged result here (its weights paths point into the inputs' weights folders)")
    merge.add_argument("--baseline", default=None, metavar="NAME",
                       help="the frontend every other is paired with (default: the first result's)")
    merge.add_argument("--overwrite", action="store_true", help="replace a report already in DIR (and a merged result at --json)")
    add_rejudging_arguments(merge, "as the first result")

    trace = commands.add_parser(
        "trace", parents=[switches],
        help="run the record calls and trace every pair point by point: where the frontends part, or that they never do",
    )
    add_spec_arguments(trace)
    add_frontend_arguments(trace)
    trace.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S, help="seconds before a cell counts as hung")
    trace.add_argument("--tolerance-only", action="store_true", help="judge every pair by the tolerance (see run --help)")
    add_judging_arguments(trace)

    commands.add_parser("doctor", parents=[switches], help="report what can run here and how to fix what is missing")

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
    return parser


def console_main() -> None:
    """The ``amp-parity`` console command: :func:`main`, its help and errors named as it was invoked."""
    main(prog=Path(sys.argv[0]).name or "amp-parity")


def main(argv: list[str] | None = None, prog: str = DEFAULT_PROG) -> None:
    """The command-line entry point; ``prog`` names the command in help and usage errors. Exits with an :class:`ExitCode`."""
    for name, value in BLAS_THREADS.items():
        os.environ.setdefault(name, value)
    args = _parser(prog).parse_args(argv)
    lines.set_debug(getattr(args, "debug", False))
    _WRITTEN.clear()
    # A kill (SIGTERM) unwinds like Ctrl-C: workers stop, staged files go, no partial result stays.
    signal.signal(signal.SIGTERM, _terminate)
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    lines.show_warnings_as_lines()
    try:
        if args.command == "doctor":
            from harness.cli.doctor import doctor

            sys.exit(doctor())
        if args.command == "prepare":
            _prepare(args)
            return
        if args.command == "report":
            sys.exit(_report(args))
        if args.command == "trace":
            sys.exit(_trace(args))
        if args.command == "merge":
            sys.exit(_merge(args))
        sys.exit(_run(args))
    except KeyboardInterrupt as stop:
        _exit_interrupted(args, stop)
    except BrokenPipeError:
        _quiet_stdout()  # `... | head` closed our output early: nothing to say, and nobody to say it to
        sys.exit(ExitCode.OUTPUT_CLOSED)
    except Exception as err:
        behind = _interruption_behind(err)
        if behind is not None:  # the interruption is what the user did; what broke while unwinding it is not news to them
            _exit_interrupted(args, behind)
        lines.exit_with_error(err)


def _exit_interrupted(args: argparse.Namespace, stop: KeyboardInterrupt) -> NoReturn:
    """One line for Ctrl-C or a kill, and the status a shell reports for it."""
    # A probe subprocess interrupted mid-way is killed but not yet reaped; its ResourceWarning
    # would land after this line as a second, misleading one.
    warnings.filterwarnings("ignore", category=ResourceWarning)
    print(f"error: {_interrupted_line(args, stop)}", file=sys.stderr)
    sys.exit(ExitCode.TERMINATED if getattr(stop, "signum", None) == signal.SIGTERM else ExitCode.INTERRUPTED)


def _interruption_behind(err: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or kill that ``err`` was raised while handling, if any.

    A signal can land inside ``threading``'s own lock handling (``Future.result`` waiting on a lane): its ``with`` then
    raises ``RuntimeError: cannot release un-acquired lock`` over the KeyboardInterrupt (CPython does not make a
    ``with`` atomic with respect to signals). The run was still interrupted, and says so, not "unexpected RuntimeError".
    """
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__context__
    return None


def _report(args: argparse.Namespace) -> ExitCode:
    """``harness report``: the report of a saved result, judged on load; its status is the result's (``--exit-zero``: 0)."""
    from harness.store.claims import ReportClaim
    from harness.store.result_file import load_result
    from harness.views.report import REPORT_FILES, write_report

    with ReportClaim(args.out, REPORT_FILES, args.overwrite, flag="--out", inputs=[args.result]) as claim:
        result = load_result(args.result, _rejudging(args), _known(args))
        write_report(result, claim.staging, _entry_texts(args))
        written = claim.publish()
    _WRITTEN.append(f"the report was written to {written[0]}")
    _print_or_go_quiet(f"report written to {written[0]}; {_report_files_line(written)}")
    status = exit_status(result)
    if status is ExitCode.OK or args.exit_zero:
        return ExitCode.OK
    _print_or_go_quiet(f"{_failing_line(result)}: exit status {int(status)} (the report says why; --exit-zero views a failing "
                       "result without failing)")
    return status


def _run(args: argparse.Namespace) -> ExitCode:
    from harness.model.timing import TimingProtocol
    from harness.run.prepare import require_device
    from harness.run.runner import MatrixRunner
    from harness.store.claims import ReportClaim, ResultClaim, publish_or_rescue
    from harness.views.progress import progress_for
    from harness.views.table import make_console, print_result
    from harness.views.timing_sections import limit_line, phases_line
    from harness.workload.features import parse_features
    from harness.workload.flags import spec_from_args
    from harness.workload.optimizers import parse_optimizers
    from harness.workload.spec import parse_modes

    spec = spec_from_args(args)
    modes = parse_modes(args.mode)
    optimizers = parse_optimizers(args.optimizer, spec.preset)
    features = parse_features(args.feature, spec.preset, narrowed=bool(args.optimizer or args.mode))
    protocol = TimingProtocol.for_preset(spec.preset, args.warmup_rounds, args.rounds, args.max_seconds, args.interleave)
    frontends = _parse_frontends(args)
    require_device(spec)
    console = make_console()
    _go_quiet_on_broken_pipe(console)
    with contextlib.ExitStack() as claimed:
        # Claimed before the first cell and held to the end: a second run for the same --json (or --report) is
        # refused, and a report folder is never the result or its weights folder.
        claim = claimed.enter_context(ResultClaim(args.json, args.overwrite)) if args.json is not None else None
        reports = None
        if args.report is not None:
            from harness.views.report import REPORT_FILES  # matplotlib: a quarter second, paid only where a report is asked for

            reports = claimed.enter_context(ReportClaim(args.report, REPORT_FILES, args.overwrite, result=claim))
        # Without --json nothing keeps the weights: they are staged in a temporary folder, dropped when the run ends.
        staging = claim.staging if claim else claimed.enter_context(_temporary_staging()).path
        with MatrixRunner(
            spec, frontends, timeout=args.timeout, staging=staging, scaler_lift=args.scaler_lift,
            trace=args.trace, known=_known(args), baseline=args.baseline,
        ) as runner:
            _print_header(console, spec, runner, modes, optimizers, features)
            with progress_for(console) as progress:
                result = runner.run(modes, optimizers, on_progress=progress, protocol=protocol, profile=args.profile,
                                    judging="tolerance_only" if args.tolerance_only else "strict", features=features)
            saved = None
            writing = time.perf_counter()
            if claim is not None:
                result, saved, where = publish_or_rescue(result, claim)
                if where is not None:
                    _WRITTEN.append(f"the result was written to {where}")
            # The report shows the result's writing (the file cannot hold its own); -v prints the report's too.
            result = dataclasses.replace(result, phases=result.phases.with_phase("writing", time.perf_counter() - writing))
            written = write_report_or_say_why(result, reports, _entry_texts(args)) if reports is not None else None  # reads the weights
            if reports is not None and reports.published:
                _WRITTEN.append(f"the report was written to {reports.folder}")
            result = dataclasses.replace(result, phases=result.phases.with_phase("writing", time.perf_counter() - writing))
    lines = [line for line in (saved, written, _nothing_ran(result), limit_line(result)) if line is not None]
    if getattr(args, "verbose", False):
        lines.append(phases_line(result) or "phases: none recorded")
    try:
        print_result(result, console)
        for line in lines:
            if not line.startswith("error:"):
                console.print(line, soft_wrap=True)  # one line each, whatever the width: grep finds it whole
    except BrokenPipeError:
        _quiet_stdout()  # `run ... | head`: the table was cut short, the run's outcome stands
    for line in lines:
        if line.startswith("error:"):
            print(line, file=sys.stderr)
    return ExitCode.USAGE_ERROR if any(line.startswith("error:") for line in lines) else exit_status(result)


def _print_header(console: Console, spec: WorkloadSpec, runner: MatrixRunner, modes: tuple[str, ...],
                  optimizers: tuple[str, ...], features: tuple[str, ...] | None = None) -> None:
    """The run's header, before its first cell: what runs, on how many cores, and (once) what this CPU cannot do."""
    from harness.run.cpu_features import cpu_has_bf16, usable_cpus
    from harness.views.timing_sections import bf16_note
    from harness.workload.matrix import cells_for

    cells = len(cells_for(runner.frontends, modes, optimizers, spec.device, *((features,) if features else ())))
    console.print(f"amp-parity run: preset {spec.preset}, {cells} cells ({', '.join(runner.frontends)}), {spec.device}, "
                  f"{usable_cpus()} cores", soft_wrap=True, highlight=False)
    note = bf16_note(cpu_has_bf16()) if spec.device == "cpu" else None
    if note:
        console.print(f"[yellow]note:[/] {note}", soft_wrap=True, highlight=False)


def _trace(args: argparse.Namespace) -> ExitCode:
    """``harness trace``: the record calls of the chosen cells, then every pair traced; each pair's whole explanation."""
    from harness.errors import UsageError
    from harness.run.prepare import require_device
    from harness.run.runner import MatrixRunner
    from harness.views.table import make_console, print_trace
    from harness.workload.features import parse_features
    from harness.workload.flags import spec_from_args
    from harness.workload.optimizers import parse_optimizers
    from harness.workload.spec import parse_modes

    spec = spec_from_args(args)
    modes = parse_modes(args.mode)
    optimizers = parse_optimizers(args.optimizer, spec.preset)
    features = parse_features(args.feature, spec.preset, narrowed=bool(args.optimizer or args.mode))
    frontends = _parse_frontends(args)
    if len(frontends) < 2:  # a trace is of pairs: one frontend ran its cells, traced nothing and said nothing
        raise UsageError("--frontend", ",".join(args.frontend or ()), "two frontends or more for trace (it traces pairs)")
    require_device(spec)
    console = make_console()
    with _temporary_staging() as staging, MatrixRunner(spec, frontends, timeout=args.timeout, staging=staging.path,
                                                       scaler_lift=args.scaler_lift, known=_known(args), baseline=args.baseline) as runner:
        with console.status("running cells...") as status:
            result = runner.run(modes, optimizers, on_progress=status.update,
                                judging="tolerance_only" if args.tolerance_only else "strict", measure=False, features=features)
    print_trace(result, console)
    return exit_status(result)


def _merge(args: argparse.Namespace) -> ExitCode:
    """``harness merge``: one judged result of many (:mod:`harness.store.merge`), its report in ``--out``, its table printed.

    Every output place is checked before any input is read: the report folder (no report file may be an input or the
    ``--json`` file) and the ``--json`` place (as ``run`` checks it, and neither an input nor a report file). The report and
    the merged result are then published together, or neither.
    """
    from harness.store.claims import ReportClaim, check_merged_result_place, publish_report_with_result
    from harness.store.merge import merge_results
    from harness.views.report import REPORT_FILES, write_report
    from harness.views.table import make_console, print_result

    labels, paths = zip(*(_labelled_result(item) for item in args.results), strict=True)
    if args.json is not None:
        check_merged_result_place(args.json, args.overwrite, paths, args.out, REPORT_FILES)
    inputs = [*paths, *([args.json] if args.json is not None else [])]
    with ReportClaim(args.out, REPORT_FILES, args.overwrite, flag="--out", inputs=inputs) as claim:
        result = merge_results(paths, args.baseline, _rejudging(args), _known(args), labels)
        write_report(result, claim.staging, _entry_texts(args))
        if args.json is None:
            written = claim.publish()
        else:
            written = publish_report_with_result(claim, result, args.json, args.overwrite)
    _WRITTEN.append(f"the report was written to {written[0]}")
    if args.json is not None:
        _WRITTEN.append(f"the merged result was written to {args.json}")
    console = make_console()
    print_result(result, console)
    console.print(f"merged {len(paths)} results ({len(result.cells)} cells); report written to {written[0]}"
                  + (f"; merged result written to {args.json}" if args.json is not None else ""))
    failed = _uncompared(result)
    if failed is not None:
        print(failed, file=sys.stderr)
    return exit_status(result)


def _temporary_staging() -> StagingDir:
    """A staging folder for final weights that nothing keeps (``run`` without ``--json``, ``trace``), removed when it closes
    (a killed run's is swept by the next run: :mod:`harness.files.staging`)."""
    import tempfile

    from harness.files.staging import StagingDir
    from harness.run.pool import TEMPORARY_WEIGHTS_PREFIX

    return StagingDir(Path(tempfile.gettempdir()), TEMPORARY_WEIGHTS_PREFIX)


def _labelled_result(item: str) -> tuple[str | None, Path]:
    """``a.json`` or ``LABEL=a.json`` (a file whose name holds ``=`` is taken whole); the path checked as every path flag's
    (:func:`harness.workload.flags.path_argument`: ``merge a.json ''`` said "cannot read .").

    Raises:
        UsageError: a label that cannot prefix a frontend name, or a blank path.
    """
    from harness.errors import UsageError
    from harness.workload.flags import path_argument
    from harness.workload.installations import check_name

    label: str | None
    label, sep, rest = item.partition("=")
    if not sep or os.path.lexists(item):
        label, rest = None, item
    try:
        path = path_argument(rest)
    except argparse.ArgumentTypeError as err:
        raise UsageError("merge", item, f"a result file ([LABEL=]RESULT): {err}") from None
    return (None if label is None else check_name(label, item, option="merge")), path


def _known(args: argparse.Namespace) -> tuple[KnownDifference, ...] | None:
    """The known differences ``--known-differences FILE`` names (checked before any cell runs), or None: the committed list."""
    from harness.judge.known_differences import load_known_differences

    path = getattr(args, "known_differences", None)
    return None if path is None else load_known_differences(Path(path))


def _interrupted_line(args: argparse.Namespace, stop: KeyboardInterrupt) -> str:
    """What an interruption (Ctrl-C or SIGTERM) leaves: what the command had written, and what it had not."""
    how = "terminated (SIGTERM)" if getattr(stop, "signum", None) == signal.SIGTERM else "interrupted"
    missing = {"run": "no result was written", "report": "no report was written", "merge": "no report was written",
               "prepare": "no run spec was printed"}
    done = list(_WRITTEN)
    if not done:
        return f"{how}; {missing.get(args.command, 'nothing was written')}."
    line = f"{how} after {' and '.join(done)}"
    if args.command == "run" and getattr(args, "report", None) is not None and not any("report" in d for d in done):
        line += "; no report was written"
    return line + "; the table was not printed." if args.command == "run" else line + "."


def _print_or_go_quiet(line: str) -> None:
    """Print ``line``; a closed stdout (``| head``) is not an error of the command."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        _quiet_stdout()


def _go_quiet_on_broken_pipe(console: Console) -> None:
    """rich exits 1 when stdout's reader is gone (``run ... | head``); the run's outcome stands, so it goes quiet instead."""
    def quiet() -> None:
        console.quiet = True
        _quiet_stdout()

    setattr(console, "on_broken_pipe", quiet)  # noqa: B010 (mypy refuses assigning to a method)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again on the closed pipe."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def exit_status(result: MatrixResult) -> ExitCode:
    """``FAILED`` when a cell ended in ``error`` or ``numerical_failure`` (but one whose crash is a proven R torch bug: its
    pair says so), a pair ``diverged`` (or names a stale known difference), a pair of cells that both ran could not be
    compared (their weights are gone and nothing was kept), or a cell failed its own verdict (float64 bound, scaler rule:
    :mod:`harness.judge.cells`; one a proven bug explains is excused);
    ``USAGE_ERROR`` when no cell ran (each was skipped or unsupported: nothing was measured, and what was asked cannot
    run here); else ``OK``."""
    from harness.judge.pairs import FAILING_VERDICTS, excused_cells
    from harness.model.result import Status

    excused = excused_cells(result)
    failed = any(c.status in (Status.ERROR, Status.NUMERICAL_FAILURE) and c.id not in excused for c in result.cells)
    diverged = any(p.verdict in FAILING_VERDICTS for p in result.pairs) or _uncompared(result) is not None
    own = any(c.verdict is not None and c.verdict.failed for c in result.cells)
    if failed or diverged or own:
        return ExitCode.FAILED
    return ExitCode.USAGE_ERROR if _nothing_ran(result) else ExitCode.OK


def _failing_line(result: MatrixResult) -> str:
    """Why a loaded result fails (``report``'s one line): its failing pairs and cells, counted."""
    from harness.judge.pairs import FAILING_VERDICTS, excused_cells
    from harness.model.result import Status

    if _nothing_ran(result):
        return "the result fails: no cell of it ran"
    uncompared = _uncompared(result)
    if uncompared is not None:
        return uncompared.removeprefix("error: ")
    pairs = [p.pair for p in result.pairs if p.verdict in FAILING_VERDICTS]
    excused = excused_cells(result)
    crashed = {c.id for c in result.cells if c.status in (Status.ERROR, Status.NUMERICAL_FAILURE)} - excused
    cells = [c.id for c in result.cells if c.id in crashed or (c.verdict is not None and c.verdict.failed)]
    parts = [f"{len(pairs)} pair(s) failed ({', '.join(pairs[:3])}{', ...' if len(pairs) > 3 else ''})" if pairs else "",
             f"{len(cells)} cell(s) failed ({', '.join(cells[:3])}{', ...' if len(cells) > 3 else ''})" if cells else ""]
    return "the result fails its checks: " + "; ".join(p for p in parts if p)


def _uncompared(result: MatrixResult) -> str | None:
    """The ``error:`` line for pairs whose cells both ran but that could not be compared, or ``None``.

    A pair is ``error`` when a cell failed (that cell fails the run already) or when both ran and their weights cannot be
    read: a result whose weights folder was not uploaded with it, truncated, or left behind by a link. Such a report
    compared nothing; ``merge`` (and ``report``) said so in the table and exited 0, where CI must fail.
    """
    from harness.model.verdicts import Verdict

    pairs = [p for p in result.pairs if p.verdict == Verdict.ERROR and not p.details.get("statuses")]
    if not pairs:
        return None
    first = pairs[0]
    why = next(iter([*(first.details.get("problems") or ()), *first.explanation]), "no reason given")
    return (f"error: {len(pairs)} of {len(result.pairs)} pairs could not be compared ({first.pair}: {' '.join(why.split())}); "
            "restore each result's weights folder beside it (a CI job must upload it with the result), then run again.")


def _nothing_ran(result: MatrixResult) -> str | None:
    """The ``error:`` line for a run in which no cell ran (every one skipped or unsupported), or ``None``.

    Such a run measured nothing: it is not a success, whatever else it printed. A cell that ran and failed (``error``,
    ``numerical_failure``) is a failure of the run, not of what was asked.
    """
    from harness.model.result import Status

    if not result.cells or any(c.status not in (Status.SKIPPED, Status.UNSUPPORTED) for c in result.cells):
        return None
    first = next((c for c in result.cells if c.reason), result.cells[0])
    return (f"error: no cell ran: all {len(result.cells)} were {' or '.join(sorted({str(c.status) for c in result.cells}))} "
            f"({first.id}: {first.reason}); nothing was measured. Fix what the reason says, or choose other --frontend/--mode.")


def _prepare(args: argparse.Namespace) -> None:
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


class _Terminated(KeyboardInterrupt):
    """SIGTERM, unwound like Ctrl-C; the exit status is 128 + its number (143), as a shell reports a kill."""

    signum = signal.SIGTERM


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated


def _parse_frontends(args: argparse.Namespace) -> tuple[Installation, ...]:
    """The installations ``--frontend`` names (``--installations`` adds names), checked before anything runs.

    Raises:
        UsageError: an unknown name or language, a missing path, a bad installations file, a baseline not among them.
    """
    from harness.errors import UsageError
    from harness.workload.installations import load_installations, parse_frontends

    known = load_installations(args.installations) if args.installations is not None else None
    installations = parse_frontends(args.frontend, known)
    names = [i.name for i in installations]
    if args.baseline is not None and args.baseline not in names:
        raise UsageError("--baseline", args.baseline, f"one of the frontends run ({', '.join(names)})")
    return installations


def write_report_or_say_why(result: MatrixResult, claim: ReportClaim, entries: Mapping[str, EntryText] | None = None) -> str:
    """Write the report after the run; a failure is one ``error:`` line, not the loss of the table or the result."""
    from harness.views.report import write_report

    try:
        write_report(result, claim.staging, entries)
        written = claim.publish()
        return f"report written to {written[0]}; {_report_files_line(written)}"
    except AmpParityError as err:
        return f"error: {err}"


def _report_files_line(written: list[Path]) -> str:
    """What a report folder holds beside report.md, the page first: what a person opens, and what CI publishes."""
    from harness.views.page import PAGE_FILE
    from harness.views.summary import SUMMARY_FILE

    folder = written[0].parent
    plots = sum(1 for p in written if p.suffix == ".png")
    return f"open {folder / PAGE_FILE} (one page, offline); {folder / SUMMARY_FILE} is for a CI job summary; {plots} plots beside them"


def _entry_texts(args: argparse.Namespace) -> dict[str, EntryText]:
    """The known differences the result was judged against, as the report's page shows them (views never judge)."""
    from harness.judge.known_differences import load_known_differences
    from harness.views.page import EntryText

    entries = _known(args) or load_known_differences()
    return {k.id: EntryText(k.id, k.kind, k.title, " ".join(k.mechanism.split()), k.sources, " ".join(k.upstream.split()))
            for k in entries}
