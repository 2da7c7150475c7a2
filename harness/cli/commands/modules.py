"""``modules``: PyTorch's own module test database (``module_db``) against R torch's ``nn_*`` modules, sample by sample."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import ExitCode

__all__ = ["add_parser", "command"]

#: Where the committed coverage table lives (``--coverage`` writes it there; docs/modules/README.md says how to read it).
COVERAGE_PATH = Path("docs/modules/coverage.csv")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], switches: argparse.ArgumentParser) -> None:
    """The ``modules`` command's flags."""
    sweep = commands.add_parser(
        "modules", parents=[switches],
        help="run PyTorch's module_db samples through both languages: every module R torch has, compared bitwise",
    )
    sweep.add_argument("--entry", help="module_db entries, comma-separated (default: all 114), e.g. nn.Linear,nn.LSTM")
    sweep.add_argument("--mode", help="modes, comma-separated (default: all: float32, autocast_bfloat16, autocast_float16, "
                                      "lowp_bfloat16)")
    sweep.add_argument("--limit", type=int, help="at most this many samples per entry (default: all)")
    sweep.add_argument("--out", type=Path, help="folder for report.md, coverage.csv and result.json (created; an existing "
                                                "report there needs --overwrite)")
    sweep.add_argument("--coverage", action="store_true",
                       help=f"write the coverage table to {COVERAGE_PATH} too (the committed one)")
    sweep.add_argument("--overwrite", action="store_true", help="replace what --out holds")


def command(args: argparse.Namespace) -> ExitCode:
    """``harness modules``: the sweep, judged; the summary printed; ``FAILED`` when a pair diverged."""
    from harness.errors import UsageError
    from harness.files.atomic import write_json_atomic
    from harness.files.paths import REPO_ROOT
    from harness.judge.modules import judge_sweep
    from harness.run.modules import run_sweep
    from harness.views.modules import coverage_csv, summary_lines, sweep_markdown
    from harness.workload.modules import MODULE_MODES

    modes = list(MODULE_MODES)
    if args.mode:
        names = {m.name: m for m in MODULE_MODES}
        chosen = args.mode.split(",")
        if any(c not in names for c in chosen):
            raise UsageError("--mode", args.mode, f"modes among {', '.join(names)}")
        modes = [names[c] for c in chosen]
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit", args.limit, "a whole number of samples, 1 or more")
    if args.out is not None and (args.out / "report.md").exists() and not args.overwrite:
        raise UsageError("--out", str(args.out), "a folder without a sweep report in it (or pass --overwrite)")
    entries = args.entry.split(",") if args.entry else None
    facts = run_sweep(entries=entries, modes=modes, limit=args.limit, progress=None)
    result = judge_sweep(facts)
    for line in summary_lines(result):
        print(line)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        _write(args.out / "report.md", sweep_markdown(result))
        _write(args.out / "coverage.csv", coverage_csv(result))
        write_json_atomic(args.out / "result.json", result.to_json())
        print(f"wrote {args.out / 'report.md'}, coverage.csv and result.json")
    if args.coverage:
        _write(REPO_ROOT / COVERAGE_PATH, coverage_csv(result))
        print(f"wrote {COVERAGE_PATH}")
    return ExitCode.FAILED if result.failed else ExitCode.OK


def _write(path: Path, text: str) -> None:
    from harness.files.atomic import atomic_path

    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
