"""Measure each cell's distance from the float64 reference, per optimizer, mode and AMP dtype: the numbers behind the
float64 bounds of ``harness/judge/tolerances.py`` (``_FLOAT64_BOUND_IN_EPS``, its tables).

A PyTorch run of the same loop the scripts run (``py_scripts/with_autocast.py``, ``py_scripts/cuda_amp_grad_scaler.py``,
and the modes of ``harness.contract.modes.SCRIPTS``: autocast, weights in the AMP dtype, a static or dynamic loss
scale, clipping), from the harness's fixtures, with every optimizer of ``OPTIMIZERS``; its distance from
``run_reference`` (replayed over the steps its scaler skipped) as ``measure_distance`` measures a cell's. Planted
mistakes run the same way: ``lr x1.01`` (every optimizer), Adam without its bias corrections, and the clip mode
without ``unscale_``.

Run from the checkout (one thread, CPU; tiny's 20 steps and its 25-epoch 250 steps, seeds 0-2 take ~30 min here)::

    PYTHONPATH=$PWD python3 -m tests.float64_distance --out /tmp/f64.jsonl
    PYTHONPATH=$PWD python3 -m tests.float64_distance --summary /tmp/f64.jsonl

Not a test (pytest does not collect it): a measurement to rerun when the workload, an optimizer or a mode changes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.contract.modes import SCRIPTS, Mode, mode_of
from harness.judge.reference import Reference, measure_distance, run_reference
from harness.judge.tolerances import float64_bound_for, update_kind
from harness.workload.fixtures import ensure_fixtures, load_fixture_arrays
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import WorkloadSpec

#: The AGM guide's ``-s`` as the lead's spec will default it: a power of two, so in exact arithmetic (and in any
#: binary dtype, short of overflow or underflow) multiplying the loss and dividing the gradients cancel.
STATIC_LOSS_SCALE = 1024.0
AMP_DTYPES = ("bfloat16", "float16")
PLANTS = ("lr_x1.01", "adam_no_bias_correction", "adam_no_second_bias_correction", "clip_without_unscale")


@dataclass(frozen=True)
class Case:
    """One run to measure: an optimizer row in one mode of one script, at one AMP dtype, seed and length; ``plant``: a
    planted mistake (None: the correct loop)."""

    optimizer: str
    script: str
    mode: Mode
    amp_dtype: str
    seed: int
    epochs: int
    plant: str | None = None
    preset: str = "tiny"

    @property
    def precision(self) -> str:
        return self.mode.precision(self.amp_dtype)


class PlantedAdam(torch.optim.Optimizer):
    """Adam (L2 weight decay) with one or both bias corrections left out: the planted mistake a bound must catch."""

    def __init__(self, params: Any, lr: float, betas: tuple[float, float], eps: float, weight_decay: float, first: bool) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self.correct_first = first

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                state["step"] += 1
                g = p.grad.add(p, alpha=group["weight_decay"])
                state["exp_avg"].lerp_(g, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
                size = group["lr"] / (1 - beta1 ** state["step"]) if self.correct_first else group["lr"]
                p.addcdiv_(state["exp_avg"], state["exp_avg_sq"].sqrt().add_(group["eps"]), value=-size)


def make_optimizer(case: Case, spec: WorkloadSpec, params: Any) -> torch.optim.Optimizer:
    """The row's PyTorch optimizer as the scripts build it (``run_spec(...)["python"]``), or the planted one."""
    row = OPTIMIZERS[case.optimizer]
    lr = row.resolved_args(spec.lr)["lr"]
    assert isinstance(lr, float)
    built = row.run_spec(spec.lr, {"lr": lr * 1.01} if case.plant == "lr_x1.01" else None)["python"]
    args = {k: tuple(v) if isinstance(v, list) else v for k, v in built["args"].items()}
    if case.plant in ("adam_no_bias_correction", "adam_no_second_bias_correction"):
        return PlantedAdam(params, first=case.plant == "adam_no_second_bias_correction", **args)
    return getattr(torch.optim, built["class"])(params, **args)  # type: ignore[no-any-return]


