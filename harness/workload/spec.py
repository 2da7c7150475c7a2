"""The workload spec: one frozen, validated description of a run, shared by every frontend.

A workload is data; the runners are generic. Every number that decides what runs lives here, next to
the reason it has that value. Validation happens once, on construction, so a ``WorkloadSpec`` that
exists is valid: the scripts (Python and R) never re-check it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import warnings
from collections.abc import Mapping
from typing import Any

from harness.contract.dtypes import AMP_DTYPES
from harness.contract.models import DEFAULT_MODEL, MODELS, Model, Parameter, Sizes
from harness.contract.modes import all_mode_names
from harness.errors import SpecError
from harness.workload.choices import parse_choices
from harness.workload.optimizers import OPTIMIZERS, R_MAX_INT, check_optimizer_args
from harness.workload.space import Space, between, choice

__all__ = [
    "AMP_DTYPES",
    "DEVICES",
    "FIXTURE_FIELDS",
    "default_overflow_steps",
    "OVERFLOW_POINTS",
    "PRESETS",
    "SEARCH_SPACE",
    "SizeWarning",
    "WorkloadSpec",
    "available_cores",
    "parse_modes",
]

DEVICES: tuple[str, ...] = ("cpu", "cuda")
_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16"}
#: Autocast's own default per device: CPU autocast supports bf16 (fp16 CPU kernels are sparse);
#: CUDA autocast defaults to fp16, the dtype both seeds use.
DEFAULT_AMP_DTYPE = {"cpu": "bfloat16", "cuda": "float16"}

#: Where ``overflow_steps`` put their inf: right after ``backward()`` (the scaler's ``unscale_`` finds it, as a
#: real fp16 overflow), or right after ``unscale_()`` (the scripts call it at those steps), where only a
#: scaler that checks the gradients again before ``step`` can see it: R torch's ``step()`` does
#: (``.check_inf_per_device``), PyTorch's trusts what ``unscale_`` found (docs/known-differences.md).
OVERFLOW_POINTS: tuple[str, ...] = ("backward", "unscale")

#: Fields added after results were first stored, with the default that leaves a spec's digest what it was before them.
_ADDED_FIELDS: dict[str, Any] = {"overflow_steps": [], "overflow_point": "backward", "optimizer_args": {}, "static_loss_scale": 1024.0,
                                 "model": DEFAULT_MODEL}

#: Fields that decide the fixture tensors; the fixture cache is keyed by these alone, so changing the
#: learning rate or the mode reuses the same data and initial weights. ``model`` decides them too; at its default it is
#: left out of the key (:meth:`WorkloadSpec.fixture_fields`), so the MLP's fixtures keep the digest they always had.
FIXTURE_FIELDS: tuple[str, ...] = ("batch_size", "in_size", "out_size", "num_layers", "num_batches", "seed", "model")

#: Tensor cores engage only when the GEMM dimensions are multiples of 8 (fp16/bf16).
_TENSOR_CORE_MULTIPLE = 8
#: Refuse a spec whose fixtures alone would take more than this share of the machine's memory: a run
#: also holds the model, gradients and activations, so a larger one cannot finish.
_MAX_MEMORY_SHARE = 0.5
#: Whole-number fields reach R as R integers, which are 32-bit: a larger value is a double there, and
#: torch's R API refuses it (sizes, threads, the scaler's growth interval).
_MAX_INT = R_MAX_INT
#: The float fields become float32 scalars in both frontends (the learning rate, the scaler's scale and
#: factors, the clip norm). Beyond float32's largest value a number is inf there, and below its smallest
#: normal one it loses precision or is flushed to zero by the CPU kernels (FTZ/DAZ): either way every
#: cell would fail or train on a different number than the spec says.
_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_MIN_NORMAL = 1.1754943508222875e-38


class SizeWarning(UserWarning):
    """A size that runs, but slower than it could (e.g. tensor cores may not engage)."""


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    """A complete, validated run description; build one with :meth:`from_preset`.

    ``amp_dtype=None`` resolves to autocast's default for the device and ``threads=0`` to the number of
    cores, so a stored spec always says what actually ran.
    """

    # The workload's sizes have no defaults: each preset in PRESETS gives them, with its reasons.
    preset: str
    batch_size: int
    in_size: int
    out_size: int
    num_layers: int
    num_batches: int
    epochs: int
    lr: float
    seed: int = 0
    device: str = "cpu"
    amp_dtype: str | None = None
    # torch.amp.GradScaler's and cuda_amp_grad_scaler()'s own defaults.
    init_scale: float = 65536.0
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    # The recipe's max_norm for clip_grad_norm_.
    clip_max_norm: float = 0.1
    # Steps (0-based, as the recorded steps are numbered) at which the scaler scripts put an inf into
    # one gradient before the scaler's step, so the skip-and-backoff path runs at all (tiny in bf16
    # never overflows). Empty: no injection, and the spec's digest is what it was before this field. Every preset
    # sets one (PRESETS).
    overflow_steps: tuple[int, ...] = ()
    # Where those infs go (OVERFLOW_POINTS); the default keeps the spec's digest what it was before this field.
    overflow_point: str = "backward"
    # One thread unless a preset says otherwise: reproducible, and fair between frontends on CPU.
    threads: int = 1
    # Hyperparameters that replace an optimizer row's (harness/workload/optimizers.py): optimizer name → {argument: value}.
    optimizer_args: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    # The AMP guide's static loss scale (mode lowp_weights_scaled: the loss times this, the gradients divided by it).
    # A power of two, so scaling and unscaling are exact unless a gradient overflows or underflows the dtype: what the
    # scale is for in float16, and what this mode tests.
    static_loss_scale: float = 1024.0
    # The model trained (a row of harness/contract/models.py); the default keeps the spec's digest what it was before.
    model: str = DEFAULT_MODEL

    def __post_init__(self) -> None:
        if isinstance(self.overflow_steps, list):  # from JSON (a spec file, a stored result)
            object.__setattr__(self, "overflow_steps", tuple(self.overflow_steps))
        object.__setattr__(self, "optimizer_args", check_optimizer_args(self.optimizer_args))
        _validate(self)
        if self.amp_dtype is None:
            object.__setattr__(self, "amp_dtype", DEFAULT_AMP_DTYPE[self.device])
        else:
            object.__setattr__(self, "amp_dtype", _DTYPE_ALIASES.get(self.amp_dtype, self.amp_dtype))
        if self.threads == 0:
            object.__setattr__(self, "threads", available_cores())

    @classmethod
    def from_preset(cls, preset: str = "tiny", **overrides: Any) -> WorkloadSpec:
        """The preset's spec with ``overrides`` applied; unknown preset or field names are refused."""
        if not isinstance(preset, str) or preset not in PRESETS:
            raise SpecError("preset", preset, f"one of {_listing(PRESETS)}")
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise SpecError("field", unknown[0], f"one of {_listing(f.name for f in dataclasses.fields(cls))}")
        values = {**PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}}
        epochs, batches = values.get("epochs", 1), values.get("num_batches", 1)
        if "overflow_steps" not in values and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in (epochs, batches)):
            values["overflow_steps"] = default_overflow_steps(epochs * batches)  # otherwise validation names the bad field
        return cls(preset=preset, **values)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkloadSpec:
        """A spec from plain data (a spec file, a stored result): the preset first, then its overrides."""
        if not isinstance(data, Mapping):
            raise SpecError("spec", data, "a JSON object of spec fields")
        fields = dict(data)
        # A stored spec without a field added since ran at that field's old default, not at today's preset's (a result
        # from before the presets injected an overflow injected none).
        for name, default in _ADDED_FIELDS.items():
            fields.setdefault(name, default)
        return cls.from_preset(fields.pop("preset", "tiny"), **fields)

    def replace(self, **changes: Any) -> WorkloadSpec:
        """A copy with ``changes``, validated again."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """Plain data for JSON and for the scripts of both languages (``overflow_steps`` as a list, pairs as lists)."""
        args = {name: {k: list(v) if isinstance(v, tuple) else v for k, v in row.items()} for name, row in self.optimizer_args.items()}
        values = dataclasses.asdict(self) | {"overflow_steps": list(self.overflow_steps), "optimizer_args": args}
        if self.model == DEFAULT_MODEL:  # a stored result of the MLP says what it always said
            del values["model"]
        return values

    def for_model(self, model: str) -> WorkloadSpec:
        """This spec training ``model`` (a matrix of several models: each cell's own, its fixtures and reference by it)."""
        return self if model == self.model else dataclasses.replace(self, model=model)

    @property
    def steps(self) -> int:
        """Optimizer steps in one run."""
        return self.epochs * self.num_batches

    @property
    def sizes(self) -> Sizes:
        """The sizes the model is built from (:class:`harness.contract.models.Sizes`)."""
        return Sizes(self.batch_size, self.in_size, self.out_size, self.num_layers, self.num_batches)

    @property
    def model_row(self) -> Model:
        """The model's row (:data:`harness.contract.models.MODELS`)."""
        return MODELS[self.model]

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        """The model's parameters at this spec's sizes, in the optimizer's order (the fixtures' drawing order)."""
        return self.model_row.parameters(self.sizes)

    @property
    def parameter_count(self) -> int:
        """How many numbers the model's parameters hold."""
        return sum(math.prod(p.shape) for p in self.parameters)

    @property
    def fixture_bytes(self) -> int:
        """Bytes of the float32 fixture tensors: data, targets and initial weights."""
        model = self.model_row
        data = self.num_batches * (math.prod(model.inputs(self.sizes)) + math.prod(model.targets(self.sizes)))
        return 4 * (data + self.parameter_count)

    def fixture_fields(self) -> dict[str, Any]:
        """The fields that decide the fixtures, as a manifest names them (``model`` only where it is not the default)."""
        return {name: getattr(self, name) for name in FIXTURE_FIELDS if name != "model" or self.model != DEFAULT_MODEL}

    def digest(self, fields: tuple[str, ...] | None = None) -> str:
        """A short stable hash of ``fields`` (all fields by default), for cache keys and results."""
        values = self.to_json()
        for name, default in _ADDED_FIELDS.items():  # a field added later, at its default: the spec keeps its digest
            if values.get(name, default) == default:
                values.pop(name, None)
        chosen = {k: values[k] for k in (fields or tuple(values)) if k in values}
        return hashlib.sha256(json.dumps(chosen, sort_keys=True).encode()).hexdigest()[:16]

    def summary(self) -> str:
        """One line naming the spec, for error messages."""
        return (
            f"preset {self.preset}, device {self.device}, {self.amp_dtype}, batch {self.batch_size}, "
            f"{self.in_size}->{self.out_size}, {self.num_layers} layers, seed {self.seed}"
            + ("" if self.model == DEFAULT_MODEL else f", model {self.model}")
        )


#: The presets. ``tiny`` runs in seconds on 2 CPU cores (what CI runs); its learning rate is large
#: enough that the 20-step trajectory moves measurably (parity of a flat trajectory proves little) and
#: its growth interval is short so the scaler's growth rule fires within the run (and every field not
#: named here takes the dataclass default).
#: ``bench`` is the timing preset: about a second per CPU cell on one thread (50 steps of 256 x 512 GEMMs),
#: long enough that round-to-round noise falls to a few percent, short enough for its 20 timed rounds
#: (harness.model.timing.BENCH_ROUNDS) of the whole matrix in a few minutes; its float64 reference still fits
#: the budget (~5e10 FLOPs).
#: ``recipe`` is the seeds' workload. Its lr is PyTorch's recipe's 0.001, not the R vignette's 0.1:
#: the recipe is the upstream reference, and 0.1 on 4096-wide layers with fp16 overshoots enough to
#: make a parity verdict depend on divergence rather than on the binding. growth_interval is
#: GradScaler's default (2000), as in both seeds. threads=0 means all cores.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "batch_size": 32, "in_size": 128, "out_size": 128, "num_layers": 3, "num_batches": 10,
        "epochs": 2, "lr": 0.05, "growth_interval": 4,
    },
    "bench": {
        "batch_size": 256, "in_size": 512, "out_size": 512, "num_layers": 3, "num_batches": 25,
        "epochs": 2, "lr": 0.05, "growth_interval": 10,
    },
    "recipe": {
        "batch_size": 512, "in_size": 4096, "out_size": 4096, "num_layers": 3, "num_batches": 50,
        "epochs": 3, "lr": 0.001, "threads": 0,
    },
}

