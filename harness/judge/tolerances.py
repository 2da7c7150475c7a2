"""The tolerance policy: how far apart two frontends may be and still be called the same computation.

One policy, keyed by mode, device, AMP dtype, optimizer and step count; every number below carries the reason
it has that value. A frontend pair is judged against the *other frontend*, not against float64, so
the numbers bound the gap between two correct implementations of the same steps.

Where the numbers come from (measured on the ``tiny`` preset, CPU, seeds 0-2, plain SGD, with two independent
implementations of each precision: torch vs a NumPy float32 trajectory, and torch autocast vs a NumPy
emulation that rounds every GEMM input and output to bf16/fp16 and accumulates in float32; the last column is
plain SGD's tolerance now, see ``_BASE_IN_EPS`` for why its weights part was raised):

============  =======  ==========================  ==========================  ====================
precision     steps    gap between the two (loss   each from float64 (loss     tolerance at
                       rel / weights rel L2)       rel / weights rel L2)       that step count
============  =======  ==========================  ==========================  ====================
float32       20       2.4e-7 / 1.2e-8             1.6e-7 / 1.2e-7             7.6e-6 / 7.6e-6
float32       500      2.3e-6 / 5.0e-5             1.2e-5 / 2.3e-4             1.9e-4 / 1.9e-4
bfloat16      20       9.7e-7 / 5.6e-7             4.5e-5 / 1.0e-4             2.4e-4 / 2.0e-3
bfloat16      100      2.7e-5 / 9.2e-5             4.5e-5 / 3.6e-4             1.2e-3 / 9.8e-3
bfloat16      500      4.8e-5 / 5.8e-4             8.3e-5 / 1.7e-3             6.1e-3 / 4.9e-2
float16       20       1.2e-6 / 1.3e-5             6.3e-6 / 3.5e-5             3.1e-5 / 9.8e-4
float16       500      7.3e-6 / 1.6e-4             1.5e-5 / 3.6e-4             7.6e-4 / 2.4e-2
============  =======  ==========================  ==========================  ====================

float16 was measured without the scaler: with ``tiny``'s growth interval of 4 the scale overflows
within 100 steps, and the skipped steps (which both sides must share, step for step) move a run far
further from float64 than rounding does.

Two correct implementations can be at most as far apart as the sum of their distances from float64
(the triangle inequality), so each tolerance is set at or above twice the measured float64 distance
at 20 steps and grows linearly with steps after that. A real behavioural difference (a missing
``unscale_``, a cast the other side does not make, a different learning rate) moves the trajectory
by far more; the subtler ones (a layer left in float32) also change ``output_dtype`` or one side's
distance from float64, which :mod:`harness.judge.pairs` reports separately.

Where identity is the truth, tolerances are not used at all. Two frontends that load the same libtorch
version on CPU run the same kernels in the same order, in every mode (R torch's ``with_autocast`` and
``optim_sgd`` reach the same ATen ops as PyTorch's), and measured runs of the correct scripts are bitwise
identical in ``default`` and ``autocast`` at ``tiny`` and ``bench``. There, real bugs hide inside the
numbers above (measured at ``tiny`` with one change planted in R's script, ``tests/integration/test_planted.py``): a
learning rate off by one part in a million moves the ``default`` pair by at most 37 float32 ULPs (weights
rel L2 6.6e-8), inside the float32 tolerance; a leaky ReLU for a ReLU moves the ``autocast`` pair by rel
L2 3.9e-4, inside the bf16 one (2.0e-3; 4.9e-4 before SGD with momentum joined). So under the ``strict`` judging policy
(the default) such a pair must be bitwise identical or it is ``diverged``. ``tolerance_only`` (the
``--tolerance-only`` flag) judges every pair by the numbers above, as for different libtorch versions
and for CUDA, where no GPU run has yet measured whether two frontends' cuBLAS calls agree bitwise.

Since issue 25 the numbers are also keyed by the optimizer's kind of update (:func:`update_kind`) and cover the
``<dtype> weights`` precisions (everything in the AMP dtype, no autocast: the AMP guide's ``--fp16``). No second
implementation of those is measured here, so their pair tolerance, and the normalising optimizers', come from the
triangle bound alone: at least twice the largest float64 distance measured at 20 steps (the tables at
``_FLOAT64_BOUND_IN_EPS`` below). The proportional autocast numbers keep their measured reasons, with the weights
raised where SGD with momentum's triangle bound needs it (bf16 1.4e-3, fp16 6.8e-4).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from harness.contract.dtypes import EPS as CONTRACT_EPS
from harness.contract.modes import SCRIPTS, Mode, all_mode_names
from harness.contract.optimizers import DEFAULT_OPTIMIZER, UPDATE_KIND_OF_CLASS
from harness.contract.optimizers import UPDATE_KINDS as CONTRACT_UPDATE_KINDS
from harness.errors import SpecError, UsageError
from harness.model.verdicts import MEASURED_STEPS, Float64Bound, bound_growth
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.spec import AMP_DTYPES, DEVICES

__all__ = [
    "DEFAULT_JUDGING", "EPS", "JUDGING_POLICIES", "MEASURED_STEPS", "PRECISIONS", "UPDATE_KINDS", "Float64Bound", "Tolerance",
    "check_judging", "float64_bound_for", "precision_for", "tolerance_for", "update_kind",
]

#: How pairs are judged. ``strict``: where bitwise identity is expected (``expected_identical``), a pair
#: that is not identical is ``diverged``; elsewhere the tolerance decides. ``tolerance_only``: the
#: tolerance decides everywhere (a maintainer's choice, e.g. to triage a known difference).
JUDGING_POLICIES = ("strict", "tolerance_only")
#: Strict unless asked: a release gated on this harness must not pass a real difference as rounding.
DEFAULT_JUDGING = "strict"

#: Machine epsilon of each dtype a mode computes in (harness/contract/dtypes.py says what each is).
EPS: dict[str, float] = {name: CONTRACT_EPS[name] for name in ("float32", *AMP_DTYPES)}

#: The precisions a mode computes in (:meth:`harness.contract.modes.Mode.precision`): float32; the AMP dtype under
#: autocast (float32 master weights, GEMMs in the AMP dtype); ``<dtype> weights``, everything in the AMP dtype. Each
#: is measured in units of its dtype's EPS.
PRECISIONS: tuple[str, ...] = ("float32", "bfloat16", "float16", "bfloat16 weights", "float16 weights")

#: The kinds of update (:data:`harness.contract.optimizers.UPDATE_KINDS`) the tolerances are keyed by. Measured (tiny,
#: bf16 autocast, 20 steps, final weights rel L2): proportional 5.9e-5 (Adagrad) to 6.8e-4 (SGD momentum); normalising
#: 2.4e-3 (Adadelta) to 5.0e-2 (RMSprop) and 4.9e-2 (Rprop): up to 74x further for the same rounding.
UPDATE_KINDS: tuple[str, ...] = CONTRACT_UPDATE_KINDS


#: (loss_rtol, weight_rtol) of a pair at MEASURED_STEPS, in units of the precision's dtype's EPS, per precision and
#: kind of update. Each is at least the triangle bound (twice the largest float64 distance measured at 20 steps, over
#: every optimizer of the kind, every mode of the precision and seeds 0-2: the tables at ``_FLOAT64_BOUND_IN_EPS``).
#: float32: 64 eps ≈ 7.6e-6 for both. The measured gap of two implementations is ≤ 2 eps, but a float32 dot product of
#: K terms summed in a different order (another BLAS blocking, a wider layer) differs by about sqrt(K) roundings of
#: random sign: 64 for the recipe's K = 4096. Still 100x below what TF32 (a 2^-10 fraction that CUDA may use for
#: float32 matmuls) would produce, so a TF32 side is caught. Normalising optimizers: triangle bound 5.0e-6 (weights).
#: bfloat16, proportional: eps/32 ≈ 2.4e-4 for the loss (2.3x the triangle bound 1.0e-4) and eps/4 ≈ 2.0e-3 for the
#: weights (1.4x SGD with momentum's 1.4e-3; plain SGD's is 2.0e-4, and its two measured implementations part by
#: 5.6e-7). Only GEMM inputs and outputs are rounded to bf16 (accumulation and master weights are float32), hence a
#: small fraction of eps. Normalising: eps/4 ≈ 2.0e-3 and 16 eps = 0.125 (triangle bound 9.6e-4 and 0.10, Rprop
#: and RMSprop).
#: float16: proportional eps/32 ≈ 3.1e-5 loss (1.9x the triangle bound 1.6e-5) and eps ≈ 9.8e-4 weights (1.4x
#: SGD momentum's 6.8e-4); normalising 2 eps ≈ 2.0e-3 and 128 eps = 0.125 (triangle bound 1.1e-3 and 9.0e-2).
#: bfloat16 weights (one rule for both kinds; the weights themselves are rounded to bf16 at every step, which sets a
#: floor both kinds share): 2 eps ≈ 1.6e-2 loss and 16 eps = 0.125 weights (triangle bound 1.0e-2 and 0.10).
#: float16 weights: proportional 2 eps ≈ 2.0e-3 and 8 eps ≈ 7.8e-3 (triangle bound 1.0e-3 and 4.8e-3); normalising
#: 16 eps ≈ 1.6e-2 and 256 eps = 0.25 (triangle bound 1.2e-2 and 0.17, Rprop: RMSprop, Adam and AdamW do not finish
#: in float16 weights, see below).
_BASE_IN_EPS: dict[str, dict[str, tuple[float, float]]] = {
    "float32": {"proportional": (64.0, 64.0), "normalising": (64.0, 64.0)},
    "bfloat16": {"proportional": (1.0 / 32.0, 1.0 / 4.0), "normalising": (1.0 / 4.0, 16.0)},
    "float16": {"proportional": (1.0 / 32.0, 1.0), "normalising": (2.0, 128.0)},
    "bfloat16 weights": {"proportional": (2.0, 16.0), "normalising": (2.0, 16.0)},
    "float16 weights": {"proportional": (2.0, 8.0), "normalising": (16.0, 256.0)},
}

#: CUDA is not measured here (no GPU where these numbers were taken). cuBLAS chooses GEMM algorithms
#: (split-K, tile order) by heuristics that can differ between the library builds each frontend
#: loads, so two frontends on one GPU may accumulate in different orders: doubled as a margin until
#: measured. Lower it when a GPU run shows the gap.
_DEVICE_FACTOR: dict[str, float] = {"cpu": 1.0, "cuda": 2.0}

#: ``atol`` = ``rtol`` x this. Losses start near 1 (unit-variance targets, MSE), and initial weights
#: are U(±1/sqrt(in_size)), ≥ 1/64 for in_size ≤ 4096. The absolute floor only matters for a loss or a
#: tensor that has shrunk 64x below those scales, where a relative error stops meaning anything.
_ATOL_SHARE = 1.0 / 64.0

#: A tensor whose every element is within this many float32 ULPs of the other side's is rounding in
#: the last bits whatever the mode: one SGD update (lr x grad, then a subtraction) rounds each weight
#: twice, and a fused multiply-add on one side only changes that by ≤ 1 ULP per update.
_MAX_ULPS = 4


@dataclass(frozen=True)
class Tolerance:
    """How close two frontends' runs must be, and why.

    Losses at a step agree when ``|a - b| <= loss_atol + loss_rtol * max(|a|, |b|)``. A final-weights
    tensor agrees when its relative L2 error ``||a - b|| / max(||a||, ||b||)`` is ``<= weight_rtol``, or its largest
    element difference is ``<= weight_atol``, or every element is within ``max_ulps`` float32 ULPs.
    ``expected_identical`` is the stricter expectation (bitwise equality): under the ``strict`` judging
    policy a pair that is not bitwise equal where it is expected is ``diverged``, whatever the numbers say.
    """

    loss_rtol: float
    loss_atol: float
    weight_rtol: float
    weight_atol: float
    max_ulps: int
    expected_identical: bool
    precision: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        """Plain data for a verdict's details and the report."""
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """One line with the numbers, for explanations."""
        return (
            f"loss rtol {self.loss_rtol:.2e} (atol {self.loss_atol:.1e}), weights rel L2 {self.weight_rtol:.2e} "
            f"(atol {self.weight_atol:.1e}, or <= {self.max_ulps} ULPs)"
        )


