"""A finding's folder: ``example.json`` (the minimal spec: the pair, the drawn workload, what moved from the rows'
points, the whole workload spec and the spaces it was drawn from), ``difference.txt`` (the first differing tensor the
trace names, and the pair's whole explanation), ``reproducer.py`` and ``reproducer.R`` (:mod:`harness.search.reproducers`)
and a ``README.md`` saying whether they show the difference (they are run when the folder is written)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from harness.files.atomic import atomic_path, write_json_atomic
from harness.search.engine import Finding
from harness.search.example import Example
from harness.search.reproducers import python_reproducer, r_reproducer
from harness.workload.features import FEATURES, NO_FEATURE
from harness.workload.optimizers import OPTIMIZERS

__all__ = ["finding_folder", "write_example", "write_finding"]

#: Seconds a reproducer may take (R's library(torch) is most of it).
_REPRODUCER_TIMEOUT_S = 120.0


def finding_folder(out: Path, number: int, signature: str) -> Path:
    """``out/NN-<signature as a name>``."""
    slug = re.sub(r"[^a-z0-9]+", "-", signature.lower()).strip("-")[:60]
    return out / f"{number:02d}-{slug}"


def write_example(folder: Path, finding: Finding) -> None:
    """``example.json`` alone (as soon as a finding is seen, then again as it shrinks: an interrupted search keeps it)."""
    folder.mkdir(parents=True, exist_ok=True)
    example = finding.example
    spaces = {f"{example.optimizer}.{k}": OPTIMIZERS[example.optimizer].space[k].to_json() for k in example.optimizer_args}
    if example.feature != NO_FEATURE:
        spaces |= {f"{example.feature}.{k}": FEATURES[example.feature].space[k].to_json() for k in example.feature_args}
    write_json_atomic(folder / "example.json", {
        "kind": finding.judged.outcome, "signature": finding.judged.signature, "summary": finding.judged.summary,
        "first_difference": finding.judged.first_difference, "example": example.to_json(), "spaces": spaces,
    })


def write_finding(folder: Path, finding: Finding) -> str:
    """The whole folder; returns the README's line on the reproducers."""
    write_example(folder, finding)
    judged, example = finding.judged, finding.example
    _write(folder / "difference.txt", "\n".join([
        f"first differing tensor: {judged.first_difference or 'none named (the trace has no difference: see below)'}",
        judged.summary, *judged.lines, ""]))
    _write(folder / "reproducer.py", python_reproducer(example, judged.summary))
    lines, why = _run_python(folder / "reproducer.py")
    _write(folder / "reproducer.R", r_reproducer(example, judged.summary, lines))
    shows = why or _run_r(folder / "reproducer.R")
    _write(folder / "README.md", _readme(example, finding, shows))
    return shows


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _run_python(path: Path) -> tuple[list[str] | None, str]:
    try:
        done = subprocess.run([sys.executable, path.name], cwd=path.parent, capture_output=True, text=True,
                              timeout=_REPRODUCER_TIMEOUT_S, env=_env(), check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"reproducer.py did not run here ({err}): reproducer.R only prints"
    if done.returncode != 0:
        return None, f"reproducer.py failed here (PyTorch refuses it: {' '.join(done.stderr.split()[-12:])}); reproducer.R only prints"
    return done.stdout.splitlines(), ""


def _run_r(path: Path) -> str:
    try:
        done = subprocess.run(["Rscript", path.name], cwd=path.parent, capture_output=True, text=True,
                              timeout=_REPRODUCER_TIMEOUT_S, env=_env(), check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"reproducer.R did not run here ({err})"
    if done.returncode == 1 and "differs from PyTorch" in done.stdout:
        return "the reproducers show it: the optimizer alone differs (reproducer.R exits 1, naming the first parameter)"
    if done.returncode == 0:
        return ("the optimizer alone does not show it (reproducer.R equals PyTorch bitwise): the difference needs the loop "
                "of example.json (its mode, the model, a feature)")
    return f"reproducer.R failed in R torch where PyTorch ran: {' '.join((done.stderr or done.stdout).split()[-20:])}"


def _readme(example: Example, finding: Finding, shows: str) -> str:
    judged = finding.judged
    return "\n".join([
        f"# {judged.signature}", "", judged.summary, "",
        f"- minimal example: {example.describe()}",
        f"- first differing tensor (the trace): {judged.first_difference or 'none named'}",
        f"- reproducers: {shows}",
        "- example.json holds the whole spec; docs/known-differences.md#adding-an-entry and docs/bugs/ say how to make it "
        "an entry or a bug report (README.md, 'The search').", "",
    ])


def _write(target: Path, text: str) -> None:
    with atomic_path(target) as temporary:
        temporary.write_text(text, encoding="utf-8")