def train(case: Case, spec: WorkloadSpec, fixtures: dict[str, torch.Tensor]) -> tuple[list[float], dict[str, np.ndarray], frozenset[int]]:
    """The scripts' loop for ``case.mode``: losses, final weights (float64) and the steps the dynamic scaler skipped."""
    mode, amp = case.mode, getattr(torch, case.amp_dtype)
    layers: list[torch.nn.Module] = []
    for k, (out_f, in_f) in enumerate(p.shape for p in spec.parameters if p.name.endswith(".weight")):  # the MLP's Linear layers
        linear = torch.nn.Linear(in_f, out_f)
        with torch.no_grad():
            linear.weight.copy_(fixtures[f"layer{k}.weight"])
            linear.bias.copy_(fixtures[f"layer{k}.bias"])
        layers += [linear, torch.nn.ReLU()]
    net = torch.nn.Sequential(*layers[:-1])
    data, targets = fixtures["data"], fixtures["targets"]
    if mode.weights == "amp":
        net, data, targets = net.to(amp), data.to(amp), targets.to(amp)
    opt = make_optimizer(case, spec, net.parameters())
    scaler = None
    if mode.scaler in ("dynamic", "disabled"):
        scaler = torch.amp.GradScaler(
            "cpu", init_scale=spec.init_scale, growth_factor=spec.growth_factor, backoff_factor=spec.backoff_factor,
            growth_interval=spec.growth_interval, enabled=mode.scaler == "dynamic",
        )
    losses: list[float] = []
    scales: list[float] = []
    for _ in range(spec.epochs):
        for i in range(spec.num_batches):
            with torch.autocast("cpu", dtype=amp, enabled=mode.autocast):
                loss = torch.nn.functional.mse_loss(net(data[i]), targets[i])
            if scaler is not None:
                scaler.scale(loss).backward()
                if mode.clip:
                    if case.plant != "clip_without_unscale":
                        scaler.unscale_(opt)
                    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=spec.clip_max_norm)
                scaler.step(opt)
                scaler.update()
                scales.append(scaler.get_scale())
            elif mode.scaler == "static":
                (loss * STATIC_LOSS_SCALE).backward()
                for p in net.parameters():
                    assert p.grad is not None
                    p.grad.div_(STATIC_LOSS_SCALE)
                opt.step()
            else:
                loss.backward()
                if mode.clip:
                    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=spec.clip_max_norm)
                opt.step()
            opt.zero_grad()
            losses.append(float(loss.detach().float()))
    skipped = frozenset()
    if mode.scaler == "dynamic":
        before = [spec.init_scale, *scales[:-1]]
        skipped = frozenset(step for step, (a, b) in enumerate(zip(before, scales, strict=True)) if b < a)
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    weights = {f"layer{k}.{kind}": getattr(m, kind).detach().double().numpy() for k, m in enumerate(linears) for kind in ("weight", "bias")}
    return losses, weights, skipped


def distinct_rows() -> dict[str, list[str]]:
    """Rows that run the same PyTorch class with the same arguments measure the same: one of each, with its twins."""
    seen: dict[tuple[str, str], list[str]] = {}
    for name, row in OPTIMIZERS.items():
        seen.setdefault((row.python, repr(sorted(row.args.items()))), []).append(name)
    return {names[0]: names for names in seen.values()}


def modes() -> Iterator[tuple[str, Mode]]:
    """Every mode of every script, each with the script that declares it."""
    for pair in SCRIPTS.values():
        for mode in pair.modes:
            yield pair.stem, mode


