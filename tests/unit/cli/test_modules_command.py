"""``python -m harness modules``: bad input is one line naming the cause and the fix, before any worker starts; a report
folder already holding a sweep's report is not overwritten unless asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ExitCode
from tests.support import run_cli


@pytest.mark.parametrize(("args", "message"), [
    (["--mode", "float32,fp8"], "--mode must be modes among float32, autocast_bfloat16, autocast_float16, lowp_bfloat16"),
    (["--limit", "0"], "--limit must be a whole number of samples, 1 or more"),
])
def test_a_bad_flag_is_one_line_and_a_usage_error(args: list[str], message: str) -> None:
    done = run_cli("modules", *args)
    assert done.returncode == ExitCode.USAGE_ERROR
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_report_already_there_is_kept_without_overwrite(tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text("a user's report\n")
    done = run_cli("modules", "--out", str(tmp_path))
    assert done.returncode == ExitCode.USAGE_ERROR and "--overwrite" in done.stderr
    assert (tmp_path / "report.md").read_text() == "a user's report\n"
