"""amp-parity: a parity and timing harness for automatic mixed precision in PyTorch and R torch.

The public surface is six names; everything else is reached through its layer's package (docs/architecture.md).
They are imported on first use, not with the package: a worker process imports only the worker side
(:mod:`harness.worker_side`), whose interpreter needs torch, numpy, safetensors and blake3 and nothing more, and no
importer of ``harness`` pays for the layers it does not use. Importing ``harness`` never imports torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.errors import AmpParityError
    from harness.model.result import MatrixResult
    from harness.run.runner import MatrixRunner
    from harness.store.result_claim import ResultClaim
    from harness.store.result_file import load_result
    from harness.workload.spec import WorkloadSpec

__all__ = ["AmpParityError", "MatrixResult", "MatrixRunner", "ResultClaim", "WorkloadSpec", "__version__", "load_result"]

#: Where each public name lives.
_HOMES = {
    "AmpParityError": "harness.errors",
    "MatrixResult": "harness.model.result",
    "MatrixRunner": "harness.run.runner",
    "ResultClaim": "harness.store.result_claim",
    "WorkloadSpec": "harness.workload.spec",
    "load_result": "harness.store.result_file",
    "__version__": "harness.files.version",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
