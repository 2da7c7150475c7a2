"""Integration tests: real workers, subprocesses, R and the real scripts. Each carries the ``integration`` marker.

``python3 -m pytest -m "not integration"`` leaves them out and runs the unit tests alone (seconds).
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test collected under ``tests/integration/`` (this hook sees the whole session's items)."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)
