"""The real ``python -m harness report`` refuses a malformed result in one line, before any file is written.

Each malformed field, named, is in ``tests/unit/model/test_result_shape.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT
from tests.support import GOLDEN_RESULT

_EXAMPLE = GOLDEN_RESULT


def _example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_EXAMPLE.read_text())
    return data


def _without_spec(d: dict[str, Any]) -> None:
    del d["spec"]


def _cells_nope(d: dict[str, Any]) -> None:
    d["cells"] = "nope"


@pytest.mark.parametrize(("edit", "field"), [(_without_spec, "spec"), (_cells_nope, "cells")])
def test_report_command_refuses_before_writing_anything(tmp_path: Path, edit: Any, field: str) -> None:
    """``report`` on a result without spec or with ``"cells": "nope"`` prints one line, exits 1 and writes no file."""
    result = _example()
    edit(result)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(result))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "harness", "report", str(path), "--out", str(out)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == ExitCode.USAGE_ERROR
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path} is not a result a report can be drawn from: {field} must be")
    assert not out.exists()
