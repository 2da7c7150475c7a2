"""The contract between the harness and the scripts of both languages, declared once (docs/contract.md).

What both sides must agree on lives here as data: the dtypes, the modes and their properties, the record's fields, and
the run spec that carries them to the scripts. Nothing here runs torch: the worker side and the parent both read it.
"""
