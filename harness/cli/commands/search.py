"""``search``: a property-based search across the two bindings (harness/search/): examples drawn from the contract's
spaces, each judged as the matrix judges a pair, each finding shrunk to a minimal spec and written with reproducers."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli.options import add_known_differences_argument, known_differences_of
from harness.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from harness.search.engine import Finding, SearchReport
    from harness.search.example import Example
    from harness.search.verdict import Judged

__all__ = ["MODELS", "add_parser", "command"]

#: The models the search draws from: the workload's MLP only, until the model is a row of its own (issue 45).
MODELS: tuple[str, ...] = ("mlp",)
#: A finding's folder in --out is ``NN-<signature>``; with --overwrite, these and SUMMARY are what a search replaces.
SUMMARY = "summary.txt"
#: Seconds a cell may take before it counts as hung: an example's cells take well under one.
_CELL_TIMEOUT_S = 120.0
#: On a log (not a terminal), one progress line per this many examples.
_LOG_EVERY = 25


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], switches: argparse.ArgumentParser) -> None:
    """The ``search`` command's flags (``switches``: ``--debug`` and ``-v``, accepted after the command too)."""
    from harness.workload.flags import path_argument, whole_number

    search = commands.add_parser(
        "search", parents=[switches],
        help="search the rows' hyperparameter spaces, modes and sizes for differences no listed cell reaches; shrink each",
    )
    search.add_argument("--budget", default="200", metavar="N|Ns",
                        help="how long to search: a number of examples (200, the default) or of seconds (90s)")
    search.add_argument("--seed", type=whole_number, default=0, help="the same seed draws the same examples (default 0)")
    search.add_argument("--optimizer", action="append", default=None, metavar="NAME",
                        help="search only these optimizer rows (repeatable or comma-separated; default all)")
    search.add_argument("--feature", action="append", default=None, metavar="NAME",
                        help="search only these loop features (none: the plain loop; default all and the plain loop)")
    search.add_argument("--mode", action="append", default=None, metavar="NAME",
                        help="search only these modes (in every script that declares them; default all)")
    search.add_argument("--model", default=MODELS[0], metavar="NAME", help=f"the model ({', '.join(MODELS)}; the only one today)")
    search.add_argument("--out", type=path_argument, default=Path("search-findings"), metavar="DIR",
                        help="where each finding's folder goes (default ./search-findings; refused if it holds anything "
                             "without --overwrite)")
    search.add_argument("--overwrite", action="store_true", help="replace what an earlier search wrote in --out")
    search.add_argument("--database", type=path_argument, default=None, metavar="DIR",
                        help="Hypothesis's example database, whose findings are replayed first (default: the user cache's "
                             "search-db/, $AMP_PARITY_CACHE)")
    search.add_argument("--stop-at-first", action="store_true",
                        help="end the search once its first finding is shrunk (a maintainer chasing one change; CI's plants)")
    add_known_differences_argument(search)


