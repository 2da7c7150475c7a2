"""``report``: a stored result judged again on load, its report written into a claimed folder."""

from __future__ import annotations

import argparse

from harness.cli.options import add_rejudging_arguments, entry_texts_of, known_differences_of, rejudging_of
from harness.cli.outcome import exit_status, failing_line
from harness.cli.output import WRITTEN, print_or_go_quiet, report_files_line
from harness.errors import ExitCode

__all__ = ["add_parser", "command"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], switches: argparse.ArgumentParser) -> None:
    """The ``report`` command's flags (``switches``: ``--debug`` and ``-v``, accepted after the command too)."""
    from harness.workload.flags import path_argument

    report = commands.add_parser("report", parents=[switches], help="write the markdown report and plots of a result file")
    report.add_argument("result", type=path_argument, help="a result written by `run --json`")
    report.add_argument("--out", type=path_argument, required=True, metavar="DIR", help="folder for report.md and the PNG plots")
    report.add_argument("--overwrite", action="store_true", help="replace a report already in DIR")
    report.add_argument("--exit-zero", action="store_true",
                        help="exit 0 even when the result fails its checks (viewing only; a refused input still fails)")
    add_rejudging_arguments(report, "as the run did")


def command(args: argparse.Namespace) -> ExitCode:
    """``harness report``: the report of a saved result, judged on load; its status is the result's (``--exit-zero``: 0)."""
    from harness.store.report_claim import ReportClaim
    from harness.store.result_file import load_result
    from harness.views.report import REPORT_FILES, write_report

    with ReportClaim(args.out, REPORT_FILES, args.overwrite, flag="--out", inputs=[args.result]) as claim:
        result = load_result(args.result, rejudging_of(args), known_differences_of(args))
        write_report(result, claim.staging, entry_texts_of(args), page_dir=claim.folder)
        written = claim.publish()
    WRITTEN.append(f"the report was written to {written[0]}")
    print_or_go_quiet(f"report written to {written[0]}; {report_files_line(written)}")
    status = exit_status(result)
    if status is ExitCode.OK or args.exit_zero:
        return ExitCode.OK
    print_or_go_quiet(f"{failing_line(result)}: exit status {int(status)} (the report says why; --exit-zero views a failing "
                       "result without failing)")
    return status
