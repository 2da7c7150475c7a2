"""The module sweep's run: PyTorch's ``module_db`` samples through both languages' workers, entry by entry.

Three calls per entry, each batching all its samples and modes: the Python worker draws, writes and runs the samples
(``module_prepare``), the R worker runs them from the same files with the arguments the mapping table makes of PyTorch's
(``module_run``), and the Python worker compares the two languages' files (``module_compare``). The Python worker
prepares the next entry while R runs the last (a thread each), so the sweep takes about as long as its slower side.
The parent never imports torch: only plain data and file paths cross (harness/run/worker.py).
"""

from __future__ import annotations

import queue
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract.replies import Reply
from harness.errors import UsageError, WorkerError
from harness.files.paths import scripts_root
from harness.judge.modules import switch_candidates
from harness.run.frontends import FRONTENDS, open_worker
from harness.run.kept_workers import KeptWorkers
from harness.run.pool import worker_env
from harness.run.worker import Worker
from harness.workload.modules import MODULE_MODES, MODULE_ROWS, ModuleMode, ModuleRow, conventional_r_name, r_sample

__all__ = ["SWEEP_SEED", "SWEEP_THREADS", "SweepFacts", "run_sweep"]

#: The seed both languages set before building a module and before its forward (libtorch's CPU generator is shared by
#: torch.manual_seed and torch_manual_seed, so the same draws come out where the same kernels are called in order).
SWEEP_SEED = 46
#: Each worker's threads: one, so a reduction's order cannot depend on a thread pool's split (and the two workers run
#: side by side on a 2-core machine).
SWEEP_THREADS = 1
#: Seconds one entry's call may take (the largest entries, LinearCrossEntropyLoss's 857 samples, take tens of seconds).
_CALL_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class SweepFacts:
    """What the sweep measured, per entry, as plain data for the judge (:mod:`harness.judge.modules`): the Python
    worker's description of each sample (``prepared``), R's answer (``r``), and the comparison (``compared``), by entry.
    """

    entries: list[dict[str, Any]]
    prepared: dict[str, dict[str, Any]]
    r: dict[str, list[dict[str, Any]]]
    compared: dict[str, dict[str, Any]]
    rows: dict[str, ModuleRow]
    modes: tuple[ModuleMode, ...]
    #: The known differences' proofs: per entry and switch, the comparison of R's runs with PyTorch's made with the
    #: switch on (only the pairs a switch entry names).
    switched: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


def run_sweep(folder: Path | None = None, entries: Sequence[str] | None = None, modes: Sequence[ModuleMode] = MODULE_MODES,
              limit: int | None = None, rows: dict[str, ModuleRow] | None = None,
              progress: Callable[[str], None] | None = None, kept: KeptWorkers | None = None) -> SweepFacts:
    """Run the sweep over ``entries`` (``module_db`` names; default all), in ``modes``, at most ``limit`` samples each.

    ``folder``: where the sample files go (default: a temporary folder, removed at the end). ``rows``: the mapping
    (default the table's; a test plants a changed row here). ``kept``: workers kept across sweeps, borrowed instead of
    started (:mod:`harness.run.kept_workers`: the test suite's, whose Python worker imports ``module_db`` once).

    Raises:
        UsageError: an entry ``module_db`` does not have.
        WorkerError: a worker that cannot start, or a call that failed outside any sample.
    """
    rows = MODULE_ROWS if rows is None else rows
    if folder is None:
        with tempfile.TemporaryDirectory(prefix="amp-parity-modules-") as tmp:
            return run_sweep(Path(tmp), entries, modes, limit, rows, progress, kept)
    env = {**worker_env(SWEEP_THREADS)}
    python, r = (open_worker(name, env) if kept is None else kept.take(FRONTENDS[name], env, None, scripts_root())
                 for name in ("python", "r"))
    try:
        starter = threading.Thread(target=_start_quietly, args=(r,), daemon=True)
        starter.start()
        known = python.call({"kind": "module_entries"}, _CALL_TIMEOUT_S)
        names = [e["name"] for e in known]
        chosen = names if entries is None else list(entries)
        unknown = [e for e in chosen if e not in names]
        if unknown:
            raise UsageError("--entry", ",".join(unknown), f"module_db entries ({', '.join(names)})")
        classes = {e["name"]: e["class"] for e in known}
        starter.join()
        return _sweep(python, r, folder, chosen, classes, tuple(modes), limit, rows, progress)
    finally:
        for worker in (python, r):
            if kept is None:
                worker.close()
            else:
                kept.give_back(worker)


