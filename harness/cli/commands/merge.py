"""``merge``: results of several machines, devices or installations made one judged result, with its report."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.cli.options import add_rejudging_arguments, entry_texts_of, known_differences_of, rejudging_of
from harness.cli.outcome import exit_status, uncompared
from harness.cli.output import WRITTEN
from harness.errors import ExitCode

__all__ = ["add_parser", "command"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], switches: argparse.ArgumentParser) -> None:
    """The ``merge`` command's flags (``switches``: ``--debug`` and ``-v``, accepted after the command too)."""
    from harness.workload.flags import path_argument

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


def command(args: argparse.Namespace) -> ExitCode:
    """``harness merge``: one judged result of many (:mod:`harness.store.merge`), its report in ``--out``, its table printed.

    Every output place is checked before any input is read: the report folder (no report file may be an input or the
    ``--json`` file) and the ``--json`` place (as ``run`` checks it, and neither an input nor a report file). The report and
    the merged result are then published together, or neither.
    """
    from harness.store.merge import merge_results
    from harness.store.report_claim import ReportClaim, publish_report_with_result
    from harness.store.result_claim import check_merged_result_place
    from harness.views.report import REPORT_FILES, write_report
    from harness.views.table import make_console, print_result

    labels, paths = zip(*(_labelled_result(item) for item in args.results), strict=True)
    if args.json is not None:
        check_merged_result_place(args.json, args.overwrite, paths, args.out, REPORT_FILES)
    inputs = [*paths, *([args.json] if args.json is not None else [])]
    with ReportClaim(args.out, REPORT_FILES, args.overwrite, flag="--out", inputs=inputs) as claim:
        result = merge_results(paths, args.baseline, rejudging_of(args), known_differences_of(args), labels)
        write_report(result, claim.staging, entry_texts_of(args), page_dir=claim.folder)
        if args.json is None:
            written = claim.publish()
        else:
            written = publish_report_with_result(claim, result, args.json, args.overwrite)
    WRITTEN.append(f"the report was written to {written[0]}")
    if args.json is not None:
        WRITTEN.append(f"the merged result was written to {args.json}")
    console = make_console()
    print_result(result, console, verbose=getattr(args, "verbose", False))
    console.print(f"merged {len(paths)} results ({len(result.cells)} cells); report written to {written[0]}"
                  + (f"; merged result written to {args.json}" if args.json is not None else ""), markup=False)
    failed = uncompared(result)
    if failed is not None:
        print(failed, file=sys.stderr)
    return exit_status(result)


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
