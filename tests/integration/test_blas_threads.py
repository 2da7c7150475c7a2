"""The command's module loads no NumPy on import, so its one-BLAS-thread setting (harness.cli.main.BLAS_THREADS) is read."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.files.paths import REPO_ROOT


def test_numpy_is_not_loaded_before_the_setting() -> None:
    """OpenBLAS reads its thread count once, when NumPy loads: the command's module must not load NumPy on import."""
    code = "import sys; import harness.cli.main; print('numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.stdout.strip() == "False"