#: Where ``harness search`` draws the workload's own fields (harness/workload/space.py); the others keep ``tiny``'s. Small,
#: so an example of both languages takes a fraction of a second, and a finding shrinks to sizes a reproducer can print.
#: Every value is a valid spec field in both scripts; the first choice is where a finding shrinks to.
SEARCH_SPACE: dict[str, Space] = {
    "batch_size": choice(1, 2, 4, 8, 16, why="any batch >= 1; 1 is a batch no preset runs"),
    "in_size": choice(2, 4, 8, 16, 32, why="any width >= 1: the hidden layers are in_size wide"),
    "out_size": choice(1, 2, 4, 8, 16, why="any width >= 1"),
    "num_layers": choice(2, 3, why="the features name layers 0 and 1 (frozen, sometimes_used, custom_function)"),
    "num_batches": between(1, 6, "any number of batches >= 1", dtype="int"),
    "epochs": between(1, 2, "two epochs cross an epoch boundary (a scheduler's, the data's)", dtype="int"),
    "seed": between(0, 2**16, "any seed draws other fixtures: data, targets and initial weights", dtype="int"),
    "growth_interval": between(1, 4, "any interval >= 1; a short one makes the scaler grow within the run", dtype="int"),
}


def default_overflow_steps(steps: int) -> tuple[int, ...]:
    """Where a spec that names none puts its one overflow: the middle step (0-based; tiny's 20 steps: step 9).

    bfloat16 on CPU never overflows by itself, so without it the main job never ran the scaler's skip and backoff (a
    halved R ``backoff_factor`` read ``identical``, issue 37). The middle, so the scale has grown before it (tiny: at
    steps 3 and 7) and grows again after it: the backoff and the growth count's restart both show in the history.
    ``--overflow-steps ""`` runs without.
    """
    return (max(steps // 2 - 1, 0),)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one, else every core): what ``threads=0`` means."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def parse_modes(values: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """Mode names from repeated or comma-separated ``--mode`` values, in matrix order; all when empty. A name selects
    that mode in every script that declares it (``default`` is in both)."""
    return parse_choices("mode", values, all_mode_names())


def _listing(items: Any) -> str:
    return ", ".join(repr(i) for i in items)


def _validate(spec: WorkloadSpec) -> None:
    """Check every field's type first (a spec file is JSON: any field may hold a list), then its range."""
    for name, allowed in (("preset", PRESETS), ("device", DEVICES), ("overflow_point", OVERFLOW_POINTS), ("model", MODELS)):
        if not isinstance(getattr(spec, name), str):
            raise SpecError(name, getattr(spec, name), f"a string: one of {_listing(allowed)}")
    if spec.amp_dtype is not None and not isinstance(spec.amp_dtype, str):
        raise SpecError("amp_dtype", spec.amp_dtype, f"a string: one of {_listing(AMP_DTYPES)} (or bf16, fp16)")
    if spec.preset not in PRESETS:
        raise SpecError("preset", spec.preset, f"one of {_listing(PRESETS)}")
    for name in ("batch_size", "in_size", "out_size", "num_layers", "num_batches", "epochs", "growth_interval"):
        _positive_int(name, getattr(spec, name))
    _int("seed", spec.seed, minimum=0)
    _int("threads", spec.threads, minimum=0)
    for name in ("lr", "init_scale", "clip_max_norm", "static_loss_scale"):
        _positive_float(name, getattr(spec, name))
    _positive_float("growth_factor", spec.growth_factor)
    if spec.growth_factor <= 1.0:
        raise SpecError("growth_factor", spec.growth_factor, "a number greater than 1")
    _positive_float("backoff_factor", spec.backoff_factor)
    if spec.backoff_factor >= 1.0:
        raise SpecError("backoff_factor", spec.backoff_factor, "a number between 0 and 1 (exclusive)")
    if spec.device not in DEVICES:
        raise SpecError("device", spec.device, f"one of {_listing(DEVICES)}")
    if spec.amp_dtype is not None and _DTYPE_ALIASES.get(spec.amp_dtype, spec.amp_dtype) not in AMP_DTYPES:
        raise SpecError("amp_dtype", spec.amp_dtype, f"one of {_listing(AMP_DTYPES)} (or bf16, fp16)")
    if spec.overflow_point not in OVERFLOW_POINTS:
        raise SpecError("overflow_point", spec.overflow_point, f"one of {_listing(OVERFLOW_POINTS)}")
    if spec.model not in MODELS:
        raise SpecError("model", spec.model, f"one of {_listing(MODELS)}")
    _check_overflow_steps(spec)
    _check_optimizer_ranges(spec)
    _check_memory(spec)
    _check_tensor_core_sizes(spec)


def _int(name: str, value: object, minimum: int) -> None:
    allowed = f"a whole number from {minimum} to {_MAX_INT} (R's largest integer)"
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= _MAX_INT:
        # past R's integers, the range is what the value misses, whether a spec file wrote it whole or as 1e300
        beyond = isinstance(value, (int, float)) and not isinstance(value, bool) and value > _MAX_INT
        raise SpecError(name, value, allowed if beyond else f"a whole number >= {minimum}")


def _positive_int(name: str, value: object) -> None:
    _int(name, value, minimum=1)


def _positive_float(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SpecError(name, value, "a finite number > 0")
    if not _FLOAT32_MIN_NORMAL <= value <= _FLOAT32_MAX:
        float32_range = f"from {_FLOAT32_MIN_NORMAL:.4g} to {_FLOAT32_MAX:.4g}"
        raise SpecError(name, value, f"a number a float32 holds, {float32_range} (it is a float32 in both frontends)")


def _check_optimizer_ranges(spec: WorkloadSpec) -> None:
    """An optimizer's own numbers get the ranges the spec's do (``--optimizer-arg sgd.lr=1e40`` is refused as ``--lr
    1e40`` is, not run into every cell's failure), each the range of its own kind: a learning rate is a float32 > 0 like
    ``lr``; any other number is 0 or a float32 (both frontends hand it to float32 kernels); a whole number (the row's
    value is one, as ASGD's ``t0``) has R's integers' range, checked with its kind (:func:`check_optimizer_args`), never a
    float32's."""
    for name, args in spec.optimizer_args.items():
        for arg, value in args.items():
            row = OPTIMIZERS[name]
            default = row.args[arg] if arg in row.args else row.space[arg].blank  # an argument only the search's space has
            if isinstance(default, int) and not isinstance(default, bool):
                continue  # a whole number: 0 to R_MAX_INT, refused in those words where it came in
            where = f"optimizer_args.{name}.{arg}"
            for number in value if isinstance(value, tuple) else (value,):
                if isinstance(number, bool):
                    continue
                if arg == "lr" or number != 0:
                    _positive_float(where, number)


def _check_overflow_steps(spec: WorkloadSpec) -> None:
    """Each injected step must exist in the run, once, in order: a typo must not silently inject nothing."""
    steps = spec.overflow_steps
    if not isinstance(steps, tuple):
        raise SpecError("overflow_steps", steps, "a list of step numbers, e.g. [3, 7]")
    last = spec.epochs * spec.num_batches - 1
    if any(isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= last for s in steps):
        raise SpecError(
            "overflow_steps", list(steps), f"a list of whole step numbers from 0 to {last} (0-based: this run has {last + 1} steps)"
        )
    if list(steps) != sorted(set(steps)):
        raise SpecError("overflow_steps", list(steps), "step numbers in increasing order, each once")


def _check_memory(spec: WorkloadSpec) -> None:
    """Refuse, before anything is allocated, a spec whose fixtures alone cannot fit in memory."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX sysconf: skip the estimate
        return
    need = spec.fixture_bytes
    if need > _MAX_MEMORY_SHARE * total:
        raise SpecError(
            "sizes", f"{need / 2**30:.1f} GiB of fixtures",
            f"at most {_MAX_MEMORY_SHARE:.0%} of this machine's {total / 2**30:.1f} GiB of memory "
            "(lower --batch-size, --in-size, --out-size or --num-batches)",
        )


def _check_tensor_core_sizes(spec: WorkloadSpec) -> None:
    odd = [n for n in ("batch_size", "in_size", "out_size") if getattr(spec, n) % _TENSOR_CORE_MULTIPLE]
    if odd:
        warnings.warn(
            f"{', '.join(f'{n}={getattr(spec, n)}' for n in odd)} not a multiple of {_TENSOR_CORE_MULTIPLE}: "
            "it runs, but tensor cores may not engage on a GPU.",
            SizeWarning,
            stacklevel=4,
        )
