"""Running the matrix: the runner, the worker pool and its worker processes, timed rounds, traces, probes.

Everything that starts a process lives here. The parent side only: what runs inside a worker is
:mod:`harness.worker_side`. A sibling of :mod:`harness.store`; neither imports the other.
"""
