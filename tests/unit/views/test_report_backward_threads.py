"""The report's installations table shows what each worker measured a backward pass to run on (docs/determinism.md)."""

from __future__ import annotations

import dataclasses

from tests.support import golden_result, report_text


def test_the_threads_column_shows_the_backward_threads_the_worker_measured() -> None:
    """A cell whose installation holds ``backward_threads`` shows them beside the threads asked for; the golden result,
    from before the probe, shows the threads alone."""
    result = golden_result()
    assert "(backward " not in report_text(result)
    cells = tuple(dataclasses.replace(c, installation={**(c.installation or {}), "backward_threads": [1, 2]})
                  if c.frontend == "r" else c for c in result.cells)
    text = report_text(dataclasses.replace(result, cells=cells))
    assert "| 1 (backward 1, 2) |" in text
