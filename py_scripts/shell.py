"""The Python scripts' shell mode, a script run by hand: the twin of ``r_scripts/shell.R``.

``python py_scripts/with_autocast.py --preset tiny --mode autocast`` parses its flags, checks the mode,
prepares the run spec, runs and prints the record. The flags and their validation are the harness's own
(:func:`harness.run.prepare.parse_shell_args`, :func:`harness.run.prepare.prepare_shell_run_spec`), which R's
shell mode reaches through ``python -m harness prepare``: one place for both languages.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from py_scripts.record import record_to_json

__all__ = ["main_cli"]


def main_cli(script: str, run_workload: Callable[[dict[str, Any], str], dict[str, Any]]) -> None:
    """Shell mode of the pair ``script``: parse the spec flags, prepare the fixtures, run, print the record as JSON.

    An error is one ``error:`` line and its exit status (:class:`harness.errors.ExitCode`: a usage error, or an internal
    error for anything unexpected); ``--debug`` adds the traceback (R's twin prints its own).
    """
    from harness.cli.lines import exit_with_error, show_warnings_as_lines
    from harness.errors import PatchesError

    try:
        from harness.run.prepare import check_shell_mode, parse_shell_args, prepare_shell_run_spec
    except PatchesError as err:  # the harness's own patches table, read as it loads: one line, its own status
        exit_with_error(err, debug="--debug" in sys.argv[1:])

    show_warnings_as_lines()
    prog = Path(sys.argv[0]).name
    args = parse_shell_args(sys.argv[1:], script, prog=prog)
    try:
        mode = check_shell_mode(args.mode, script, prog)
        print(record_to_json(run_workload(prepare_shell_run_spec(args, script), mode)))
    except Exception as err:
        exit_with_error(err, debug=args.debug)
