"""A Python script's call leaves no reference cycles: what it built is freed when the call returns, by reference counting.

The timed loop runs with the collector off (``py_scripts/timing.py``, no collection before it: tensors are freed at
once), and a worker serves call after call. A call whose loop, model, optimizer and tensors sat in a cycle (the
loop once kept a ``functools.partial`` of itself to rebuild on resume) stayed alive until the cyclic collector ran: at
``bench`` a worker's heap grew by about 50 MB in one round of four, and those rounds took 10,000-14,000 page faults inside
their timed loop (docs/timing.md, 2026-11-28, second session). Each call here runs with the collector saving what it
finds, so a cycle shows as objects in ``gc.garbage``.

Two cycles are PyTorch's own and are left as users meet them: its recursive local closures, each holding itself through
its cell (:data:`TORCH_CLOSURES`). They hold a few small tensors (the scaled losses, a loaded state's), never the loop,
the model or an optimizer.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import types
from collections.abc import Iterator

import pytest
import torch

from harness.contract.models import DEFAULT_MODEL
from harness.contract.modes import SCRIPTS
from harness.run.prepare import prepare_run_spec
from harness.workload.features import FEATURES
from harness.workload.model_designs import PRESET_MODELS
from harness.workload.spec import WorkloadSpec
from py_scripts.loop import Loop

#: PyTorch's recursive local functions, each a cycle through its own closure cell (torch/optim/optimizer.py,
#: ``load_state_dict``'s ``_cast``, run by the resume rows; torch/amp/grad_scaler.py, ``scale``'s ``apply_scale`` for a
#: list of losses, run by ``multi_optimizer_list``).
TORCH_CLOSURES = frozenset({"Optimizer.load_state_dict.<locals>._cast", "GradScaler.scale.<locals>.apply_scale"})
def _cases() -> Iterator[tuple[str, str, str, str, str]]:
    """(script, mode, optimizer, feature, model): every mode of both scripts, every feature row where its first cover runs
    it, every model of ``tiny`` in the default mode."""
    for script, pair in SCRIPTS.items():
        for mode in pair.mode_names:
            yield script, mode, "sgd", "none", DEFAULT_MODEL
    for name, feature in FEATURES.items():
        cover = feature.covers[0]
        script, mode = cover.modes[0]
        yield script, mode, cover.optimizers[0], name, DEFAULT_MODEL
    for model in PRESET_MODELS["tiny"]:
        if model != DEFAULT_MODEL:
            yield "with_autocast", "default", "sgd", "none", model


@pytest.fixture(scope="module")
def warm(tiny_spec: WorkloadSpec) -> None:
    """One call first, in each test process: torch's first-call set-up (``inspect.signature`` parsing, its operator schemas)
    leaves cycles of its own, once."""
    run_spec = prepare_run_spec(tiny_spec, "with_autocast", "sgd", save_weights=False)
    importlib.import_module("py_scripts.with_autocast").run_workload(run_spec, "default")


@pytest.mark.usefixtures("warm")
@pytest.mark.parametrize(("script", "mode", "optimizer", "feature", "model"), list(_cases()))
def test_a_python_call_leaves_no_reference_cycles(tiny_spec: WorkloadSpec, script: str, mode: str, optimizer: str, feature: str,
                                                  model: str) -> None:
    """What the cyclic collector finds after one call. Everything older is frozen first (``gc.freeze``: out of the
    collector's sight, so not charged to the call, and the collection after the call reads only what it made, in
    milliseconds where a full collection with torch imported takes 0.14 s)."""
    spec = dataclasses.replace(tiny_spec, model=model)
    run_spec = prepare_run_spec(spec, script, optimizer, save_weights=False, feature=feature)
    run_workload = importlib.import_module(f"py_scripts.{script}").run_workload
    gc.freeze()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run_workload(run_spec, mode)
        gc.collect()
        cycles = sorted({type(o).__qualname__ for o in gc.garbage})
        functions = {o.__qualname__ for o in gc.garbage if isinstance(o, types.FunctionType)}
        ours = sorted({type(o).__qualname__ for o in gc.garbage if isinstance(o, (Loop, torch.nn.Module, torch.optim.Optimizer))})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.unfreeze()
    what = f"a call of {script} {mode} ({optimizer}, {feature}, {model}) left objects in reference cycles"
    assert not ours, f"{what}, what it built among them: {ours}"
    assert not cycles or (functions and functions <= TORCH_CLOSURES), f"{what}: {cycles}, functions {sorted(functions)}"
