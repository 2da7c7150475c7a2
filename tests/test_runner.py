"""The matrix runner: statuses and reasons for every way a cell can end, and the whole result's shape."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.availability import Availability
from harness.matrix import Cell
from harness.runner import MatrixRunner
from harness.spec import MODES, WorkloadSpec

NO_R_TORCH = {"torch_installed": False, "libtorch_installed": False, "libtorch_loads": False}


def _without_r_torch(availability: Availability) -> Availability:
    return dataclasses.replace(availability, r=NO_R_TORCH)


def test_python_only_result_has_every_cell_and_field(tiny_spec: WorkloadSpec, availability: Availability) -> None:
    """A Python-only run returns 4 ok cells with records, reference distances and speedups."""
    with MatrixRunner(tiny_spec, ("python",), availability=availability) as runner:
        result = runner.run(MODES)
    assert [c["id"] for c in result["cells"]] == [
        "with_autocast-default-python-cpu", "with_autocast-autocast-python-cpu",
        "cuda_amp_grad_scaler-autocast_scaler-python-cpu", "cuda_amp_grad_scaler-autocast_scaler_clip-python-cpu",
    ]
    assert all(c["status"] == "ok" for c in result["cells"])
    assert result["schema_version"] == 1 and result["spec"]["preset"] == "tiny"
    assert result["reference"]["available"] and len(result["reference"]["losses"]) == 20
    default, autocast = result["cells"][0], result["cells"][1]
    assert default["speedup_vs_default"] == 1.0
    assert autocast["speedup_vs_default"] == pytest.approx(default["record"]["seconds_total"] / autocast["record"]["seconds_total"])
    assert default["reference_distance"]["max_rel_loss_error"] < 1e-5
    assert default["worker_peak_rss_bytes"] > 50 * 2**20


def test_r_cells_skip_with_the_install_reason(
    tiny_spec: WorkloadSpec, availability: Availability, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without R torch an R cell is ``skipped`` with the install command as its one-line reason."""
    monkeypatch.delenv("AMP_PARITY_REQUIRE_R", raising=False)
    with MatrixRunner(tiny_spec, ("r",), availability=_without_r_torch(availability)) as runner:
        outcome = runner.run_cell(Cell("r", "with_autocast", "default", "cpu"))
    assert outcome["status"] == "skipped"
    assert outcome["reason"] == 'the R package torch is not installed: in R, install.packages("torch"); torch::install_torch()'


def test_require_r_turns_the_skip_into_an_error(
    tiny_spec: WorkloadSpec, availability: Availability, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under AMP_PARITY_REQUIRE_R=1 a missing R torch makes R cells fail, with the reason."""
    monkeypatch.setenv("AMP_PARITY_REQUIRE_R", "1")
    with MatrixRunner(tiny_spec, ("r",), availability=_without_r_torch(availability)) as runner:
        outcome = runner.run_cell(Cell("r", "with_autocast", "default", "cpu"))
    assert outcome["status"] == "error" and "AMP_PARITY_REQUIRE_R=1" in outcome["reason"]


@pytest.mark.parametrize(
    ("r_info", "expected"),
    [
        ({}, "rpy2 3.6.0 cannot load R: undefined symbol: R_getVar"),
        ({"torch_installed": True, "libtorch_installed": False},
         "R torch is installed but its libtorch is not: in R, torch::install_torch()"),
        ({"torch_installed": True, "libtorch_installed": True, "libtorch_loads": False, "libtorch_error": "liblantern.so: cannot open"},
         "R torch's libtorch fails to load (liblantern.so: cannot open): in R, torch::install_torch(reinstall = TRUE)"),
    ],
)
def test_each_missing_piece_is_named_precisely(availability: Availability, r_info: dict[str, object], expected: str) -> None:
    """rpy2 that cannot load R, R torch without libtorch, and libtorch that fails to load each get their own reason."""
    broken = dataclasses.replace(availability, r=r_info, rpy2_version="3.6.0" if not r_info else availability.rpy2_version,
                                 rpy2_error="undefined symbol: R_getVar" if not r_info else None)
    assert broken.r_reason == expected


def test_no_r_at_all_is_named(availability: Availability) -> None:
    """No Rscript on the PATH is reported before anything else."""
    assert dataclasses.replace(availability, rscript=None).r_reason.startswith("R is not installed")  # type: ignore[union-attr]


def test_nan_loss_in_default_mode_is_a_numerical_failure_with_its_step(availability: Availability) -> None:
    """A learning rate that blows up gives ``numerical_failure`` naming the first non-finite step, and the run goes on."""
    spec = WorkloadSpec.from_preset("tiny", lr=1e6)
    with MatrixRunner(spec, ("python",), availability=availability) as runner:
        result = runner.run(("default", "autocast_scaler"))
    default, scaler = result["cells"]
    assert default["status"] == "numerical_failure"
    assert default["reason"].startswith("loss is ") and " at step " in default["reason"]
    step = int(default["reason"].rsplit(" ", 1)[1])
    assert 0 < step < spec.steps
    assert scaler["status"] == "ok"  # the scaler skips non-finite steps: not a failure there


def test_publish_weights_moves_files_beside_the_result(tiny_spec: WorkloadSpec, availability: Availability, tmp_path: Path) -> None:
    """Final weights are staged during the run and moved into ``<result>.weights/`` at the end."""
    with MatrixRunner(tiny_spec, ("python",), availability=availability) as runner:
        result = runner.run(("default",))
        runner.publish_weights(result["cells"], tmp_path / "run.weights")
    path = Path(result["cells"][0]["record"]["weights_path"])
    assert path == tmp_path / "run.weights" / "with_autocast-default-python-cpu.safetensors" and path.stat().st_size > 0
