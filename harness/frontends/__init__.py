"""The frontends: the registry the parent reads (:mod:`harness.run.frontends`), and the code that runs
inside a worker process (the handlers, the matmul peak, the GEMM profiler), which the parent never imports."""