def check_judging(judging: str) -> str:
    """``judging`` if it is a known policy.

    Raises:
        UsageError: not one of ``JUDGING_POLICIES``.
    """
    if judging not in JUDGING_POLICIES:
        raise UsageError("judging", judging, f"one of {', '.join(map(repr, JUDGING_POLICIES))}")
    return judging


def precision_for(mode: str | Mode, amp_dtype: str) -> str:
    """The precision whose rounding dominates ``mode`` (one of ``PRECISIONS``): :meth:`Mode.precision`.

    ``mode`` is a :class:`~harness.contract.modes.Mode`, or a mode's name, for callers that still pass names: every
    script that declares a name gives it the same precision (``default`` is float32 in both), so the name decides it.

    Raises:
        SpecError: a name no script declares, or an unknown AMP dtype.
    """
    if amp_dtype not in AMP_DTYPES:
        raise SpecError("amp_dtype", amp_dtype, f"one of {', '.join(map(repr, AMP_DTYPES))}")
    if isinstance(mode, Mode):
        return mode.precision(amp_dtype)
    precisions = {m.precision(amp_dtype) for script in SCRIPTS.values() for m in script.modes if m.name == mode}
    if len(precisions) != 1:
        raise SpecError("mode", mode, f"one of {', '.join(map(repr, all_mode_names()))}")
    return precisions.pop()


