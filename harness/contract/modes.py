"""The script pairs and the modes each declares: what every mode does, as data both languages read.

A script pair is found by its stem (``py_scripts/<stem>.py`` ↔ ``r_scripts/<stem>.R``; a *pair*, alone, is two cells:
docs/glossary.md). Each script pair declares its own modes, so a mode name means something only with its script: both
scripts may run ``default``, and ×default compares within one script. A mode is not a name the code tests for but a
set of properties (:class:`Mode`) the run spec hands the script (``modes`` in docs/contract.md), and that the harness
reads where a mode decides something: the precision a tolerance is keyed by, the GEMM dtype and whether it claims AMP,
the target sets, whether the float64 reference clips, whether a non-finite loss is a failure or a skipped step.

Where the AMP guide's other way to train goes (``../shared/seeds/amp_guide_fp16_cli.md``: weights and inputs in the AMP
dtype with no autocast, its ``--fp16``, with or without a static loss scale, its ``-s``): ``with_autocast``, the script
pair whose modes train without a ``GradScaler`` and choose their precision either by autocast or by the weights' dtype.
``cuda_amp_grad_scaler`` holds every mode with a ``GradScaler``, and its own ``default`` (the scaler and autocast
disabled, the AMP recipe's ``use_amp=False``), so its ×default compares within the script.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from harness.errors import SpecError

__all__ = [
    "FOUR_MODE_MATRIX", "GPU_AUTOCAST", "SCALERS", "SCRIPTS", "TARGET_SETS", "WEIGHTS", "Mode", "ScriptPair", "all_mode_names",
    "mode_of", "modes_in",
]

#: How a mode scales its loss: ``none``; ``disabled``, a ``GradScaler`` built with ``enabled=False`` (its calls pass
#: through); ``dynamic``, a ``GradScaler`` (scale, unscale, skip and back off on inf/NaN, grow); ``static``, a fixed
#: scale (the AMP guide's ``-s``: the loss times ``spec.static_loss_scale``, the gradients divided by it before the step).
SCALERS: tuple[str, ...] = ("none", "disabled", "dynamic", "static")
#: The dtype a mode's weights and inputs are kept in: ``float32``, or ``amp``, the spec's AMP dtype (the AMP guide's ``--fp16``).
WEIGHTS: tuple[str, ...] = ("float32", "amp")
#: The target set of the four modes issue 29 bounded the tiny CPU matrix's time on (the recipe's and the vignette's:
#: default, autocast, autocast with a scaler, and with clipping; :mod:`harness.judge.targets`).
FOUR_MODE_MATRIX = "four_mode_matrix"
#: The target set of the mode whose Python ``recipe`` cell on a GPU must reach a share of the half-precision peak.
GPU_AUTOCAST = "gpu_autocast"
#: Every target set a mode may belong to.
TARGET_SETS: tuple[str, ...] = (FOUR_MODE_MATRIX, GPU_AUTOCAST)


@dataclass(frozen=True)
class Mode:
    """What a mode does: autocast on or off, the weights' dtype, how the loss is scaled, whether gradients are clipped."""

    name: str
    autocast: bool
    weights: str = "float32"
    scaler: str = "none"
    clip: bool = False
    #: One line for the docs and ``--help``.
    title: str = ""
    #: The performance-target sets (:data:`TARGET_SETS`) whose bound covers this mode.
    target_sets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.weights not in WEIGHTS or self.scaler not in SCALERS or not set(self.target_sets) <= set(TARGET_SETS):
            raise ValueError(f"mode {self.name}: weights must be one of {WEIGHTS}, scaler one of {SCALERS} and target sets "
                             f"among {TARGET_SETS}")

    @property
    def claims_amp(self) -> bool:
        """Whether the mode says it computes in the AMP dtype (autocast, or weights kept in it): a float32 GEMM in it is a
        problem to report, and its GEMMs are held to the AMP dtype's peak."""
        return self.autocast or self.weights == "amp"

    def gemm_dtype(self, amp_dtype: str) -> str:
        """The dtype the mode's GEMMs run in: the AMP dtype where it claims AMP, float32 otherwise."""
        return amp_dtype if self.claims_amp else "float32"

    def precision(self, amp_dtype: str) -> str:
        """The precision whose rounding dominates the mode, as tolerances are keyed: ``float32`` (no autocast, float32
        weights), the AMP dtype under autocast (float32 master weights), or ``<amp dtype> weights`` (everything in it)."""
        if self.weights == "amp":
            return f"{amp_dtype} weights"
        return amp_dtype if self.autocast else "float32"

    @property
    def skips_steps(self) -> bool:
        """Whether a non-finite loss is a step the scaler skips by design (a dynamic ``GradScaler``), not a failure."""
        return self.scaler == "dynamic"

    def to_json(self) -> dict[str, Any]:
        """The properties a script reads (the run spec's ``modes``)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("name", "title", "target_sets")}


@dataclass(frozen=True)
class ScriptPair:
    """A script pair: its stem and its modes, in matrix order. ``baseline``: the mode ×default divides by.

    ``scalers``, ``weights`` and ``clips``: what the pair's ``run_workload`` handles (its loop's branches). A mode asking
    for anything else is refused when the table is built, so a mode the scripts would run as another (a ``dynamic``
    scaler in a loop that has none) cannot be declared: the scripts read a mode's properties and trust them.
    """

    stem: str
    modes: tuple[Mode, ...]
    baseline: str = "default"
    scalers: tuple[str, ...] = SCALERS
    weights: tuple[str, ...] = WEIGHTS
    clips: tuple[bool, ...] = (False, True)

    def __post_init__(self) -> None:
        names = [m.name for m in self.modes]
        if len(set(names)) != len(names) or self.baseline not in names:
            raise ValueError(f"script pair {self.stem}: mode names must be unique and include its baseline {self.baseline!r}")
        for mode in self.modes:
            for field_name, value, handled in (("scaler", mode.scaler, self.scalers), ("weights", mode.weights, self.weights),
                                               ("clip", mode.clip, self.clips)):
                if value not in handled:
                    raise ValueError(f"script pair {self.stem}: mode {mode.name} has {field_name} {value!r}, which its "
                                     f"run_workload does not handle (it handles {', '.join(map(repr, handled))})")

    def mode(self, name: str) -> Mode:
        """The mode called ``name`` in this pair.

        Raises:
            SpecError: this pair declares no such mode (the message names the ones it does).
        """
        for mode in self.modes:
            if mode.name == name:
                return mode
        raise SpecError("mode", name, f"one of {', '.join(repr(m.name) for m in self.modes)} for {self.stem}")

    @property
    def mode_names(self) -> tuple[str, ...]:
        """The modes' names in matrix order."""
        return tuple(m.name for m in self.modes)

    def modes_json(self) -> dict[str, dict[str, Any]]:
        """The run spec's ``modes``: each mode's properties by name."""
        return {m.name: m.to_json() for m in self.modes}