def cases(seeds: list[int], epochs: list[int], planted_seeds: list[int], preset: str, optimizers: list[str]) -> Iterator[Case]:
    """The correct runs (every distinct row, mode, AMP dtype where the mode has one, seed and length), then the planted ones."""
    rows = [name for name in distinct_rows() if not optimizers or name in optimizers]
    for epoch in epochs:
        for seed in seeds:
            for optimizer in rows:
                for script, mode in modes():
                    for amp in AMP_DTYPES if mode.precision("bfloat16") != "float32" else ("bfloat16",):
                        yield Case(optimizer, script, mode, amp, seed, epoch, preset=preset)
    for epoch in epochs:
        for seed in planted_seeds:
            for optimizer in rows:
                for script, mode in modes():
                    for amp in AMP_DTYPES if mode.precision("bfloat16") != "float32" else ("bfloat16",):
                        if script == "cuda_amp_grad_scaler" and mode.name == "default":
                            continue  # the same arithmetic as with_autocast's default
                        yield Case(optimizer, script, mode, amp, seed, epoch, "lr_x1.01", preset)
                        if optimizer == "adam":
                            yield Case(optimizer, script, mode, amp, seed, epoch, "adam_no_bias_correction", preset)
                            yield Case(optimizer, script, mode, amp, seed, epoch, "adam_no_second_bias_correction", preset)
                        if mode.clip:
                            yield Case(optimizer, script, mode, amp, seed, epoch, "clip_without_unscale", preset)


def measure(out: Path, seeds: list[int], epochs: list[int], planted_seeds: list[int], preset: str, optimizers: list[str]) -> None:
    """Run every case and append one JSON line per case to ``out``."""
    torch.set_num_threads(1)
    references: dict[tuple[Any, ...], Reference] = {}
    loaded: dict[tuple[int, int], tuple[WorkloadSpec, dict[str, np.ndarray], dict[str, torch.Tensor]]] = {}
    with out.open("a", encoding="utf-8") as sink:
        for case in cases(seeds, epochs, planted_seeds, preset, optimizers):
            key = (case.seed, case.epochs)
            if key not in loaded:
                spec = WorkloadSpec.from_preset(preset, seed=case.seed, epochs=case.epochs)
                arrays = load_fixture_arrays(ensure_fixtures(spec))
                loaded[key] = (spec, arrays, {k: torch.from_numpy(v.copy()) for k, v in arrays.items()})
            spec, arrays, fixtures = loaded[key]
            start = time.perf_counter()
            losses, weights, skipped = train(case, spec, fixtures)
            ref_key = (*key, case.optimizer, case.mode.clip, skipped)
            if ref_key not in references:
                references[ref_key] = run_reference(spec, arrays, case.mode.clip, skipped, optimizer=case.optimizer)
            distance = measure_distance(losses, weights, references[ref_key], skipped)
            row = {
                "optimizer": case.optimizer, "script": case.script, "mode": case.mode.name, "amp_dtype": case.amp_dtype,
                "precision": case.precision, "preset": preset, "seed": case.seed, "steps": spec.steps, "plant": case.plant,
                "loss": distance.max_rel_loss_error, "weights": distance.final_weights_rel_error,
                "worst_tensor": distance.worst_tensor, "skipped": len(skipped), "seconds": round(time.perf_counter() - start, 3),
            }
            sink.write(json.dumps(row) + "\n")
            sink.flush()


def _fmt(value: float | None) -> str:
    return "nan" if value is None or math.isnan(value) else f"{value:.1e}"


