"""A workload spec made into the run spec one script receives (:class:`harness.contract.run_spec.RunSpec`).

The workload's fields, then what the script needs beyond them: its modes' properties, the optimizer row, the
reconciliation switches and the patches to apply (the record's fields and the dtype table come with every run spec).
Neither language keeps its own copy of any of these: the shared files of ``py_scripts/`` and ``r_scripts/`` read them from
the run spec, so a field declared in :mod:`harness.contract.record` reaches both scripts at once, and a script that
returns another set of fields fails its own ``make_record`` check.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.contract.modes import SCRIPTS
from harness.contract.run_spec import RunSpec
from harness.workload.features import NO_FEATURE, check_feature
from harness.workload.optimizers import OPTIMIZERS
from harness.workload.patches import patches_for, switch_names
from harness.workload.spec import WorkloadSpec

__all__ = ["run_spec_for"]


def run_spec_for(
    spec: WorkloadSpec, script: str, optimizer: str, fixture_path: str, weights_out: str | None, scaler_lift: bool = True,
    collect_before_loop: str = "young", switches: Sequence[str] = (), feature: str = NO_FEATURE,
) -> RunSpec:
    """The run spec of ``script`` with ``optimizer`` on ``spec``'s fixture file: ``switches`` by name (checked), the
    optimizer row with the spec's ``optimizer_args`` applied, the loop feature's row (``None``: the plain loop) and the
    spec's model's row."""
    names = switch_names(switches)
    row = check_feature(feature)
    built = OPTIMIZERS[optimizer].run_spec(spec.lr, dict(spec.optimizer_args).get(optimizer))
    lr = float(built["python"]["args"]["lr"])  # a scheduler's lr_args are factors of it
    return RunSpec(
        workload=spec.to_json(), fixture_path=fixture_path, weights_out=weights_out, scaler_lift=scaler_lift,
        collect_before_loop=collect_before_loop, modes=SCRIPTS[script].modes_json(), optimizer=built,
        switches=tuple(names), patches=patches_for(optimizer, names), feature=None if row is None else row.run_spec(lr),
        model=spec.model_row.run_spec(spec.sizes),
    )