SCRIPTS: dict[str, ScriptPair] = {
    script.stem: script
    for script in (
        # No GradScaler in this loop: no scaler or a static scale, never clipping; float32 or low-precision weights.
        ScriptPair("with_autocast", scalers=("none", "static"), clips=(False,), modes=(
            Mode("default", autocast=False, title="float32 weights, autocast disabled", target_sets=(FOUR_MODE_MATRIX,)),
            Mode("autocast", autocast=True, title="torch.autocast / with_autocast around the forward and loss",
                 target_sets=(FOUR_MODE_MATRIX, GPU_AUTOCAST)),
            Mode("lowp_weights", autocast=False, weights="amp",
                 title="weights and inputs in the AMP dtype, no autocast (the AMP guide's --fp16)"),
            Mode("lowp_weights_scaled", autocast=False, weights="amp", scaler="static",
                 title="as lowp_weights, with a static loss scale (the AMP guide's --fp16 -s)"),
        )),
        # A GradScaler in every mode (disabled in default); float32 master weights; clipping after unscale_ or not.
        ScriptPair("cuda_amp_grad_scaler", scalers=("disabled", "dynamic"), weights=("float32",), modes=(
            Mode("default", autocast=False, scaler="disabled",
                 title="GradScaler and autocast built with enabled=False (the AMP recipe's use_amp=False)",
                 target_sets=(FOUR_MODE_MATRIX,)),
            Mode("autocast_scaler", autocast=True, scaler="dynamic", title="autocast + GradScaler / cuda_amp_grad_scaler()",
                 target_sets=(FOUR_MODE_MATRIX,)),
            Mode("autocast_scaler_clip", autocast=True, scaler="dynamic", clip=True,
                 title="+ unscale_ and gradient-norm clipping before the step", target_sets=(FOUR_MODE_MATRIX,)),
        )),
    )
}


def mode_of(script: str, mode: str) -> Mode:
    """The mode ``mode`` of script ``script``.

    Raises:
        SpecError: an unknown script, or a mode the script does not declare.
    """
    if script not in SCRIPTS:
        raise SpecError("script", script, f"one of {', '.join(repr(s) for s in SCRIPTS)}")
    return SCRIPTS[script].mode(mode)


def all_mode_names() -> tuple[str, ...]:
    """Every mode name any script declares, each once, in matrix order (what ``--mode`` accepts)."""
    return tuple(dict.fromkeys(m.name for script in SCRIPTS.values() for m in script.modes))


def modes_in(target_set: str) -> tuple[str, ...]:
    """The names of the modes a target set covers, each once, in matrix order (what ``--mode`` takes to run that set)."""
    return tuple(dict.fromkeys(m.name for script in SCRIPTS.values() for m in script.modes if target_set in m.target_sets))
