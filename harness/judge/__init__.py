"""Judging: every verdict of a result, from what the result stores.

Each cell on its own (:mod:`~harness.judge.cells`), every pair (:mod:`~harness.judge.pairs`, with its findings,
explanation, tolerances and the known differences), and the performance targets (:mod:`~harness.judge.targets`, the
spread target in :mod:`~harness.judge.spread`);
:func:`harness.judge.assess.assess_result` applies them all, at the end of a run and on every load. No process
code and no torch: NumPy on stored records and weights.
"""
