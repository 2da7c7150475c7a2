"""Runs many Python reproducers (docs/bugs/<id>/reproducer.py) in this one interpreter and writes, as JSON, what each
printed and the status it exited with: the Python half of tests/integration/test_bug_reproducers.py's shared interpreter.

Usage: python tests/reproducers/run_all.py OUT_JSON REPRODUCER.py...
"""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import sys


def run(path: str) -> dict[str, object]:
    """One reproducer as ``__main__``: its output, and its exit status (``sys.exit``'s code; 0 if it returns, 2 if it raises)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            runpy.run_path(path, run_name="__main__")
            status = 0
        except SystemExit as done:
            status = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except Exception as err:  # the reproducer failed: its result says how
            print(f"error: {type(err).__name__}: {err}")
            status = 2
    return {"status": status, "stdout": printed.getvalue()}


if __name__ == "__main__":
    results = {path: run(path) for path in sys.argv[2:]}
    with open(sys.argv[1], "w", encoding="utf-8") as handle:
        json.dump(results, handle)
