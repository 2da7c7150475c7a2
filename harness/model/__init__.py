"""The result model: every stored thing, typed and frozen, its ``to_json``/``from_json`` derived from its fields by one
codec (:mod:`~harness.model.codec`), and the shape check derived from the same declaration (:mod:`~harness.model.shape`).

The types a result is made of (:mod:`~harness.model.result`, :mod:`~harness.model.record`,
:mod:`~harness.model.timing`, :mod:`~harness.model.efficiency`, :mod:`~harness.model.verdicts`,
:mod:`~harness.model.pair_trace`) and the numbers derived from them by arithmetic alone (timing statistics and
ratios, efficiency). It imports only the workload and the worker side's tensor bytes; everything above reads it.
"""
