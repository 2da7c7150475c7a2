"""``python -m harness doctor``: what can run on this machine, with versions and how to fix the rest."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from harness.run.availability import Availability

__all__ = ["add_parser", "command", "doctor"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], switches: argparse.ArgumentParser) -> None:
    """The ``doctor`` command: no flags of its own."""
    commands.add_parser("doctor", parents=[switches], help="report what can run here and how to fix what is missing")


def command(args: argparse.Namespace) -> ExitCode:
    """``harness doctor``: the availability table, and whether what CI needs can run."""
    return doctor()


def doctor(console: Console | None = None, availability: Availability | None = None) -> ExitCode:
    """Print the availability table; ``OK`` when Python cells can run (and R cells too under AMP_PARITY_REQUIRE_R=1), else
    ``FAILED`` (the check this command is)."""
    from rich.markup import escape  # rich and the probe load on use: the parser imports every command
    from rich.table import Table
    from rich.text import Text

    from harness.run.availability import INSTALL_R_TORCH, probe, python_cuda, r_required
    from harness.views.table import make_console

    console = console or make_console()
    a = availability or probe()
    r = a.r
    rows = [
        ("Python", a.python_version, None),
        ("Python torch", a.torch_version, a.python_reason),
        ("CUDA (Python torch)", python_cuda() if a.torch_version else None, None),
        ("R", r.get("r_version") or ("found" if a.rscript else None),
         None if a.rscript else "apt-get install r-base-core r-base-dev"),
        ("rpy2", a.rpy2_version, 'pip install "rpy2>=3.5.17,<3.6"' if a.rpy2_version is None else a.rpy2_error),
        ("R packages jsonlite, cli", "yes" if r.get("cli") and r.get("jsonlite") else None,
         None if r.get("cli") else "apt-get install r-cran-jsonlite r-cran-cli (or install.packages(c('jsonlite', 'cli')))"),
        ("R package torch", r.get("torch_version"), None if r.get("torch_installed") else f"in R: {INSTALL_R_TORCH}"),
        ("R torch's libtorch version", r.get("libtorch_version"), None),
        ("R package safetensors", "yes" if r.get("safetensors") else None,
         None if r.get("safetensors") else "installed with R torch (install.packages('safetensors'))"),
        ("R torch libtorch", "loads" if r.get("libtorch_loads") else None,
         None if r.get("libtorch_loads") else (r.get("libtorch_error") or "in R: torch::install_torch()")),
        ("R torch CUDA", "yes" if r.get("cuda_available") else "no", None),
        ("R clock", "bench::hires_time (ns, CLOCK_REALTIME)" if r.get("bench") else None,
         None if r.get("bench") or not a.rscript else "apt-get install r-cran-bench (without it R times with proc.time, 1 ms steps)"),
    ]
    # What the harness sets, not what it found: each worker's threads are the run's, from its start (docs/determinism.md).
    rows.append(("threads (both languages)",
                 "intra-op: the run's threads (OMP_NUM_THREADS, MKL_NUM_THREADS, set_num_threads at worker start, before the "
                 "first backward: R torch's backward threads keep the count they first ran with), measured per cell "
                 "(installation.backward_threads); inter-op: libtorch's default, unused by a CPU backward", None))
    rows.append(("determinism (CUDA)",
                 "Python: torch.use_deterministic_algorithms(True, warn_only=True) in each CUDA cell, CUBLAS_WORKSPACE_CONFIG="
                 ":4096:8 in every worker (the conv net's bilinear backward is atomic adds without them); R torch has no "
                 "such switch", None))
    table = Table(title="amp-parity doctor", header_style="bold")
    table.add_column("component")
    table.add_column("found")
    table.add_column("fix")
    for name, found, fix in rows:
        table.add_row(name, Text(found) if found else Text("missing", style="red"), Text(fix or ""))  # paths: never markup
    console.print(table)
    python_libtorch = (a.torch_version or "").split("+")[0]
    if r.get("libtorch_version") and python_libtorch and r["libtorch_version"] != python_libtorch:
        console.print(
            f"[bold yellow]warning:[/] libtorch versions differ (Python torch {escape(python_libtorch)}, R torch "
            f"{escape(str(r['libtorch_version']))}): the frontends can agree within tolerance but not bitwise"
        )
    verdict = a.r_reason
    if verdict is None:
        console.print("[green]R cells will run.[/]")
    else:
        what = "fail (AMP_PARITY_REQUIRE_R=1)" if r_required() else "be skipped"
        console.print(f"[yellow]R cells will {what}:[/] {escape(verdict)}", soft_wrap=True)
    if a.python_reason:
        console.print(f"[red]Python cells cannot run:[/] {escape(a.python_reason)}")
        return ExitCode.FAILED
    return ExitCode.FAILED if (verdict and r_required()) else ExitCode.OK
