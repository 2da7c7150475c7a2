"""The command line runs NumPy's BLAS on one thread unless the user set it (harness.cli.main.BLAS_THREADS): the float64
reference's matrices are tiny, and two OpenBLAS threads spinning beside two busy workers cost tiny's references 10-30x."""

from __future__ import annotations

import os

import pytest

from harness.cli.main import BLAS_THREADS, main


@pytest.mark.parametrize("given", [None, "4"])
def test_the_command_sets_one_blas_thread_unless_told(monkeypatch: pytest.MonkeyPatch, given: str | None) -> None:
    if given is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", given)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert BLAS_THREADS == {"OPENBLAS_NUM_THREADS": "1"}
    assert os.environ["OPENBLAS_NUM_THREADS"] == (given or "1")

