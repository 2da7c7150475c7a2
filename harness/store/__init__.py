"""Results on disk: the result file and its upgrades, the consistency check on load, and the output places.

Saving and loading (:mod:`harness.store.result_file`), the refusal of numbers that disagree with their inputs
(:mod:`harness.store.consistency`), and the claims that keep a run's result, weights and report from touching
what a user owns (:mod:`harness.store.result_claim`, :mod:`harness.store.report_claim`, what both share in
:mod:`harness.store.claim`, and :mod:`harness.store.lock`). Storage never imports a view.
"""
