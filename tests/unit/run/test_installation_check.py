"""An R installation's worker must load the R torch it names: what the worker reports is checked against what was named."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.run.frontends import check_described
from harness.workload.installations import Installation


def _facts(library: Path, libtorch: Path | None = None) -> dict[str, str | None]:
    """What an R worker's ``describe`` reports of where its torch came from."""
    return {"language": "r", "r_library": str(library), "torch_package": str(library / "torch"),
            "libtorch_path": None if libtorch is None else str(libtorch)}


def test_a_library_holding_the_loaded_torch_is_accepted(tmp_path: Path) -> None:
    """``NAME=r:DIR`` whose worker loaded torch from DIR (a link to it counts) is what it names."""
    (tmp_path / "Rlib").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "Rlib")
    check_described(Installation("x", "r", r_libs=str(tmp_path / "link")), {"R_LIBS": f"{tmp_path / 'link'}:/site"},
                    _facts(tmp_path / "Rlib"))


def test_a_library_without_torch_that_loaded_this_shell_s_is_refused(tmp_path: Path) -> None:
    """DIR holds no torch, so R found this shell's behind it: refused, naming both and the fix."""
    named, shells = tmp_path / "empty", tmp_path / "site"
    with pytest.raises(UsageError) as refused:
        check_described(Installation("x", "r", r_libs=str(named)), {"R_LIBS": f"{named}:{shells}"}, _facts(shells, tmp_path / "lt.so"))
    assert str(refused.value) == (
        f"installation x must be an R installation whose worker loads the R torch it names, but it loaded R torch from {shells} "
        f"(libtorch {tmp_path / 'lt.so'}), and it names {named}: install the torch package into {named}, got 'r: {named}'."
    )


def test_an_activation_naming_no_library_of_the_loaded_torch_is_refused(tmp_path: Path) -> None:
    """An activation that exported nothing (it returned early) and a torch found elsewhere (a site library): refused."""
    script = tmp_path / "activate.sh"
    with pytest.raises(UsageError, match=r"it loaded R torch from /usr/lib/R/site-library, and it names no R library: check that its "
                                         r"activation script exports R_LIBS"):
        check_described(Installation("x", "r", activate=str(script)), {"R_LIBS": None, "TORCH_HOME": None},
                        _facts(Path("/usr/lib/R/site-library")))


def test_an_activation_naming_the_library_or_the_libtorch_is_accepted(tmp_path: Path) -> None:
    """Torch from a library the activation put on R_LIBS, or a libtorch under the TORCH_HOME it exported, is its own."""
    script = str(tmp_path / "activate.sh")
    check_described(Installation("x", "r", activate=script), {"R_LIBS": f"{tmp_path / 'b'}:{tmp_path / 'Rlib'}"}, _facts(tmp_path / "Rlib"))
    check_described(Installation("x", "r", activate=script), {"R_LIBS": None, "TORCH_HOME": str(tmp_path / "home")},
                    _facts(Path("/usr/lib/R/site-library"), tmp_path / "home" / "lib" / "libtorch_cpu.so"))


def test_this_harness_s_own_r_and_python_installations_are_not_checked(tmp_path: Path) -> None:
    """``r`` is this shell's own R torch, wherever it is; a Python installation reports no R library."""
    check_described(Installation("r", "r"), {}, _facts(tmp_path))
    check_described(Installation("py", "python", python="/usr/bin/python3"), {}, {"language": "python"})
