"""The worker side: the code that runs inside a worker process, where a frontend's libraries are imported.

The child's serving loop (:mod:`~harness.worker_side.serve`), the handlers that call the scripts
(:mod:`~harness.worker_side.python_handler`, :mod:`~harness.worker_side.r_handler`), the trace recorder, the matmul
peak and the GEMM profiler, and the byte format tensors cross in (:mod:`~harness.worker_side.tensor_bytes`). It
imports nothing of the parent's layers (import-linter holds the rule), so a worker's interpreter needs torch,
numpy, safetensors and blake3 (the trace's hash; and rpy2 for R) only. The parent refers to the handlers by name
(:mod:`harness.run.frontends`) and never imports them.
"""
