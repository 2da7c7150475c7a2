"""Runs every Python reproducer named on the command line in this one process (torch imported once), as ``python FILE``
would run each: ``sys.exit(N)`` ends it with N, an uncaught exception with 1.

Usage: ``python tests/reproducers/run_all.py OUT_DIR docs/bugs/<id>/reproducer.py ...``; writes ``OUT_DIR/<id>.out`` (what
it printed, its traceback included) and ``OUT_DIR/<id>.status`` (its exit status) for each.
"""

from __future__ import annotations

import contextlib
import io
import runpy
import sys
import traceback
from pathlib import Path


def run(path: Path) -> tuple[int, str]:
    """The reproducer's exit status and what it printed, run as ``__main__``."""
    printed = io.StringIO()
    status = 0
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as done:
            status = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except Exception:
            traceback.print_exc()
            status = 1
    return status, printed.getvalue()


def main(out_dir: Path, paths: list[Path]) -> None:
    for path in paths:
        status, printed = run(path)
        (out_dir / f"{path.parent.name}.out").write_text(printed, encoding="utf-8")
        (out_dir / f"{path.parent.name}.status").write_text(str(status), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
