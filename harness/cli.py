"""``python -m harness``: run, doctor, prepare. Parses options and hands them to the objects that work.

The harness's own errors print ``error: <message>`` and exit 1, with no traceback unless ``--debug``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import traceback
import warnings
from pathlib import Path
from typing import NoReturn

from harness.errors import AmpParityError, ResultError, SpecError
from harness.spec import WorkloadSpec

__all__ = ["exit_with_error", "main", "show_warnings_as_lines"]

_DEBUG = False


def exit_with_error(err: BaseException) -> NoReturn:
    """Print one line for ``err`` (the traceback too under ``--debug``) and exit non-zero."""
    if _DEBUG:
        traceback.print_exception(err)
    if isinstance(err, AmpParityError):
        print(f"error: {err}", file=sys.stderr)
    else:
        print(f"error: unexpected {type(err).__name__}: {err} (run with --debug for the traceback)", file=sys.stderr)
    sys.exit(1)


def show_warnings_as_lines() -> None:
    """Print each warning as one ``warning: <message>`` line on stderr (the file and line only under --debug)."""
    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: object = None, line: object = None) -> None:
        where = f" ({filename}:{lineno})" if _DEBUG else ""
        print(f"warning: {message}{where}", file=sys.stderr)

    warnings.showwarning = show
    warnings.simplefilter("default")


def _parser() -> argparse.ArgumentParser:
    from harness.runner import DEFAULT_TIMEOUT_S
    from harness.spec_args import add_spec_arguments
    from harness.timing import DEFAULT_MAX_SECONDS, DEFAULT_ROUNDS, DEFAULT_WARMUP_ROUNDS

    parser = argparse.ArgumentParser(prog="python -m harness", description="AMP parity between PyTorch and R torch.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and R console output")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run the matrix (frontends × modes) and print a table")
    add_spec_arguments(run)
    run.add_argument("--frontend", action="append", default=None, help="python, r (repeatable or comma-separated; default both)")
    run.add_argument("--json", type=Path, default=None, help="write the whole result here (final weights go to <name>.weights/)")
    run.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    run.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds before a cell counts as hung")
    run.add_argument("--report", type=Path, default=None, metavar="DIR", help="also write the report (markdown + plots) into DIR")
    run.add_argument("--tolerance-only", action="store_true",
                     help="judge every pair by the tolerance; by default a pair expected bitwise identical (one libtorch, CPU) "
                          "that is not is diverged")
    timing = run.add_argument_group("timing protocol (see harness/timing.py)")
    timing.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help=f"timed rounds per cell, at most (default {DEFAULT_ROUNDS})")
    timing.add_argument("--warmup-rounds", type=int, default=DEFAULT_WARMUP_ROUNDS,
                        help=f"untimed calls per cell, the first (which writes the weights) included (default {DEFAULT_WARMUP_ROUNDS})")
    timing.add_argument("--max-seconds", type=float, default=DEFAULT_MAX_SECONDS,
                        help=f"no more timed rounds for a cell once its rounds took this long; it gets one at least "
                             f"(default {DEFAULT_MAX_SECONDS:g})")
    timing.add_argument("--interleave", action="store_true", help="time the cells round-robin (A, B, A, B, ...) instead of back to back")
    timing.add_argument("--profile", action=argparse.BooleanOptionalAction, default=None,
                        help="profile one step of each Python cell's GEMMs with torch.profiler (default: on CUDA only)")

    report = commands.add_parser("report", help="write the markdown report and plots of a result file")
    report.add_argument("result", type=Path, help="a result written by `run --json`")
    report.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for report.md and the PNG plots")
    report.add_argument("--tolerance-only", action=argparse.BooleanOptionalAction, default=None,
                        help="judge every pair by the tolerance (--no-tolerance-only: strictly); default: as the run did")

    commands.add_parser("doctor", help="report what can run here and how to fix what is missing")

    prepare = commands.add_parser("prepare", help="print the run spec a script receives (used by the R scripts' shell mode)")
    add_spec_arguments(prepare, with_modes=False)
    prepare.add_argument("--weights-out", type=Path, default=None, help="where the script writes its final weights")
    return parser


def main(argv: list[str] | None = None) -> None:
    """The command-line entry point."""
    global _DEBUG
    args = _parser().parse_args(argv)
    _DEBUG = args.debug
    # A kill (SIGTERM) unwinds like Ctrl-C: workers stop, staged files go, no partial result stays.
    signal.signal(signal.SIGTERM, _terminate)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    show_warnings_as_lines()
    try:
        if args.command == "doctor":
            from harness.doctor import doctor

            sys.exit(doctor())
        if args.command == "prepare":
            from harness.prepare import prepare_run_spec
            from harness.spec_args import spec_from_args

            print(json.dumps(prepare_run_spec(spec_from_args(args), args.weights_out)))
            return
        if args.command == "report":
            from harness.report import report_main

            judging = None if args.tolerance_only is None else "tolerance_only" if args.tolerance_only else "strict"
            written = report_main(args.result, args.out, judging)
            print(f"report written to {written[0]} ({len(written) - 1} plots beside it)")
            return
        sys.exit(_run(args))
    except KeyboardInterrupt:
        print("error: interrupted; no result was written.", file=sys.stderr)
        sys.exit(130)
    except Exception as err:
        exit_with_error(err)


def _run(args: argparse.Namespace) -> int:
    from harness.results import save_result, weights_dir_for
    from harness.runner import MatrixRunner
    from harness.spec import parse_modes
    from harness.spec_args import spec_from_args
    from harness.table import make_console, print_result
    from harness.timing import TimingProtocol

    spec = spec_from_args(args)
    modes = parse_modes(args.mode)
    protocol = TimingProtocol(args.warmup_rounds, args.rounds, args.max_seconds, args.interleave)
    frontends = _parse_frontends(args.frontend)
    if args.json is not None:
        _check_writable(args.json, args.overwrite)
    _require_device(spec)
    console = make_console()
    with MatrixRunner(spec, frontends, timeout=args.timeout) as runner:
        with console.status("running cells...") as status:
            result = runner.run(modes, on_progress=status.update, protocol=protocol, profile=args.profile,
                                judging="tolerance_only" if args.tolerance_only else "strict")
        if args.json is not None:
            runner.publish_weights(result["cells"], weights_dir_for(args.json))
            save_result(result, args.json, overwrite=args.overwrite)
        if args.report is not None:  # while the runner is open: the report reads the weights files
            from harness.report import write_report

            written = write_report(result, args.report)
    print_result(result, console)
    if args.json is not None:
        console.print(f"result written to {args.json}")
    if args.report is not None:
        console.print(f"report written to {written[0]}")
    failed_cell = any(c["status"] in ("error", "numerical_failure") for c in result["cells"])
    return 1 if failed_cell or any(p["verdict"] == "diverged" for p in result["pairs"]) else 0


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _parse_frontends(values: list[str] | None) -> tuple[str, ...]:
    from harness.frontends.registry import FRONTENDS

    if not values:
        return tuple(FRONTENDS)
    asked = [f.strip() for v in values for f in v.split(",") if f.strip()]
    for name in asked:
        if name not in FRONTENDS:
            raise SpecError("frontend", name, f"one of {', '.join(repr(f) for f in FRONTENDS)}")
    return tuple(f for f in FRONTENDS if f in asked)


def _check_writable(path: Path, overwrite: bool) -> None:
    """Refuse, before minutes of running, a result path that exists or cannot be written."""
    if path.exists() and not overwrite:
        raise SpecError("--json", str(path), "a path that does not exist yet (or pass --overwrite)")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ResultError(f"cannot write a result in {folder}: it is not a writable folder. Choose another --json path.")


def _require_device(spec: WorkloadSpec) -> None:
    """Refuse ``cuda`` on a machine without one, and bf16 on a GPU without it, before any worker starts."""
    if spec.device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise SpecError("device", "cuda", "'cpu' on this machine: torch sees no CUDA GPU")
    if spec.amp_dtype == "bfloat16" and not torch.cuda.is_bf16_supported():
        raise SpecError("amp_dtype", "bfloat16", f"'float16' on {torch.cuda.get_device_name()}, which has no bf16 support")