def _start_quietly(worker: Worker) -> None:
    try:
        worker.start()
    except WorkerError:
        pass  # its first call raises it again, with the reason


def _sweep(python: Worker, r: Worker, folder: Path, chosen: list[str], classes: dict[str, str],
           modes: tuple[ModuleMode, ...], limit: int | None, rows: dict[str, ModuleRow],
           progress: Callable[[str], None] | None) -> SweepFacts:
    mode_json = [m.to_json() for m in modes]
    prepared: dict[str, dict[str, Any]] = {}
    r_answers: dict[str, list[dict[str, Any]]] = {}
    errors: list[BaseException] = []
    todo: queue.Queue[str | None] = queue.Queue()

    def r_side() -> None:
        while (entry := todo.get()) is not None:
            try:
                r_answers[entry] = _run_r(r, entry, classes[entry], prepared[entry], rows, mode_json, folder)
            except BaseException as err:  # handed to the main thread, which raises it
                errors.append(err)
                return

    thread = threading.Thread(target=r_side, daemon=True)
    thread.start()
    try:
        for entry in chosen:
            prepared[entry] = python.call({"kind": "module_prepare", "entry": entry, "folder": str(folder / entry),
                                           "seed": SWEEP_SEED, "modes": mode_json, "limit": limit,
                                           "run": classes[entry] in rows}, _CALL_TIMEOUT_S)
            if progress is not None:
                progress(entry)
            todo.put(entry)
            if errors:
                break
    finally:
        todo.put(None)
        thread.join()
    if errors:
        raise errors[0]
    compared = {}
    for entry in chosen:
        ran = [{"index": a["index"], "modes": [m for m, v in a.get("modes", {}).items() if v.get("status") == Reply.OK]}
               for a in r_answers[entry]]
        compared[entry] = python.call({"kind": "module_compare", "folder": str(folder / entry), "samples": ran},
                                      _CALL_TIMEOUT_S)
    facts = SweepFacts(entries=[{"name": e, "class": classes[e]} for e in chosen], prepared=prepared, r=r_answers,
                       compared=compared, rows=rows, modes=modes)
    # The known differences' proofs: each pair a switch entry names, PyTorch's side again with the switch on.
    by_name = {m.name: m.to_json() for m in modes}
    for (entry, switch), samples in switch_candidates(facts).items():
        wanted = sorted({m for ms in samples.values() for m in ms}, key=list(by_name).index)
        python.call({"kind": "module_prepare", "entry": entry, "folder": str(folder / entry), "seed": SWEEP_SEED,
                     "modes": [by_name[m] for m in wanted], "limit": limit, "switch": switch, "only": sorted(samples)},
                    _CALL_TIMEOUT_S)
        answer = python.call({"kind": "module_compare", "folder": str(folder / entry), "switch": switch,
                              "samples": [{"index": i, "modes": ms} for i, ms in sorted(samples.items())]}, _CALL_TIMEOUT_S)
        facts.switched.setdefault(entry, {})[switch] = answer
    return facts


def _run_r(r: Worker, entry: str, cls: str, prepared: dict[str, Any], rows: dict[str, ModuleRow],
           modes: list[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """R's answer for one entry: each sample Python could run, built from the mapping's R call (or, for a class the
    table does not map, from the name R torch would give it, so R says in its words that it lacks it)."""
    row = rows.get(cls)
    samples = []
    for sample in prepared["samples"]:
        if "python_error" in sample:
            continue
        if row is None:
            call = {"constructor": conventional_r_name(cls), "args": {}, "forward": {"args": [], "kwargs": {}},
                    "names": {}}
        else:
            call = r_sample(row, sample, rows)
        samples.append({"index": sample["index"], **call, "parameters": sample["parameters"],
                        "buffers": sample["buffers"]})
        if row is None:
            break  # R's answer is the same for every sample of a class it lacks: asked once
    if not samples:
        return []
    answers: list[dict[str, Any]] = r.call({"kind": "module_run", "folder": str(folder / entry), "seed": SWEEP_SEED,
                                            "modes": modes, "samples": samples}, _CALL_TIMEOUT_S)
    if row is None and answers:
        first = answers[0]
        answers = [{**first, "index": s["index"]} for s in prepared["samples"] if "python_error" not in s]
    return answers
