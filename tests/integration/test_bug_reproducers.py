"""Every R torch bug the harness found has a standalone reproducer in each language that still shows it.

docs/bugs/<id>/reproducer.R exits 1 while R torch has the bug (and 0 once fixed: then its known-differences entry is
stale and must go); reproducer.py shows what PyTorch does (exit 0). A bug entry of the list needs both and its report.
The reproducers of each language run in one interpreter (tests/reproducers/run_all.R and run_all.py: 26 R reproducers
in 12 s here, where a process each paid R's start and library(torch) every time), but for those that need their own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.files.paths import REPO_ROOT
from harness.judge.init_parity import INIT_EXPLANATIONS
from harness.judge.known_differences import load_known_differences
from harness.judge.modules import load_module_differences
from harness.run.availability import probe
from tests.support import require_r_torch

BUGS = sorted(p.name for p in (REPO_ROOT / "docs" / "bugs").iterdir() if p.is_dir())


def test_every_bug_entry_has_its_folder_and_every_folder_is_a_bug() -> None:
    """The lists' bug entries (known differences, nn_init explanations) and docs/bugs/ name the same bugs, but for findings
    with no effect a trace could see."""
    entries = {k.id for k in load_known_differences() if k.kind == "bug"}
    entries |= {e.id for e in INIT_EXPLANATIONS if e.kind == "bug"}  # the nn_init comparison's (harness/judge/init_parity.py)
    entries |= {d.bug for d in load_module_differences() if d.bug is not None}  # the module sweep's (harness/judge/module_differences.toml)
    assert entries <= set(BUGS)
    # docs/known-differences.md: adam-grad-mutated, no traced value differs; ignite-adagrad-param-group-state and
    # ignite-zero-grad-set-to-none, crashes with no switch to prove them by, so the matrix leaves their cells out
    # (harness/workload/features.py); optim-load-state-dict-no-cast, the harness's checkpoints hold each state in its
    # parameter's dtype and device; backward-threads-stale, each worker sets its threads once, before its first backward
    # (docs/determinism.md), and stores what its backward ran on; conv-same-padding-mode, gumbel-softmax-sign,
    # mha-add-zero-attn and nnf-loss-default-reduction, in modules, options and functions neither the training matrix nor
    # module_db's samples reach (each report names the module and the option); embedding-padding-idx is the transformer
    # model's entry (known_differences.toml)
    assert set(BUGS) - entries == {"adam-grad-mutated", "ignite-adagrad-param-group-state", "ignite-zero-grad-set-to-none",
                                   "optim-load-state-dict-no-cast", "backward-threads-stale",
                                   "conv-same-padding-mode", "gumbel-softmax-sign",
                                   "mha-add-zero-attn", "nnf-loss-default-reduction"}


#: Reproducers that need a process of their own: backward-threads-stale shows a count kept by R torch's backward threads,
#: which the reproducers run before it in a shared R process have already set.
OWN_PROCESS = {"backward-threads-stale"}
DRIVERS = REPO_ROOT / "tests" / "reproducers"


def _run_reproducers(command: list[str], suffix: str, tmp: Path) -> dict[str, dict[str, Any]]:
    """Every bug's reproducer in ``suffix``'s language: those that may share one interpreter through the driver
    (tests/reproducers/run_all.R, run_all.py: one start and one torch load for all), the others in their own process.
    Returns each bug's ``{"status", "stdout"}``."""
    shared = [str(REPO_ROOT / "docs" / "bugs" / bug / f"reproducer.{suffix}") for bug in BUGS if bug not in OWN_PROCESS]
    out = tmp / f"reproducers-{suffix}.json"
    done = subprocess.run([*command, str(DRIVERS / f"run_all.{suffix}"), str(out), *shared], capture_output=True, text=True,
                          timeout=600, env=os.environ.copy())
    assert done.returncode == 0 and out.is_file(), done.stdout + done.stderr
    results = {Path(path).parent.name: result for path, result in json.loads(out.read_text(encoding="utf-8")).items()}
    for bug in sorted(OWN_PROCESS):
        alone = subprocess.run([*command, str(REPO_ROOT / "docs" / "bugs" / bug / f"reproducer.{suffix}")],
                               capture_output=True, text=True, timeout=180, env=os.environ.copy())
        results[bug] = {"status": alone.returncode, "stdout": alone.stdout + alone.stderr}
    return results


@pytest.fixture(scope="module")
def r_reproducers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every R reproducer's status and output (R torch must be there)."""
    require_r_torch(probe())
    return _run_reproducers(["Rscript"], "R", tmp_path_factory.mktemp("r-reproducers"))


@pytest.fixture(scope="module")
def python_reproducers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every Python reproducer's status and output."""
    return _run_reproducers([sys.executable], "py", tmp_path_factory.mktemp("py-reproducers"))


