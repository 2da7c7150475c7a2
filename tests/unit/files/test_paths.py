"""Script lookup: the checkout's scripts unless $AMP_PARITY_SCRIPTS names a copy.

That the workers really run the copy is in ``tests/integration/test_paths.py``.
"""

from __future__ import annotations

import pytest

from harness.files.paths import REPO_ROOT, SCRIPTS_ENV, script_path, scripts_root
from harness.run.runner import collect_warnings


def test_scripts_root_defaults_to_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the variable the checkout's scripts run and no warning is added."""
    monkeypatch.delenv(SCRIPTS_ENV, raising=False)
    assert scripts_root() == REPO_ROOT
    assert script_path("r", "with_autocast") == REPO_ROOT / "r_scripts" / "with_autocast.R"
    assert collect_warnings([]) == []
