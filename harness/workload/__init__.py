"""What to run: the workload spec and its presets, its command-line flags, the matrix of cells, the fixtures.

The bottom of the parent's layers: a spec is data (:class:`~harness.workload.spec.WorkloadSpec`), the matrix a
set of cells (:mod:`~harness.workload.matrix`), and the fixtures the seeded tensors both frontends start from
(:mod:`~harness.workload.fixtures`).
"""