@pytest.mark.parametrize("bug", BUGS)
def test_the_r_reproducer_still_shows_the_bug(bug: str, r_reproducers: dict[str, dict[str, Any]]) -> None:
    """The R reproducer exits 1 (the bug is there); when R torch fixes it, this fails: retire the entry."""
    done = r_reproducers[bug]
    assert done["status"] == 1, f"{bug}: R torch no longer shows it (exit {done['status']}); remove or update its entry\n{done['stdout']}"
    assert "BUG" in done["stdout"]


@pytest.mark.parametrize("bug", BUGS)
def test_the_python_reproducer_shows_what_pytorch_does(bug: str, python_reproducers: dict[str, dict[str, Any]]) -> None:
    """The Python counterpart runs and exits 0: PyTorch computes what the report calls expected."""
    done = python_reproducers[bug]
    assert done["status"] == 0, done["stdout"]
    assert "PyTorch" in done["stdout"]


def test_a_shared_interpreter_keeps_each_reproducers_status_and_output(tmp_path: Path) -> None:
    """The drivers give each reproducer its own exit status and output: one that exits 1, one that returns, one that fails."""
    require_r_torch(probe())
    scripts = {"one": ('cat("BUG here\\n"); quit(status = 1)', 'print("PyTorch one"); import sys; sys.exit(1)'),
               "zero": ('cat("fine\\n")', 'print("PyTorch zero")'),
               "fails": ('stop("broken")', 'raise ValueError("broken")')}
    for name, (r_code, py_code) in scripts.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "reproducer.R").write_text(r_code + "\n", encoding="utf-8")
        (tmp_path / name / "reproducer.py").write_text(py_code + "\n", encoding="utf-8")
    for command, suffix in ((["Rscript"], "R"), ([sys.executable], "py")):
        out = tmp_path / f"{suffix}.json"
        paths = [str(tmp_path / name / f"reproducer.{suffix}") for name in scripts]
        subprocess.run([*command, str(DRIVERS / f"run_all.{suffix}"), str(out), *paths], check=True, timeout=120)
        got = {Path(p).parent.name: r for p, r in json.loads(out.read_text(encoding="utf-8")).items()}
        assert [got[n]["status"] for n in scripts] == [1, 0, 2], got
        assert ("BUG here" if suffix == "R" else "PyTorch one") in got["one"]["stdout"]
        assert "broken" in got["fails"]["stdout"]


@pytest.mark.parametrize("bug", BUGS)
def test_the_report_names_the_fix(bug: str) -> None:
    """The report is ready to file: a title, the reproducer and the one-line fix."""
    text = (Path(REPO_ROOT) / "docs" / "bugs" / bug / "report.md").read_text(encoding="utf-8")
    assert "**" in text and "```r" in text and "Fix" in text


@pytest.mark.parametrize("bug", BUGS)
def test_the_report_shows_its_versions_and_its_reproducer_names_real_files(bug: str) -> None:
    """GitHub hides HTML comments: the versions (R torch commit, libtorch, PyTorch) are in the report's visible text; the
    Python reproducer's docstring names files that exist beside it."""
    folder = Path(REPO_ROOT) / "docs" / "bugs" / bug
    visible = re.sub(r"<!--.*?-->", "", (folder / "report.md").read_text(encoding="utf-8"), flags=re.S)
    assert all(v in visible for v in ("e4de110", "libtorch 2.13.0", "PyTorch 2.13.0")), visible[:300]
    docstring = (folder / "reproducer.py").read_text(encoding="utf-8").split('"""')[1]
    for named in re.findall(r"[\w-]+\.(?:R|py)\b", docstring):
        assert (folder / named).is_file(), f"{bug}/reproducer.py names {named}, which is not beside it"


@pytest.mark.parametrize("bug", ["sgd-weight-decay-index", "rmsprop-weight-decay-index"])
def test_the_weight_decay_reports_cite_the_adam_precedent(bug: str) -> None:
    """The same slip in optim_adam was mlverse/torch#821, fixed by PR #824: both reports say so."""
    text = (Path(REPO_ROOT) / "docs" / "bugs" / bug / "report.md").read_text(encoding="utf-8")
    assert "mlverse/torch#821" in text and "#824" in text


def test_the_clip_report_says_what_makes_pytorch_skip() -> None:
    """PyTorch's step decides from what unscale_ recorded; the report must not credit the NaN through the clip."""
    text = (Path(REPO_ROOT) / "docs" / "bugs" / "clip-nan-coef" / "report.md").read_text(encoding="utf-8")
    assert "which is what lets" not in text and "found_inf_per_device" in text and "check_inf_per_device" in text