def summary(path: Path) -> None:
    """Tables from a measurement file, per precision, kind of update and length: the largest distance of the correct
    runs and the smallest of each plant, each against ``float64_bound_for`` (how many correct runs pass it, how many
    planted ones it catches); then the largest distance per optimizer."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        bound = float64_bound_for(mode_of(row["script"], row["mode"]), "cpu", row["amp_dtype"], row["steps"], row["optimizer"])
        row["kind"] = update_kind(row["optimizer"])
        row["bound"] = (bound.loss_rtol, bound.weight_rtol)
        row["beyond"] = row["loss"] is None or row["weights"] is None or row["loss"] > bound.loss_rtol or row["weights"] > bound.weight_rtol

    def worst(selected: list[dict[str, Any]], field: str) -> float | None:
        values = [r[field] for r in selected]
        return None if any(v is None for v in values) else max(values, default=math.nan)

    def least(selected: list[dict[str, Any]], field: str) -> float | None:
        values = [math.inf if r[field] is None else r[field] for r in selected]
        return min(values, default=math.nan)

    def group(r: dict[str, Any]) -> tuple[str, str, str, int]:
        return r["preset"], r["precision"], r["kind"], r["steps"]

    groups = list(dict.fromkeys(group(r) for r in rows))
    print("correct runs: largest loss rel / weights rel L2 (nan: a run did not finish), bound, runs beyond it")
    for preset, precision, kind, steps in groups:
        sel = [r for r in rows if group(r) == (preset, precision, kind, steps) and r["plant"] is None]
        finite = [r for r in sel if r["loss"] is not None and r["weights"] is not None]
        if sel:
            b = sel[0]["bound"]
            print(
                f"  {preset:5} {precision:17} {kind:12} {steps:4}  {_fmt(worst(finite, 'loss'))} / {_fmt(worst(finite, 'weights'))}"
                f"   bound {_fmt(b[0])} / {_fmt(b[1])}   beyond {sum(r['beyond'] for r in finite)}/{len(finite)}"
                + (f"   non-finite {len(sel) - len(finite)} ({', '.join(sorted({r['optimizer'] for r in sel if r not in finite}))})"
                   if len(sel) > len(finite) else "")
            )
    print("planted: smallest loss rel / weights rel L2, runs caught (beyond the bound) / runs")
    for plant in PLANTS:
        for preset, precision, kind, steps in groups:
            planted = [r for r in rows if group(r) == (preset, precision, kind, steps) and r["plant"] == plant]
            sel = [r for r in planted if r["loss"] is not None and r["weights"] is not None]  # a run that did not finish tells nothing
            if planted:
                missed = sorted({r["optimizer"] for r in sel if not r["beyond"]})
                unfinished = sorted({r["optimizer"] for r in planted if r not in sel})
                print(
                    f"  {plant:31} {preset:5} {precision:17} {kind:12} {steps:4}"
                    f"  {_fmt(least(sel, 'loss'))} / {_fmt(least(sel, 'weights'))}"
                    f"   caught {sum(r['beyond'] for r in sel)}/{len(sel)}" + (f" (missed: {', '.join(missed)})" if missed else "")
                    + (f"; non-finite: {', '.join(unfinished)}" if unfinished else "")
                )
    print("per optimizer (correct runs): largest loss rel / weights rel L2, per precision")
    precisions = list(dict.fromkeys(r["precision"] for r in rows))
    for preset, steps in dict.fromkeys((r["preset"], r["steps"]) for r in rows):
        print(f"  {preset} {steps} steps" + "".join(f"{p[:16]:>20}" for p in precisions))
        for optimizer, names in distinct_rows().items():
            cells = []
            for precision in precisions:
                sel = [
                    r for r in rows
                    if (r["optimizer"], r["precision"], r["preset"], r["steps"], r["plant"]) == (optimizer, precision, preset, steps, None)
                ]
                cells.append(f"{_fmt(worst(sel, 'loss'))}/{_fmt(worst(sel, 'weights'))}" if sel else "-")
            if any(c != "-" for c in cells):
                print(f"  {'+'.join(names)[:26]:26}" + "".join(f"{c:>20}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, help="append one JSON line per run here")
    parser.add_argument("--summary", type=Path, help="print the tables of a measurement file")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, nargs="+", default=[2, 25], help="tiny's 2 epochs are 20 steps; 25 are 250")
    parser.add_argument("--planted-seeds", type=int, nargs="*", default=[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--optimizers", nargs="*", default=[], help="rows to measure (default: every distinct row)")
    args = parser.parse_args(argv)
    if args.out:
        measure(args.out, args.seeds, args.epochs, args.planted_seeds, args.preset, args.optimizers)
    if args.summary or args.out:
        summary(args.summary or args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