def command(args: argparse.Namespace) -> ExitCode:
    """``harness search``: check every option and --out before the first example, search, write each finding's folder."""
    from harness.cli.output import temporary_staging
    from harness.contract.modes import SCRIPTS
    from harness.run.runner import MatrixRunner
    from harness.search.engine import Budget, Search, default_database
    from harness.search.example import Example
    from harness.search.strategies import examples
    from harness.workload.features import FEATURES, NO_FEATURE, parse_features
    from harness.workload.optimizers import parse_optimizers
    from harness.workload.spec import parse_modes

    if args.model not in MODELS:
        raise UsageError("--model", args.model, f"one of {', '.join(MODELS)} (the only model until the model is a row)")
    budget = Budget.parse(args.budget)
    if args.seed < 0:
        raise UsageError("--seed", args.seed, "a whole number >= 0")
    optimizers = parse_optimizers(args.optimizer or ["all"], "tiny")
    features = parse_features(args.feature or ["all"], "tiny")
    modes = parse_modes(args.mode)
    pairs = [(pair.stem, mode.name) for pair in SCRIPTS.values() for mode in pair.modes if mode.name in modes]
    try:
        strategy = examples(pairs, optimizers, features)
    except ValueError as err:
        raise UsageError("--feature", ",".join(features),
                         f"a feature the search can draw with these modes and optimizers ({err})") from None
    known = known_differences_of(args)
    out = _claim_out(Path(args.out), args.overwrite)
    database = args.database or default_database()
    first = Example(*pairs[0], optimizers[0])
    with temporary_staging() as staging, MatrixRunner(
        first.spec(), ("python", "r"), timeout=_CELL_TIMEOUT_S, staging=staging.path, known=known,
        fixture_cache=staging.path / "fixtures",
    ) as runner:
        runner.describe_installations()
        missing = [f"{name}: {why}" for name in runner.frontends if (why := runner.pool.unavailable_reason(name)) is not None]
        if missing:
            raise UsageError("search", "python,r", f"both languages installed here, to compare them ({'; '.join(missing)})")
        progress = _Progress(budget.describe())
        seen = _Seen(out)
        search = Search(runner, strategy, budget, args.seed, database,
                        on_example=progress.example, on_seen=seen.add, stop_at_first=args.stop_at_first)
        print(f"amp-parity search: {budget.describe()}, seed {args.seed}, {len(optimizers)} optimizer(s), {len(features)} "
              f"loop feature(s) (none: the plain loop), {len(pairs)} mode(s); findings into {out}, database {database}",
              file=sys.stderr)
        report = search.run()
        progress.done()
        fixed = [f for f in features if f != NO_FEATURE and not FEATURES[f].space]
        lines = _write_findings(report, seen)
    lines += _summary(report, args.seed, fixed)
    _write_summary(out, lines)
    print("\n".join(lines))
    if report.interrupted:  # the line main prints names what was written; the exit status is the interruption's
        from harness.cli.output import WRITTEN

        WRITTEN.append(f"{SUMMARY} and {sum(1 for line in lines if line.startswith('finding '))} finding folder(s) in {out}")
        raise KeyboardInterrupt
    return ExitCode.FAILED if report.findings else ExitCode.OK


