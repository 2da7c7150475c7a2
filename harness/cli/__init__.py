"""The entry points: ``python -m harness`` (:mod:`harness.cli.main`), ``doctor``, and the one-line errors.

The top layer: it parses flags, hands them to the objects of the layers below, prints, and turns the outcome
into an exit status. Nothing below imports it, except the scripts' shell mode, which prints its errors
through :mod:`harness.cli.lines` (a module that needs nothing but :mod:`harness.errors`).
"""
