"""docs/development.md's recipes for a record field and a dtype, followed in a copy of the tree: one declaration in
``harness/contract/`` (plus what the scripts must compute) reaches the run spec, both languages' record writers, the
stored model, its shape check and docs/contract.md. Cheap: no workload runs (the recipes for an optimizer, a mode and a
script pair run one, in tests/integration/test_recipes.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.files.paths import REPO_ROOT
from tests.planting import plant

#: The recipe's example field: a list, so R's writer must keep one element an array.
_FIELD = '    recipe_steps: tuple[int, ...] | None = _f("the steps of the recipe\'s example", since=6, default=None)\n'


def _copy(dest: Path) -> Path:
    for part in ("harness", "py_scripts", "r_scripts", "docs"):
        shutil.copytree(REPO_ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _python(root: Path, code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=os.environ | {"PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _add_record_field(root: Path) -> None:
    """The recipe: one typed, documented field of the record's declaration (the stored record is that class)."""
    end = "cannot prove an entry\", since=5, default=())\n"
    plant(root, "harness/contract/record.py", end, end + _FIELD)


def test_a_record_field_is_one_declaration(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _add_record_field(root)
    out = _python(root, """
import json
from harness.contract.docs import CONTRACT_DOC, with_tables
from harness.contract.record import RECORD_SCHEMA_VERSION
from harness.model.record import RunRecord
from harness.model import shape
from harness.workload.run_spec import run_spec_for
from harness.workload.spec import WorkloadSpec
CONTRACT_DOC.write_text(with_tables(CONTRACT_DOC.read_text()))
run_spec = run_spec_for(WorkloadSpec.from_preset("tiny"), "with_autocast", "sgd", "f", None).to_json()
record = RunRecord.from_json({name: None for name in run_spec["record_fields"]} | {"schema_version": 6, "losses": [1.0],
                              "recipe_steps": [3], "switches": []})
print(json.dumps({"version": RECORD_SCHEMA_VERSION, "kind": run_spec["record_fields"]["recipe_steps"],
                  "typed": list(record.recipe_steps), "extra": list(record.extra), "stored": record.to_json()["recipe_steps"],
                  "checked": "recipe_steps" in shape._dataclass(RunRecord).fields, "run_spec": run_spec}))
""")
    found = json.loads(out)
    assert (found["version"], found["kind"], found["typed"], found["extra"], found["stored"], found["checked"]) == (
        6, "list of ints", [3], [], [3], True)
    assert "| `recipe_steps` | list[int] | 6 |" in (root / "docs/contract.md").read_text()
    if shutil.which("Rscript") is None:
        pytest.skip("R is not installed here: R's record writer is not checked")
    fields = ", ".join(f"{name} = NULL" for name in found["run_spec"]["record_fields"]
                       if name not in ("frontend", "torch_version", "libtorch_version", "language_version", "clock",
                                       "schema_version", "seconds_workload", "recipe_steps"))
    code = (f'source("r_scripts/_bootstrap.R"); static_fields <- function() list(frontend = "r", torch_version = "0", '
            f'libtorch_version = NULL, language_version = "R", clock = "c"); '
            f'spec <- jsonlite::fromJSON({json.dumps(json.dumps(found["run_spec"]))}); '
            f'cat(record_to_json(make_record(spec, clock(), {fields}, recipe_steps = 3L)))')
    done = subprocess.run(["Rscript", "-e", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["recipe_steps"] == [3]  # an array of one: R read the kind from the run spec


def test_a_dtype_is_one_declaration(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    plant(root, "harness/contract/dtypes.py", '    DType("int64", "Long", "<i8"),\n',
          '    DType("int64", "Long", "<i8"),\n    DType("int16", "Short", "<i2"),\n')
    out = _python(root, """
import json
import numpy as np
from harness.contract.docs import CONTRACT_DOC, with_tables
from harness.worker_side.tensor_bytes import decode
from harness.workload.run_spec import run_spec_for
from harness.workload.spec import WorkloadSpec
CONTRACT_DOC.write_text(with_tables(CONTRACT_DOC.read_text()))
run_spec = run_spec_for(WorkloadSpec.from_preset("tiny"), "with_autocast", "sgd", "f", None).to_json()
print(json.dumps({"spec": run_spec["dtypes"]["int16"], "decoded": decode("int16", np.array([-2, 7], "<i2").tobytes()).tolist(),
                  "run_spec": run_spec}))
""")
    found = json.loads(out)
    assert found["spec"] == {"libtorch": "Short"} and found["decoded"] == [-2, 7]
    assert "| `int16` | `Short` | `<i2` |" in (root / "docs/contract.md").read_text()
    if shutil.which("Rscript") is None:
        pytest.skip("R is not installed here: R's dtype names are not checked")
    # dtype_name() reads as.character(dtype): libtorch's name, which a string stands in for here (no torch needed)
    code = (f'source("r_scripts/_bootstrap.R"); spec <- jsonlite::fromJSON({json.dumps(json.dumps(found["run_spec"]))}); '
            'cat(dtype_name("Short", spec))')
    done = subprocess.run(["Rscript", "-e", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "int16", done.stderr[-3000:]