def _claim_out(out: Path, overwrite: bool) -> Path:
    """``out``, checked before the first example: a folder that is absent or empty, or (``--overwrite``) one whose
    search output goes (its finding folders and summary; anything else in it stays).

    Raises:
        UsageError: a file, a folder holding something without --overwrite, or one that cannot be written.
    """
    if out.exists() and not out.is_dir():
        raise UsageError("--out", str(out), "a folder (this is a file): name another")
    ours = [p for p in out.iterdir() if _ours(p)] if out.is_dir() else []
    others = [p for p in out.iterdir() if not _ours(p)] if out.is_dir() else []
    if (ours or others) and not overwrite:
        raise UsageError("--out", str(out), "an empty or absent folder (it holds files; --overwrite replaces an earlier search's)")
    if others and overwrite and not ours:
        raise UsageError("--out", str(out), "a folder of an earlier search for --overwrite (it holds other files: name another)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".amp-parity-search-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise UsageError("--out", str(out), f"a folder this user can write ({err.strerror})") from err
    for path in ours:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return out


def _ours(path: Path) -> bool:
    """A search's output: its summary, or a finding's folder (``NN-...`` holding example.json)."""
    return path.name == SUMMARY or (path.is_dir() and path.name[:2].isdigit() and (path / "example.json").exists())


class _Progress:
    """The count as examples run: one line rewritten on a terminal, a line every few examples in a log."""

    def __init__(self, budget: str) -> None:
        self.budget, self.tty, self.started = budget, sys.stderr.isatty(), time.perf_counter()
        self.findings = 0

    def example(self, report: SearchReport, example: Example, judged: Judged) -> None:
        line = (f"search: {report.searched} examples of {self.budget}, {report.shrinking} shrinking, "
                f"{len(report.findings)} finding(s) shrunk, {time.perf_counter() - self.started:.0f} s")
        if self.tty:
            print(f"\r{line[:150]:<150}", end="", file=sys.stderr, flush=True)
        elif report.examples % _LOG_EVERY == 0:
            print(line, file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.tty:
            print(file=sys.stderr)


class _Seen:
    """The findings as they are seen: each gets its folder's number when first seen, and its ``example.json`` is written
    then and again each time it shrinks, so a search that is stopped in any way (Ctrl-C, a kill, a crash) keeps every
    finding it saw, as far as it shrank."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.latest: dict[str, tuple[Example, Judged]] = {}
        self.numbers: dict[str, int] = {}

    def add(self, example: Example, judged: Judged) -> None:
        from harness.search.engine import Finding
        from harness.search.findings import write_example

        self.numbers.setdefault(judged.signature, len(self.numbers) + 1)
        self.latest[judged.signature] = (example, judged)
        write_example(self.folder(judged.signature), Finding(example, judged))

    def folder(self, signature: str) -> Path:
        from harness.search.findings import finding_folder

        return finding_folder(self.out, self.numbers.setdefault(signature, len(self.numbers) + 1), signature)


def _write_findings(report: SearchReport, seen: _Seen) -> list[str]:
    """Each finding's folder (an interrupted search: the pending ones' examples as far as they shrank, no reproducers)."""
    from harness.search.engine import Finding
    from harness.search.findings import write_example, write_finding

    lines = []
    done = {f.judged.signature for f in report.findings}
    for finding in report.findings:
        folder = seen.folder(finding.judged.signature)
        shows = write_finding(folder, finding) if not report.interrupted else "not run (the search was interrupted)"
        if report.interrupted:
            write_example(folder, finding)
        lines.append(_finding_line(folder, finding, shows))
    for signature, (example, judged) in seen.latest.items():
        if signature not in done:
            folder = seen.folder(signature)
            write_example(folder, Finding(example, judged))
            lines.append(_finding_line(folder, Finding(example, judged), "not shrunk to its end (the search stopped first)"))
    return lines


def _finding_line(folder: Path, finding: Finding, shows: str) -> str:
    judged = finding.judged
    return (f"finding {folder}: {judged.signature}\n  {finding.example.describe()}\n  first differing tensor: "
            f"{judged.first_difference or 'none named'}\n  {judged.summary[:400]}\n  reproducers: {shows}")


def _summary(report: SearchReport, seed: int, fixed: list[str]) -> list[str]:
    """What the search did and covered (the last lines printed, and summary.txt)."""
    from harness.workload.features import UNRUNNABLE_IN_R

    def counted(counter: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))

    head = (f"search: {report.examples} examples ({report.searched} searched, {report.shrinking} shrinking; "
            f"{report.repeated} met again, not run again) in "
            f"{report.seconds:.1f} s, {report.per_second:.2f} examples/s, seed {seed}"
            + (", interrupted" if report.interrupted else ""))
    verdict = (f"found {len(report.findings)} difference(s) (above)" if report.findings
               else "found nothing within the budget; it covered:")
    lines = [head, verdict, f"  outcomes: {counted(report.outcomes)}", f"  per optimizer: {counted(report.optimizers)}",
             f"  per feature: {counted(report.features)}", f"  per mode: {counted(report.modes)}",
             f"  hyperparameters moved from the rows' points: {counted(report.moved) or 'none'}"]
    if fixed:
        lines.append(f"  searched at their fixed points (no space declared): {', '.join(fixed)}")
    lines.append("  not drawn: a clip feature in a mode that clips already; "
                 + "; ".join(f"{', '.join(u.optimizers)} with {', '.join(u.features)} (R torch bug {u.bug}, no switch)"
                             for u in UNRUNNABLE_IN_R))
    for why, example in list(report.unjudged.items())[:5]:
        lines.append(f"  not judged (the harness's own float64 reference could not run it): {why}; e.g. {example.describe()}")
    return lines


def _write_summary(out: Path, lines: list[str]) -> None:
    from harness.files.atomic import atomic_path

    with atomic_path(out / SUMMARY) as temporary:
        temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
