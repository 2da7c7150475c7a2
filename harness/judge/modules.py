"""The module sweep judged: each sample in each mode, each same-seed module, each entry's coverage.

Facts in (:class:`harness.run.modules.SweepFacts`'s plain data: what the Python worker prepared, R's answer, the
comparison of their files), verdicts out (:mod:`harness.model.modules`). A pair that is not bitwise identical is
``excused`` only where entries of ``module_differences.toml`` (beside this file) name the entry, the mode and every
tensor that differs, and point to the R torch bugs' reproducers in docs/bugs/; ``proven`` where an entry's switch
removes the mechanism in PyTorch and the pair is then bitwise identical; else it is ``diverged``, named by the
first tensor where it begins (the forward's outputs first, then the inputs' gradients, the parameters', the buffers).
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.replies import Reply
from harness.errors import KnownDifferencesError
from harness.model.modules import EntryCoverage, ModuleSweepResult, ModuleVerdict, SameSeedVerdict, SampleVerdict

__all__ = ["ModuleDifference", "judge_sweep", "load_module_differences", "switch_candidates"]

_TABLE = Path(__file__).with_name("module_differences.toml")
_REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ModuleDifference:
    """One known way R torch's module parts from PyTorch's: the entries and modes it covers (globs), the tensors that
    differ (globs over the compared names: ``out``, ``grad.<input or parameter>``, ``buffer.<name>``, ``init.<name>``,
    ``order.parameters``, ``order.state_dict``), the samples (globs over module_db's descriptions), and the bug
    (docs/bugs/<bug>/) that says why. The same-seed construction is the mode ``init``."""

    id: str
    bug: str | None
    entries: tuple[str, ...]
    tensors: tuple[str, ...]
    modes: tuple[str, ...] = ("*",)
    samples: tuple[str, ...] = ("*",)
    why: str = ""
    #: A known difference that is no bug: the switch (py_scripts/modules.py's ``SWITCHES``) that removes its mechanism in
    #: PyTorch; the pair is ``proven`` when PyTorch's run with it is bitwise R's.
    switch: str | None = None
    #: A bug R answers with an error (a ``[[refusal]]``): R's message (a glob). The pair stays ``unsupported``, in R's
    #: words, and its reason names the bug.
    message: str | None = None

    def covers(self, entry: str, mode: str, names: list[str], desc: str = "") -> bool:
        """Whether every name that differs in this entry, mode and sample (by its module_db description) is one of this
        difference's."""
        return (any(fnmatch.fnmatchcase(entry, e) for e in self.entries)
                and any(fnmatch.fnmatchcase(mode, m) for m in self.modes)
                and any(fnmatch.fnmatchcase(desc, d) for d in self.samples)
                and bool(names) and all(any(fnmatch.fnmatchcase(n, t) for t in self.tensors) for n in names))


def load_module_differences(path: Path = _TABLE) -> list[ModuleDifference]:
    """The table's entries; each must name a bug folder with its reproducers.

    Raises:
        KnownDifferencesError: an entry with a missing field, or whose bug has no reproducer.R and reproducer.py.
    """
    if not path.is_file():
        return []
    with path.open("rb") as f:
        table = tomllib.load(f)
    found = []
    for row in table.get("refusal", []):
        try:
            diff = ModuleDifference(id=row["id"], bug=row["bug"], entries=tuple(row["entries"]), tensors=(),
                                    message=row["message"], why=row.get("why", ""))
        except KeyError as err:
            raise KnownDifferencesError(f"{path.name}: a refusal lacks {err}: give it id, bug, entries and message") from None
        _check_reproducers(path, diff)
        found.append(diff)
    for row in table.get("difference", []):
        try:
            diff = ModuleDifference(id=row["id"], bug=row.get("bug"), entries=tuple(row["entries"]),
                                    tensors=tuple(row["tensors"]), modes=tuple(row.get("modes", ["*"])),
                                    samples=tuple(row.get("samples", ["*"])), why=row.get("why", ""),
                                    switch=row.get("switch"))
        except KeyError as err:
            raise KnownDifferencesError(f"{path.name}: a difference lacks {err}: give it id, entries, tensors and a bug "
                                        "or a switch") from None
        if (diff.bug is None) == (diff.switch is None):
            raise KnownDifferencesError(f"{path.name}: {diff.id} needs a bug (docs/bugs/<bug>/) or a switch that proves it, "
                                        "one of the two")
        if diff.bug is None:
            found.append(diff)
            continue
        _check_reproducers(path, diff)
        found.append(diff)
    return found


def _check_reproducers(path: Path, diff: ModuleDifference) -> None:
    folder = _REPO / "docs" / "bugs" / str(diff.bug)
    if not ((folder / "reproducer.R").is_file() and (folder / "reproducer.py").is_file()):
        raise KnownDifferencesError(f"{path.name}: {diff.id} names bug {diff.bug}, which has no reproducer.R and "
                                    f"reproducer.py under docs/bugs/{diff.bug}/: add them or drop the entry")


def _refused(differences: list[ModuleDifference], entry: str, message: str) -> str:
    """R's refusal as the verdict's reason, naming the bug a ``[[refusal]]`` entry says it is."""
    known = next((d for d in differences if d.message is not None and any(fnmatch.fnmatchcase(entry, e) for e in d.entries)
                  and fnmatch.fnmatchcase(message, d.message)), None)
    return f"R: {message}" + (f" (R torch bug {known.bug})" if known is not None else "")


def _order(name: str) -> tuple[int, str]:
    """Where a compared tensor comes in a forward and backward: outputs, then gradients, then buffers."""
    rank = 0 if name.startswith("out") else 1 if name.startswith("grad.in.") else 2 if name.startswith("grad.") else 3
    return rank, name


def _differing(compared: dict[str, Any]) -> list[str]:
    names = [n for n, fact in compared.get("tensors", {}).items() if not fact["identical"]]
    missing = compared.get("missing", {})
    names += [f"{n} (R lacks it)" for n in missing.get("r", [])] + [f"{n} (PyTorch lacks it)" for n in missing.get("python", [])]
    return sorted(names, key=_order)


def _describe(name: str, fact: dict[str, Any] | None) -> str:
    if fact is None:
        return name
    if fact["python_dtype"] != fact["r_dtype"]:
        return f"{name}: dtype {fact['python_dtype']} in PyTorch, {fact['r_dtype']} in R"
    if fact["python_shape"] != fact["r_shape"]:
        return f"{name}: shape {fact['python_shape']} in PyTorch, {fact['r_shape']} in R"
    return f"{name}: differs by up to {fact.get('max_abs', float('nan')):.3g}"


def judge_sweep(facts: Any, differences: list[ModuleDifference] | None = None) -> ModuleSweepResult:
    """Every verdict of a sweep (:class:`harness.run.modules.SweepFacts`)."""
    differences = load_module_differences() if differences is None else differences
    samples: list[SampleVerdict] = []
    inits: list[SameSeedVerdict] = []
    coverage = []
    modes = [m.name for m in facts.modes]
    for entry_info in facts.entries:
        entry = entry_info["name"]
        row = facts.rows.get(entry_info["class"])
        prepared = facts.prepared[entry]["samples"]
        r_by_index = {a["index"]: a for a in facts.r.get(entry, [])}
        compared = {c["index"]: c for c in facts.compared.get(entry, {}).get("samples", [])}
        switched = {name: {c["index"]: c for c in answer.get("samples", [])}
                    for name, answer in getattr(facts, "switched", {}).get(entry, {}).items()}
        mine: list[SampleVerdict] = []
        my_inits: list[SameSeedVerdict] = []
        for sample in prepared:
            index, desc = sample["index"], sample.get("desc", "")
            if "python_error" in sample:
                mine += [SampleVerdict(entry, index, desc, m, ModuleVerdict.NOT_RUN, f"PyTorch: {sample['python_error']}") for m in modes]
                continue
            answer = r_by_index.get(index, {})
            if answer.get("unsupported"):
                why = _refused(differences, entry, answer["unsupported"])
                mine += [SampleVerdict(entry, index, desc, m, ModuleVerdict.UNSUPPORTED, why) for m in modes]
                continue
            facts_of = compared.get(index, {"modes": {}, "init": {}})
            for mode in modes:
                py_mode = sample["modes"].get(mode, {})
                r_mode = answer.get("modes", {}).get(mode, {})
                if py_mode.get("status") != Reply.OK:
                    mine.append(SampleVerdict(entry, index, desc, mode, ModuleVerdict.NOT_RUN, f"PyTorch: {py_mode.get('message', '')}"))
                elif r_mode.get("status") != Reply.OK:
                    why = _refused(differences, entry, r_mode.get("message", ""))
                    mine.append(SampleVerdict(entry, index, desc, mode, ModuleVerdict.UNSUPPORTED, why))
                else:
                    mine.append(_pair(entry, index, desc, mode, facts_of["modes"].get(mode, {}), differences, switched))
            my_inits.append(_init(entry, index, sample, answer, facts_of.get("init", {}), differences))
        samples += mine
        inits += my_inits
        counts = Counter(v.verdict for v in mine)
        reasons = [v for v in mine if v.verdict != ModuleVerdict.IDENTICAL]
        reason = next((f"{v.verdict}: {v.why}" for v in reasons if v.verdict in (ModuleVerdict.DIVERGED, ModuleVerdict.UNSUPPORTED)), "")
        reason = reason or next((f"{v.verdict}: {v.why}" for v in reasons), "")
        coverage.append(EntryCoverage(entry=entry, r=row.r if row is not None else "", samples=len(prepared),
                                      counts=dict(counts), init=dict(Counter(i.verdict for i in my_inits)),
                                      reason=reason))
    return ModuleSweepResult(modes=modes, samples=samples, inits=inits, coverage=coverage)


def switch_candidates(facts: Any, differences: list[ModuleDifference] | None = None) -> dict[tuple[str, str], dict[int, list[str]]]:
    """The pairs a switch may prove: per (entry, switch), the samples and modes that diverge where a switch entry of
    ``differences`` names them. The sweep runs PyTorch's side of these again with the switch on
    (:func:`harness.run.modules.run_sweep`), and :func:`judge_sweep` reads the comparison."""
    differences = load_module_differences() if differences is None else differences
    switches = [d for d in differences if d.switch is not None]
    wanted: dict[tuple[str, str], dict[int, list[str]]] = {}
    if not switches:
        return wanted
    for verdict in judge_sweep(facts, differences).samples:
        if verdict.verdict != ModuleVerdict.DIVERGED:
            continue
        compared = {c["index"]: c for c in facts.compared.get(verdict.entry, {}).get("samples", [])}
        differing = _differing(compared.get(verdict.index, {}).get("modes", {}).get(verdict.mode, {}))
        for d in switches:
            if d.covers(verdict.entry, verdict.mode, differing, verdict.desc):
                wanted.setdefault((verdict.entry, str(d.switch)), {}).setdefault(verdict.index, []).append(verdict.mode)
                break
    return wanted


def _pair(entry: str, index: int, desc: str, mode: str, compared: dict[str, Any],
          differences: list[ModuleDifference], switched: dict[str, Any] | None = None) -> SampleVerdict:
    tensors = compared.get("tensors", {})
    py_f64 = [f["python_f64"] for f in tensors.values() if "python_f64" in f]
    r_f64 = [f["r_f64"] for f in tensors.values() if "r_f64" in f]
    distances: dict[str, Any] = {"python_f64": max(py_f64) if py_f64 else None, "r_f64": max(r_f64) if r_f64 else None}
    differing = _differing(compared)
    if not differing:
        return SampleVerdict(entry, index, desc, mode, ModuleVerdict.IDENTICAL, **distances)
    bugs = _excusing(differences, entry, mode, differing, desc)
    if bugs:
        return SampleVerdict(entry, index, desc, mode, ModuleVerdict.EXCUSED, bugs, **distances)
    for d in differences:
        if d.switch is None or not d.covers(entry, mode, differing, desc):
            continue
        run = (switched or {}).get(d.switch, {}).get(index, {}).get("modes", {}).get(mode)
        if run is None:
            continue
        left = _differing(run)  # what still differs with the switch on: nothing, or only what bugs excuse
        bugs = _excusing(differences, entry, mode, left, desc) if left else ""
        if not left or bugs:
            also = f"; the rest: {bugs}" if bugs else ""
            return SampleVerdict(entry, index, desc, mode, ModuleVerdict.PROVEN,
                                 f"known difference {d.id}: bitwise identical with switch {d.switch}{also}", **distances)
    first = differing[0]
    return SampleVerdict(entry, index, desc, mode, ModuleVerdict.DIVERGED, _describe(first, tensors.get(first)), **distances)


def _excusing(differences: list[ModuleDifference], entry: str, mode: str, differing: list[str], desc: str) -> str:
    """The bugs that excuse every differing name (each name by one entry of this entry, mode and sample), as the
    verdict's reason; ``""`` when a name is left that no entry names."""
    found: list[ModuleDifference] = []
    for name in differing:
        known = next((d for d in differences if d.bug is not None and d.covers(entry, mode, [name], desc)), None)
        if known is None:
            return ""
        if known not in found:
            found.append(known)
    return "R torch bug " + ", ".join(f"{d.bug} ({d.id})" for d in found)


def _init(entry: str, index: int, sample: dict[str, Any], answer: dict[str, Any], compared: dict[str, Any],
          differences: list[ModuleDifference]) -> SameSeedVerdict:
    differing = [f"init.{n}" for n in _differing(compared)]
    if _as_list(answer.get("parameters")) != sample["parameters"]:
        differing.append("order.parameters")
    if _as_list(answer.get("state_dict")) != [n for n in sample["state_dict"]]:
        differing.append("order.state_dict")
    if not differing:
        return SameSeedVerdict(entry, index, ModuleVerdict.IDENTICAL)
    bugs = _excusing(differences, entry, "init", differing, sample.get("desc", ""))
    if bugs:
        return SameSeedVerdict(entry, index, ModuleVerdict.EXCUSED, bugs)
    first = differing[0]
    name = first.removeprefix("init.")
    if first in ("order.parameters", "order.state_dict"):
        key = first.removeprefix("order.")
        why = f"{key.replace('_', ' ')} order: " + _first_apart(sample[key], _as_list(answer.get(key)))
    else:
        why = "initial " + _describe(name, compared.get("tensors", {}).get(name))
    return SameSeedVerdict(entry, index, ModuleVerdict.DIVERGED, why)


def _first_apart(python: list[str], r: list[str]) -> str:
    """Where two name lists first part, in a line: the position and each side's name there."""
    at = next((i for i, (a, b) in enumerate(zip(python, r, strict=False)) if a != b), min(len(python), len(r)))
    def name(names: list[str]) -> str:
        return names[at] if at < len(names) else "(none)"
    return f"#{at + 1} of {len(python)} is {name(python)} in PyTorch, {name(r)} in R"


def _as_list(value: Any) -> list[str]:
    """R's JSON writes a one-element vector as a scalar."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)
