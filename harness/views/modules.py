"""The module sweep as people read it: the coverage table (a CSV under docs/, so a change in coverage shows in a diff),
a Markdown report of every sample that is not identical, and the terminal's summary lines.

Reads a judged :class:`harness.model.modules.ModuleSweepResult`; judges nothing.
"""

from __future__ import annotations

import csv
import io
from collections import Counter

from harness.model.modules import COVERAGE_COLUMNS, VERDICTS, ModuleSweepResult

__all__ = ["coverage_csv", "summary_lines", "sweep_markdown"]


def coverage_csv(result: ModuleSweepResult) -> str:
    """One line per ``module_db`` entry (:data:`harness.model.modules.COVERAGE_COLUMNS`), in the database's order."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COVERAGE_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for entry in result.coverage:
        writer.writerow(entry.row())
    return out.getvalue()


def summary_lines(result: ModuleSweepResult) -> list[str]:
    """What the terminal prints: the counts, the entries compared, and each diverged pair's first difference."""
    counts = Counter(s.verdict for s in result.samples)
    inits = Counter(i.verdict for i in result.inits)
    mapped = [c for c in result.coverage if c.r]
    compared = [c for c in mapped if c.counts.get("identical", 0) + c.counts.get("excused", 0) + c.counts.get("proven", 0)
                + c.counts.get("diverged", 0) > 0]
    lines = [
        f"module sweep: {len(result.coverage)} module_db entries, {len(mapped)} with an R torch counterpart, "
        f"{len(compared)} of them compared; {len({(s.entry, s.index) for s in result.samples})} samples × "
        f"{len(result.modes)} modes ({', '.join(result.modes)}):",
        "  " + ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)
        + f" (of the unsupported, {sum(1 for s in result.samples if s.verdict == 'unsupported' and '(R torch bug' in s.why)}"
        " are R torch bugs that stop R: docs/bugs/)",
        f"  same seed, same module: {inits.get('identical', 0)} identical, {inits.get('excused', 0)} excused, "
        f"{inits.get('diverged', 0)} diverged",
    ]
    apart = [s for s in result.samples if s.verdict in ("proven", "excused", "diverged")]
    farther = [s for s in apart if s.r_farther]
    lines.append(f"  on its own, against float64: of the {len(apart)} compared pairs that are not identical, R is the "
                 f"farther from float64 (more than twice PyTorch's distance) in {len(farther)}")
    for s in result.samples:
        if s.verdict == "diverged":
            lines.append(f"  diverged: {s.entry}[{s.index}{' ' + s.desc if s.desc else ''}] {s.mode}: {s.why}")
    for i in result.inits:
        if i.verdict == "diverged":
            lines.append(f"  diverged at construction: {i.entry}[{i.index}]: {i.why}")
    return lines


def sweep_markdown(result: ModuleSweepResult) -> str:
    """The report: the coverage table, then every pair that is not identical with its reason."""
    out = ["# Module sweep: PyTorch's module_db against R torch", "", *summary_lines(result), "",
           "## Coverage", "", "| " + " | ".join(COVERAGE_COLUMNS) + " |", "|" + "---|" * len(COVERAGE_COLUMNS)]
    for entry in result.coverage:
        out.append("| " + " | ".join(str(v).replace("|", "\\|") for v in entry.row().values()) + " |")
    out += ["", "## Pairs that are not identical", "",
            "Each side's largest distance from the sample's float64 run, relative to the float64 tensor's largest magnitude.",
            "", "| entry | sample | mode | verdict | why | PyTorch vs float64 | R vs float64 |", "|---|---|---|---|---|---|---|"]
    for s in result.samples:
        if s.verdict != "identical":
            sample = f"{s.index} {s.desc}".strip()
            out.append(f"| {s.entry} | {sample} | {s.mode} | {s.verdict} | {s.why.replace('|', '/')} | "
                       f"{_distance(s.python_f64)} | {_distance(s.r_f64)} |")
    out += ["", "## Same seed, same module (not identical)", "", "| entry | sample | verdict | why |", "|---|---|---|---|"]
    for i in result.inits:
        if i.verdict != "identical":
            out.append(f"| {i.entry} | {i.index} | {i.verdict} | {i.why.replace('|', '/')} |")
    return "\n".join(out) + "\n"


def _distance(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"
