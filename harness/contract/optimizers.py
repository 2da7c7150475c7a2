"""What both sides and the judges must agree on about optimizers beyond the table's rows: the default row, and the
kind of update each PyTorch class makes (which decides how far rounding carries a run from float64).

The rows themselves (classes, R functions, hyperparameters, state) are :mod:`harness.workload.optimizers`; each row's
kind is read from here (:attr:`harness.workload.optimizers.Optimizer.kind`), so a new class is one line below.
"""

from __future__ import annotations

__all__ = ["DEFAULT_OPTIMIZER", "EPS_UNDER_SQRT_CLASSES", "UPDATE_KINDS", "UPDATE_KIND_OF_CLASS"]

#: The row a run, a record or a verdict names when none is said: plain SGD, what the matrix ran before it had rows
#: (records before version 5, results before schema 8), and what ``bench`` and ``recipe`` time.
DEFAULT_OPTIMIZER = "sgd"

#: How an optimizer's update answers a rounding error in the gradient. ``proportional``: the update is the gradient (or a
#: sum of past ones) times a rate that does not depend on the current gradient's size: a gradient error of x moves the
#: weight by lr·x. ``normalising``: the update is divided by a running size of recent gradients, or is its sign: a
#: gradient that is rounding noise still takes a step of about lr. Measured in docs/judging.md (up to 74x apart).
UPDATE_KINDS: tuple[str, ...] = ("proportional", "normalising")

#: Each PyTorch class's kind. Adagrad is proportional: its denominator is the sum of every past square, from
#: ``initial_accumulator_value``, so one noisy gradient barely moves it. A class not here has no measured tolerance:
#: measure it with ``tests/float64_distance.py`` and add it.
UPDATE_KIND_OF_CLASS: dict[str, str] = {
    "SGD": "proportional", "ASGD": "proportional", "Adagrad": "proportional",
    "RMSprop": "normalising", "Adam": "normalising", "AdamW": "normalising", "Adadelta": "normalising", "Rprop": "normalising",
}

#: The PyTorch classes whose step divides by ``sqrt(v) + eps`` with ``v`` starting at 0 (RMSprop's square average, Adam's
#: and AdamW's second moment): where ``eps`` is 0 in the weights' dtype, a zero gradient entry makes that 0 / 0
#: (harness/workload/refusals.py). Not Adagrad (its sum starts at ``initial_accumulator_value``), nor Adadelta (its ``eps``
#: is inside the root).
EPS_UNDER_SQRT_CLASSES: frozenset[str] = frozenset({"RMSprop", "Adam", "AdamW"})
