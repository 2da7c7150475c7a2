"""``harness search``: a property-based search across the two bindings (Hypothesis), each difference shrunk to a minimal
spec with a standalone reproducer in each language. Above ``run`` (its workers and runner) and ``judge`` (the matrix's
verdicts), below the command line."""
