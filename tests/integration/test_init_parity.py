"""``python -m harness inits`` with the real scripts: every case identical, refused by both, or explained (proven).

Runs PyTorch and R torch once for the module (about 20 s here). The coverage table is committed (docs/init-parity.md),
so a change in what R torch does shows in a diff; a planted change in R's script comes out unexplained.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from harness.cli.commands.inits import markdown_table
from harness.contract.nn_init import INIT_ROWS
from harness.files.paths import REPO_ROOT, SCRIPTS_ENV
from harness.judge.init_parity import TRUNC_NORMAL_PNORM, InitParity
from harness.run.availability import Availability
from harness.run.init_parity import run_init_parity
from tests.planting import copy_scripts, plant
from tests.support import require_r_torch

DOC = REPO_ROOT / "docs" / "init-parity.md"


@pytest.fixture(scope="module")
def parity(availability: Availability, tmp_path_factory: pytest.TempPathFactory) -> InitParity:
    require_r_torch(availability)
    return run_init_parity(tmp_path_factory.mktemp("inits"))


def _rscript(code: str) -> str:
    done = subprocess.run(["Rscript", "-e", code], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def test_every_case_is_identical_refused_by_both_or_explained(parity: InitParity) -> None:
    """Nothing unexplained, no explanation stale, and the identical cases are most of them."""
    assert parity.ok, [(o.case["id"], o.verdict, o.detail) for o in parity.unexplained] + list(parity.stale)
    assert sum(o.verdict == "identical" for o in parity.outcomes) >= 100


def test_the_committed_table_is_what_the_comparison_gives(parity: InitParity) -> None:
    """docs/init-parity.md holds the table this run writes (between its markers): regenerate it with
    ``python -m harness inits --out DIR`` and copy DIR/init-parity.md in when R torch or the cases change."""
    text = DOC.read_text(encoding="utf-8")
    committed = text.split("<!-- inits table -->\n", 1)[1].split("<!-- end inits table -->", 1)[0]
    assert committed == markdown_table(parity)


def test_the_rows_are_every_nn_init_function_r_torch_ships(availability: Availability) -> None:
    """One row per exported ``nn_init_*`` function, none left out, none made up."""
    require_r_torch(availability)
    exported = set(_rscript('cat(grep("^nn_init_", getNamespaceExports("torch"), value = TRUE), sep = "\\n")').split())
    assert {f"nn_init_{row.function}" for row in INIT_ROWS} == exported


def test_the_pnorm_values_the_trunc_normal_switch_uses_are_rs(availability: Availability) -> None:
    """The switch's CDF values (measured once in R) are what R's pnorm gives, bit for bit."""
    require_r_torch(availability)
    xs = ", ".join(TRUNC_NORMAL_PNORM)
    printed = _rscript(f'cat(sprintf("%a", pnorm(c({xs}))), sep = "\\n")').split()
    assert [float.fromhex(v) for v in printed] == [float.fromhex(v) for v in TRUNC_NORMAL_PNORM.values()]


def test_a_changed_default_in_r_comes_out_unexplained(availability: Availability, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted change in R's script (every kaiming_uniform_ given another a) makes those cases diverge, unexplained."""
    require_r_torch(availability)
    root = copy_scripts(tmp_path / "planted")
    plant(root, "r_scripts/nn_init.R", "  do.call(fn, c(list(tensor), case$options))",
          '  options <- case$options\n  if (case[["function"]] == "kaiming_uniform_") options$a <- 0.5\n'
          "  do.call(fn, c(list(tensor), options))")
    monkeypatch.setenv(SCRIPTS_ENV, str(root))
    planted = run_init_parity(tmp_path / "out")
    unexplained = {o.case["id"] for o in planted.unexplained}
    assert unexplained and all(re.match(r"kaiming_uniform_ (5x3|4x3x3x3) ", i) for i in unexplained), unexplained
    assert not planted.ok
