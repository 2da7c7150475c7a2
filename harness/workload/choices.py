"""Choices from a command line's repeated or comma-separated flag values (``--mode``, ``--optimizer``, ``--frontend``).

Apart from the workload spec and the optimizer table so that both read it and neither imports the other for it.
"""

from __future__ import annotations

from typing import Any

from harness.errors import UsageError

__all__ = ["parse_choices"]


def parse_choices(name: str, values: list[str] | tuple[str, ...] | None, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """Repeated or comma-separated flag values (``--mode``, ``--frontend``), in ``allowed``'s order; all when none given.

    Raises:
        UsageError: a value outside ``allowed``, or only separators (``--mode ""`` would run no cell and
            write an empty result).
    """
    if not values:
        return allowed
    asked = [m.strip() for v in values for m in v.split(",")]
    if not any(asked):
        raise UsageError(name, ",".join(values), f"one or more of {_listing(allowed)}")
    for value in asked:  # an empty one among others (--mode default --mode "", default,,autocast) is a typo too
        if value not in allowed:
            raise UsageError(name, value, f"one of {_listing(allowed)}")
    return tuple(m for m in allowed if m in asked)


def _listing(items: Any) -> str:
    return ", ".join(repr(i) for i in items)