def update_kind(optimizer: str) -> str:
    """The kind of update (one of ``UPDATE_KINDS``) of the optimizer table's row ``optimizer``, from its PyTorch class.

    Raises:
        SpecError: no such row, or a row whose class has no measured kind (measure it with ``tests/float64_distance.py``
            and add the class to ``UPDATE_KIND_OF_CLASS``).
    """
    row = OPTIMIZERS.get(optimizer)
    if row is None:
        raise SpecError("optimizer", optimizer, f"one of {', '.join(map(repr, OPTIMIZERS))}")
    if row.kind is None:
        raise SpecError(
            "optimizer", optimizer,
            f"a row whose PyTorch class has a measured kind of update ({', '.join(UPDATE_KIND_OF_CLASS)}); torch.optim.{row.python} "
            "has none: measure it with tests/float64_distance.py and add it to UPDATE_KIND_OF_CLASS in harness/contract/optimizers.py",
        )
    return row.kind


def _keys(mode: str | Mode, device: str, amp_dtype: str, steps: int, optimizer: str) -> tuple[str, str, str]:
    """The mode's name, its precision and the optimizer's kind, after checking every argument."""
    precision = precision_for(mode, amp_dtype)
    if device not in DEVICES:
        raise SpecError("device", device, f"one of {', '.join(map(repr, DEVICES))}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise SpecError("steps", steps, "a whole number >= 1")
    return (mode.name if isinstance(mode, Mode) else mode), precision, update_kind(optimizer)


def _eps_of(precision: str) -> float:
    """The EPS of the dtype a precision rounds to (``bfloat16 weights`` rounds to bfloat16)."""
    return EPS[precision.removesuffix(" weights")]


def tolerance_for(
    mode: str | Mode, device: str, amp_dtype: str, steps: int, same_libtorch: bool, optimizer: str = DEFAULT_OPTIMIZER
) -> Tolerance:
    """The tolerance for a pair of cells running ``mode`` with ``optimizer`` (a row of the optimizer table; plain SGD
    unless given) for ``steps`` optimizer steps.

    The base numbers (at 20 steps) grow linearly with ``steps``: a rounding difference made at one
    step is carried by every later step, and each step adds its own. Measured growth from 20 to 500
    steps was at most 17x (bf16 weights) for 25x the steps; an isolated jump (one implementation
    flipping a ReLU that the other does not) can exceed any smooth law, which is why a ``diverged``
    verdict names the first step and the worst tensor for a person to judge.

    ``same_libtorch``: both frontends report the same libtorch version. On CPU every mode then runs the
    same kernels in the same order on both sides (the frontends' autocast and scaler code only choose
    which ATen ops run, and in which dtype), so every mode is expected bitwise identical. On CUDA it is
    not promised until a GPU run has measured it (cuBLAS heuristics, see ``_DEVICE_FACTOR``).

    Raises:
        SpecError: an unknown mode, device, AMP dtype or optimizer, or ``steps`` < 1.
    """
    name, precision, kind = _keys(mode, device, amp_dtype, steps, optimizer)
    eps = _eps_of(precision)
    loss_units, weight_units = _BASE_IN_EPS[precision][kind]
    growth = max(1.0, steps / MEASURED_STEPS)
    scale = eps * growth * _DEVICE_FACTOR[device]
    loss_rtol, weight_rtol = loss_units * scale, weight_units * scale
    expected_identical = same_libtorch and device == "cpu"
    reason = (
        f"{name} computes in {precision} (eps {eps:.2e}); {optimizer} is a {kind} update; base {loss_units:g} eps (loss) and "
        f"{weight_units:g} eps (weights) at {MEASURED_STEPS} steps, x{growth:g} for {steps} steps"
        + (f", x{_DEVICE_FACTOR[device]:g} on {device} (cuBLAS algorithm choice, not yet measured)" if device == "cuda" else "")
        + ("; same libtorch on both sides on CPU, so bitwise identity is expected" if expected_identical else "")
    )
    return Tolerance(
        loss_rtol=loss_rtol,
        loss_atol=loss_rtol * _ATOL_SHARE,
        weight_rtol=weight_rtol,
        weight_atol=weight_rtol * _ATOL_SHARE,
        max_ulps=_MAX_ULPS,
        expected_identical=expected_identical,
        precision=precision,
        reason=reason,
    )


# --- One cell against float64 -------------------------------------------------------------------
#
# A cell without a partner (the R scaler cells on CPU, every R cell without R torch, any
# ``--frontend python`` run) is judged by its own distance from the float64 reference, replayed over
# the steps the run skipped, with the same optimizer (:mod:`harness.judge.optimizer_updates`). Measured by
# ``tests/float64_distance.py`` (torch 2.13.0 CPU, one thread, Python; R's cells on one libtorch are bitwise equal to
# Python's where they agree at all): the PyTorch loop of every mode of every script (float16 included: autocast,
# GradScaler and float16 weights all run on CPU in torch 2.13), every distinct optimizer row (an ignite row runs the
# same PyTorch class and arguments as its R twin, so measures the same), seeds 0-2, at tiny (20 steps) and tiny with
# 25 epochs (250 steps). Loss relative error / final weights relative L2, the largest over every optimizer of the kind,
# mode of the precision and seed; the bound below; and how many correct runs are beyond it (none at 20 steps).
#
# =================  ============  ==================  ==================  ==================  ==================  =======
# precision          kind          20 steps            bound at 20         250 steps           bound at 250        beyond
# =================  ============  ==================  ==================  ==================  ==================  =======
# float32            proportional  1.6e-7 / 3.1e-7     7.6e-6 / 1.2e-4     3.5e-6 / 8.4e-4     9.5e-5 / 1.5e-3     0/30
# float32            normalising   1.6e-7 / 2.5e-6     7.6e-6 / 1.2e-4     3.2e-3 / 3.0e-1     9.5e-5 / 1.5e-3     20/42 *
# bfloat16           proportional  5.2e-5 / 6.8e-4     4.9e-4 / 3.9e-3     5.2e-5 / 5.1e-3     6.1e-3 / 4.9e-2     0/45
# bfloat16           normalising   4.8e-4 / 5.0e-2     2.0e-3 / 2.5e-1     7.0e-3 / 6.7e-1     2.4e-2 / 3.1        0/63
# float16            proportional  8.0e-6 / 3.4e-4     6.1e-5 / 2.0e-3     2.0e-5 / 3.1e-3     7.6e-4 / 2.4e-2     0/45
# float16            normalising   5.5e-4 / 4.5e-2     3.9e-3 / 2.5e-1     6.2e-3 / 6.9e-1     4.9e-2 / 3.1        0/63
# bfloat16 weights   proportional  5.1e-3 / 1.8e-2     3.1e-2 / 2.5e-1     1.3e-2 / 1.8e-1     3.9e-1 / 3.1        0/30
# bfloat16 weights   normalising   3.9e-3 / 5.2e-2     3.1e-2 / 2.5e-1     2.3e-2 / 7.1e-1     3.9e-1 / 3.1        0/42
# float16 weights    proportional  5.2e-4 / 2.4e-3     3.9e-3 / 1.6e-2     1.8e-3 / 2.9e-2     4.9e-2 / 2.0e-1     0/30
# float16 weights    normalising   5.8e-3 / 8.6e-2     3.1e-2 / 5.0e-1     2.8e-2 / 1.4        3.9e-1 / 6.2        0/12 **
# =================  ============  ==================  ==================  ==================  ==================  =======
#
# bench (50 steps, plain SGD only, as bench runs, seed 0): float32 1.3e-7 / 1.9e-7, bfloat16 6.8e-6 / 2.9e-5, float16
# 7.9e-7 / 9.7e-6, bfloat16 weights 4.6e-3 / 3.3e-3, float16 weights 1.1e-3 / 2.0e-3: each under a tenth of its bound.
#
# The largest per optimizer at 20 steps (weights rel L2; bf16 autocast / fp16 autocast / bf16 weights / fp16 weights),
# which is why the kinds exist: SGD 1.0e-4 / 3.8e-5 / 3.9e-3 / 1.2e-3; SGD momentum (and ignite) 6.8e-4 / 3.4e-4 /
# 1.8e-2 / 1.1e-3; Nesterov 6.4e-4 / 2.3e-4 / 1.5e-2 / 1.1e-3; ASGD 1.1e-4 / 4.4e-5 / 1.1e-2 / 1.8e-3; Adagrad (and
# ignite) 5.9e-5 / 2.2e-5 / 6.7e-3 / 2.4e-3; Adadelta 2.4e-3 / 1.5e-3 / 9.9e-3 / 3.4e-3; Adam (and ignite, AMSGrad)
# 6.1e-3 / 3.6e-3 / 1.7e-2 / -; AdamW (and ignite) 9.8e-3 / 5.2e-3 / 1.3e-2 / -; RMSprop 3.0e-2 / 2.2e-2 / 3.4e-2 / -;
# centered RMSprop (and ignite) 5.0e-2 / 3.8e-2 / 4.7e-2 / -; Rprop 4.9e-2 / 4.5e-2 / 5.2e-2 / 8.6e-2. In float32 all
# are at the floor (1.2e-7, the final weights' own rounding) but RMSprop (2.5e-6), AdamW (1.0e-6), Adam (5.0e-7).
# A normalising update amplifies rounding, and moves the weights further: relative to how far the weights moved in 20
# steps (SGD 0.4 %, Adam 37 %, RMSprop 160 % of the final weights' norm) the bf16 error is 1-3 % of that for most rows
# (AdamW 8 %, Rprop 33 %), which is also why a 1 % change of the learning rate cannot be told from bf16 rounding.
#
# * float32, normalising, 250 steps: correct runs that no bound meant for rounding can pass. RMSprop (all seeds, both
#   rows: 3.0e-1 weights, loss 9e-7): with this row's lr 1e-3, alpha 0.9 and no bias correction its first steps are
#   3-6 lr, so the weights shrink to a few % of their norm by step 80 and then move chaotically: even torch float64 and
#   this reference part (2e-15 at step 60, 1e-6 at 140, 1.4 at 250). With lr 1e-4 (measured) it stays regular in bf16
#   (5e-3 at 250 steps). AdamW (all seeds; 2.2e-3 / 2.5e-2) and Rprop (seed 1: 3.2e-3 / 2.8e-1, from a jump at step
#   ~100): float32 rounding flips the sign of a near-zero gradient, which a normalising update turns into a full step
#   (torch float64 and the reference agree to 1e-14 there). A proportional run jumps too (SGD momentum seed 1: 1e-5 at
#   step 40, a ReLU flipped, growing to 8.4e-4), which the float32 weights bound (1024 eps) is sized to cover.
# ** float16 weights: RMSprop, Adam and AdamW (all their rows, 30 runs) give NaN from step 1 in a correct PyTorch run:
#    their eps 1e-8 is 0 in float16 (below its smallest subnormal, 6e-8) and so is the second moment of a small
#    gradient, so the first update is 0/0. Those cells fail as numerical failures, not by this bound.
#
# Planted mistakes (seed 0, the smallest distance over the optimizers of the kind and the modes of the precision; caught
# = beyond the bound at that step count):
#
# ===================================  =================  ============  ===================  ===========================
# mistake                              precision          kind          20 steps             caught at 20 (at 250)
# ===================================  =================  ============  ===================  ===========================
# lr x1.01                             float32            proportional  1.3e-5 / 4.8e-5      5/5 (3/5: ASGD, Adagrad not)
# lr x1.01                             float32            normalising   7.1e-5 / 2.2e-3      7/7 (7/7)
# lr x1.01                             bfloat16           both          2.9e-5 / 7.8e-5      0/36 (0/36)
# lr x1.01                             float16            both          1.3e-5 / 4.5e-5      6/36 (0/36)
# lr x1.01                             <dtype> weights    both          3.4e-4 / 1.2e-3      0/38 (0/38)
# Adam without both bias corrections   every one ***      normalising   3.2e-3 / 3.3e-1      9/9 (float32 only: 1/9)
# Adam without v's bias correction     every one ***      normalising   8.1e-3 / 8.8e-1      9/9 (float32 only: 1/9)
# clip mode without unscale_           bf16 and fp16      proportional  8.8e-4 / 2.2e-3      10/10 (10/10)
# clip mode without unscale_           bf16 and fp16      normalising   4.8e-4 / 3.7e-2      12/14: not Rprop (2/14)
# ===================================  =================  ============  ===================  ===========================
#
# *** float16 weights: Adam is NaN there, planted or not (above).
#
# So a cell's own check catches a mistake that changes the update's size or direction by tens of percent (a bias
# correction, the scaler's unscale_) at tiny's 20 steps in every precision, and a 1 % learning rate only in float32.
# Rprop's update is the sign of the gradient, so clipping the scaled gradients changes nothing it reads: not a miss. At
# 250 steps the linear growth lets the normalising bounds outgrow those mistakes, whose distance does not grow. A pair
# on one libtorch is held to bitwise identity instead (``strict``), which is what catches a 1 % learning rate there.

#: (loss, weights) bound at MEASURED_STEPS, in units of the precision's dtype's EPS, per precision and kind of update,
#: for one cell's distance from float64: at least 4x the largest distance measured for correct runs at 20 steps (the
#: tables above; the factor each time is that margin), the smallest power of two that is, unless said otherwise.
#: float32: 64 eps ≈ 7.6e-6 (loss) and 1024 eps ≈ 1.2e-4 (weights) for both kinds: 48x and 390x the measured 1.6e-7
#: / 3.1e-7 (proportional), 48x and 49x the 1.6e-7 / 2.5e-6 (normalising). 64 for the loss because a dot product of K
#: terms rounds about sqrt(K) times (64 for the recipe's K = 4096, where no reference runs here to measure it); 1024
#: for the weights so that linear growth covers the jump of a correct run at 250 steps (SGD with momentum, seed 1: a
#: ReLU that float32 flips at step ~40, 8.4e-4 at 250 steps, under the 1.5e-3 there). Planted at 20 steps: lr x1.01
#: is 1.3e-5 at least in the loss (1.7x past the bound) for every optimizer; a missing Adam bias correction 3.3e-3 /
#: 0.33; TF32 matmuls (a 2^-10 fraction) land near 1e-3.
#: bfloat16 (autocast): proportional eps/16 ≈ 4.9e-4 and eps/2 ≈ 3.9e-3 (9.4x and 5.7x the 5.2e-5 / 6.8e-4 of SGD
#: with momentum; eps/16 rather than eps/32 for the loss because the golden result's shrunken tiny, 32 wide and 8
#: steps, plain SGD, sits at 2.3e-4, 94 % of eps/32); normalising eps/4 ≈ 2.0e-3 and 32 eps = 0.25 (4.0x and 5.0x
#: the 4.8e-4 of Rprop / 5.0e-2 of RMSprop).
#: float16 (autocast): proportional eps/16 ≈ 6.1e-5 and 2 eps ≈ 2.0e-3 (7.6x and 5.7x the 8.0e-6 / 3.4e-4);
#: normalising 4 eps ≈ 3.9e-3 and 256 eps = 0.25 (7.1x and 5.6x the 5.5e-4 of Rprop / 4.5e-2 of Rprop).
#: bfloat16 weights: one rule, 4 eps ≈ 3.1e-2 and 32 eps = 0.25 (6.1x and 4.8x the 5.1e-3 / 5.2e-2; proportional
#: alone would be 4 and 16 eps). The weights are rounded to bf16 at every step, so an update below half an ULP of its
#: weight is lost (lr x gradient for SGD); that, not the optimizer, dominates.
#: float16 weights: proportional 4 eps ≈ 3.9e-3 and 16 eps ≈ 1.6e-2 (7.5x and 6.5x the 5.2e-4 / 2.4e-3); normalising
#: 32 eps ≈ 3.1e-2 and 512 eps = 0.5 (5.4x and 5.8x Rprop's 5.8e-3 / 8.6e-2).
_FLOAT64_BOUND_IN_EPS: dict[str, dict[str, tuple[float, float]]] = {
    "float32": {"proportional": (64.0, 1024.0), "normalising": (64.0, 1024.0)},
    "bfloat16": {"proportional": (1.0 / 16.0, 1.0 / 2.0), "normalising": (1.0 / 4.0, 32.0)},
    "float16": {"proportional": (1.0 / 16.0, 2.0), "normalising": (4.0, 256.0)},
    "bfloat16 weights": {"proportional": (4.0, 32.0), "normalising": (4.0, 32.0)},
    "float16 weights": {"proportional": (4.0, 16.0), "normalising": (32.0, 512.0)},
}


def float64_bound_for(mode: str | Mode, device: str, amp_dtype: str, steps: int, optimizer: str = DEFAULT_OPTIMIZER) -> Float64Bound:
    """The bound on the distance from float64 of one cell running ``mode`` (a :class:`Mode`, or its name) with
    ``optimizer`` (a row of the optimizer table; plain SGD unless given) after ``steps`` optimizer steps.

    It grows linearly with ``steps`` past MEASURED_STEPS, as :func:`tolerance_for` does (the 250-step column above
    says where that holds). CUDA doubles it as the pair tolerance does, until measured.

    Raises:
        SpecError: an unknown mode, device, AMP dtype or optimizer, or ``steps`` < 1.
    """
    name, precision, kind = _keys(mode, device, amp_dtype, steps, optimizer)
    eps = _eps_of(precision)
    loss_units, weight_units = _FLOAT64_BOUND_IN_EPS[precision][kind]
    scale = eps * bound_growth(steps) * _DEVICE_FACTOR[device]
    reason = (
        f"{name} computes in {precision} (eps {eps:.2e}); {optimizer} is a {kind} update; bound {loss_units:g} eps (loss) "
        f"and {weight_units:g} eps (weights) from float64 at {MEASURED_STEPS} steps, x{bound_growth(steps):g} for {steps} steps"
        + (f", x{_DEVICE_FACTOR[device]:g} on {device} (not yet measured)" if device == "cuda" else "")
    )
    return Float64Bound(loss_units * scale, weight_units * scale, precision, steps, reason)
