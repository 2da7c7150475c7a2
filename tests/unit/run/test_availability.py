"""What the probe of R found, in one line with the fix: each missing piece is named precisely.

The machine is described, not probed (the probe runs ``Rscript``); the runner's use of it is in
``tests/integration/test_runner.py``.
"""

from __future__ import annotations

import dataclasses

import pytest

from harness.run.availability import Availability


@pytest.fixture
def availability() -> Availability:
    """A machine where R torch runs, as the probe finds it on one (a unit test does not run the probe)."""
    r = {"torch_installed": True, "libtorch_installed": True, "libtorch_loads": True}
    return Availability(python_version="3.11.7", torch_version="2.13.0", rscript="/usr/bin/Rscript", rpy2_version="3.5.17",
                        rpy2_error=None, r=r)


@pytest.mark.parametrize(
    ("r_info", "expected"),
    [
        ({}, "rpy2 3.6.0 cannot load R: undefined symbol: R_getVar"),
        ({"torch_installed": True, "libtorch_installed": False},
         "R torch is installed but its libtorch is not: in R, torch::install_torch()"),
        ({"torch_installed": True, "libtorch_installed": True, "libtorch_loads": False, "libtorch_error": "liblantern.so: cannot open"},
         "R torch's libtorch fails to load (liblantern.so: cannot open): in R, torch::install_torch(reinstall = TRUE)"),
    ],
)
def test_each_missing_piece_is_named_precisely(availability: Availability, r_info: dict[str, object], expected: str) -> None:
    """rpy2 that cannot load R, R torch without libtorch, and libtorch that fails to load each get their own reason."""
    broken = dataclasses.replace(availability, r=r_info, rpy2_version="3.6.0" if not r_info else availability.rpy2_version,
                                 rpy2_error="undefined symbol: R_getVar" if not r_info else None)
    assert broken.r_reason == expected


def test_no_r_at_all_is_named(availability: Availability) -> None:
    """No Rscript on the PATH is reported before anything else."""
    assert dataclasses.replace(availability, rscript=None).r_reason.startswith("R is not installed")  # type: ignore[union-attr]


def test_a_run_does_not_probe_r_before_its_worker_starts() -> None:
    """``probe_host`` starts no R: R's side is unknown (``r_probed`` false), which is no reason not to run until the R worker
    answers; what the host lacks (R, rpy2) is still a reason at once."""
    from harness.run.availability import probe_host

    host = probe_host()
    assert not host.r_probed and host.r == {} and host.rpy2_error is None
    if host.rscript and host.rpy2_version:
        assert host.r_reason is None
    unprobed = Availability(python_version="3.11.7", torch_version="2.13.0", rscript="/usr/bin/Rscript", rpy2_version="3.5.17",
                            rpy2_error=None, r_probed=False)
    assert unprobed.r_reason is None  # not known yet: the R worker's start tells
    assert dataclasses.replace(unprobed, rscript=None).r_reason.startswith("R is not installed")  # type: ignore[union-attr]
    assert dataclasses.replace(unprobed, r_probed=True).r_reason == (
        'the R package torch is not installed: in R, install.packages("torch"); torch::install_torch()')
