"""The benchmarks' environment variables, each read and checked in one place: a bad value is one line before anything runs.

``AMP_PARITY_BENCH_ROUNDS=0`` failed inside pytest-benchmark with a raw ``ValueError``, ``abc`` at import with a
traceback. ``tests/benchmarks/conftest.py`` calls :func:`check_settings` when pytest is configured and refuses a bad
value in one ``ERROR:`` line (a ``pytest.UsageError``); the benchmarks then read the values through these functions.
"""

from __future__ import annotations

import os

from harness.contract.modes import SCRIPTS, all_mode_names
from harness.errors import AmpParityError
from harness.model.efficiency import gemm_dtype
from harness.model.timing import DEFAULT_ROUNDS
from harness.workload.installations import Installation, parse_frontends
from harness.workload.optimizers import parse_optimizers
from harness.workload.spec import PRESETS, WorkloadSpec

__all__ = ["ROUNDS_ENV", "check_settings", "frontends", "optimizers", "preset", "rounds", "spread_modes"]

ROUNDS_ENV = "AMP_PARITY_BENCH_ROUNDS"
PRESET_ENV = "AMP_PARITY_BENCH_PRESET"
FRONTENDS_ENV = "AMP_PARITY_BENCH_FRONTENDS"
OPTIMIZERS_ENV = "AMP_PARITY_BENCH_OPTIMIZERS"


def rounds() -> int:
    """Timed rounds per cell: ``AMP_PARITY_BENCH_ROUNDS``, default the harness's (lower it for ``recipe`` on a CPU).

    Raises:
        ValueError: not a whole number ≥ 1 (one line naming the variable).
    """
    text = os.environ.get(ROUNDS_ENV, "").strip() or str(DEFAULT_ROUNDS)
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{ROUNDS_ENV} must be a whole number of timed rounds ≥ 1, got {os.environ.get(ROUNDS_ENV)!r}")
    return value


def preset(default: str) -> str:
    """The preset timed: ``AMP_PARITY_BENCH_PRESET``, else ``default`` (the cells' ``tiny``, the protocol's ``bench``).

    Raises:
        ValueError: not a preset's name.
    """
    name = os.environ.get(PRESET_ENV, "").strip() or default
    if name not in PRESETS:
        raise ValueError(f"{PRESET_ENV} must be one of {', '.join(PRESETS)}, got {os.environ.get(PRESET_ENV)!r}")
    return name


def frontends() -> tuple[Installation, ...]:
    """The installations timed: ``AMP_PARITY_BENCH_FRONTENDS`` in ``--frontend``'s syntax, by default this harness's python and r.

    Raises:
        ValueError: what ``run --frontend`` would refuse (its own one line).
    """
    value = os.environ.get(FRONTENDS_ENV)
    try:
        return parse_frontends([value] if value else None)
    except AmpParityError as err:
        raise ValueError(f"{FRONTENDS_ENV}: {err}") from err


def optimizers() -> tuple[str, ...]:
    """The optimizers timed: ``AMP_PARITY_BENCH_OPTIMIZERS`` in ``--optimizer``'s syntax, by default plain SGD (every row at
    ``bench`` would take most of an hour).

    Raises:
        ValueError: what ``run --optimizer`` would refuse (its own one line).
    """
    value = os.environ.get(OPTIMIZERS_ENV)
    try:
        return parse_optimizers([value] if value else ["sgd"], "bench")
    except AmpParityError as err:
        raise ValueError(f"{OPTIMIZERS_ENV}: {err}") from err


def spread_modes(has_bf16: bool | None) -> tuple[str, ...] | None:
    """The modes the ``bench`` spread benchmarks time: every mode (``None``: the preset's), but on a CPU known to lack
    bfloat16 instructions only those whose GEMMs run in float32.

    Why: there bfloat16 is emulated, about 19x slower than float32 (docs/timing.md, *Measured*: every CPU autocast cell
    at ``bench`` 13.5-14.2 s a loop against 0.70-0.84 s for ``default`` on the 2-vCPU EPYC), so the ten bfloat16 cells'
    20 rounds and their floors took most of an hour per run (issue 38: ``tox -e bench`` did not finish in 600 s there),
    and their AMP timings mean nothing on such a CPU (the run's header says so).
    """
    if has_bf16 is not False:
        return None
    spec = WorkloadSpec.from_preset("bench")
    modes = {mode.name: mode for script in SCRIPTS.values() for mode in script.modes}
    return tuple(name for name in all_mode_names() if gemm_dtype(modes[name], spec) == "float32")


def check_settings() -> None:
    """Read every variable once, so a bad one is refused before any benchmark runs.

    Raises:
        ValueError: the first bad value, in one line.
    """
    rounds()
    preset("tiny")
    frontends()
    optimizers()
