"""Every preset's fixture is still the committed one: a NumPy or generator change that moves a tensor fails here.

The manifests under ``fixtures/manifests/`` hold each tensor's SHA-256 (``tests/fixture_manifests.py``
writes them). ``tiny`` and ``bench`` are built afresh (well under a second each) and compared whole.
``recipe``'s fixture is 1 GB and takes 30 s and more to build on 2 cores, so the default suite checks
what it can have cheaply: its spec digest and fields, and its first two tensors in draw order
(``layer0.weight``, 4096 × 4096 values, and ``layer0.bias``), drawn lazily by the harness's own
generator, so the uniform draws at recipe's size are checked for real. Its data and targets come from
the same ``standard_normal`` draws that ``tiny`` and ``bench`` check whole; the whole ``recipe`` build is
compared by ``test_recipe_fixture_whole`` under ``--run-slow``.
"""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import pytest

from harness.workload.fixtures import FIXTURE_SCHEMA_VERSION, iter_fixture_arrays, tensor_sha256
from harness.workload.spec import FIXTURE_FIELDS, PRESETS, WorkloadSpec
from tests.fixture_manifests import MANIFESTS_DIR, REGENERATE, built_manifest, committed_manifest, manifest_differences, tensor_differences


def test_every_preset_has_a_committed_manifest() -> None:
    """One manifest per preset, no stale ones, each for the fixture schema this harness writes."""
    assert sorted(p.stem for p in MANIFESTS_DIR.glob("*.json")) == sorted(PRESETS)
    for preset in PRESETS:
        manifest = committed_manifest(preset)
        assert manifest["schema_version"] == FIXTURE_SCHEMA_VERSION
        assert sorted(manifest["tensor_sha256"]) == sorted(manifest["tensors"])


@pytest.mark.parametrize("preset", ["tiny", "bench"])
def test_fixture_built_afresh_matches_its_committed_manifest(preset: str, tmp_path: Path) -> None:
    """The preset's fixture, built in an empty cache, has the committed digest, fields, shapes and per-tensor checksums."""
    built = built_manifest(preset, tmp_path)
    problems = manifest_differences(preset, committed_manifest(preset), built)
    assert not problems, "\n".join(problems)
    assert built["sha256"] == committed_manifest(preset)["sha256"]  # same safetensors too: the very same file


def test_recipe_spec_and_first_tensors_match_its_committed_manifest() -> None:
    """``recipe``'s digest and fields, and its first two tensors drawn by the harness's generator, match the manifest."""
    spec = WorkloadSpec.from_preset("recipe")
    committed = committed_manifest("recipe")
    assert committed["digest"] == spec.digest(FIXTURE_FIELDS)
    assert committed["fields"] == spec.fixture_fields()
    first = dict(itertools.islice(iter_fixture_arrays(spec), 2))
    assert list(first) == ["layer0.weight", "layer0.bias"]
    assert [list(a.shape) for a in first.values()] == [committed["tensors"][name] for name in first]
    problems = tensor_differences(committed, {name: tensor_sha256(a) for name, a in first.items()})
    assert not problems, "\n".join(problems)


@pytest.mark.slow("the whole recipe fixture: a gigabyte, a minute")
def test_recipe_fixture_whole(tmp_path: Path) -> None:
    """The whole ``recipe`` fixture (1 GB), built afresh, matches its committed manifest tensor by tensor."""
    problems = manifest_differences("recipe", committed_manifest("recipe"), built_manifest("recipe", tmp_path))
    assert not problems, "\n".join(problems)


def test_a_changed_tensor_is_named_with_what_to_do() -> None:
    """A manifest whose one tensor moved fails with a message naming that tensor, the NumPy versions and the command."""
    committed = committed_manifest("tiny")
    moved = copy.deepcopy(committed) | {"numpy_version": "9.9"}
    moved["tensor_sha256"]["targets"] = "0" * 64
    problems = manifest_differences("tiny", committed, moved)
    assert problems[0] == "tiny's fixture is no longer the committed one (fixtures/manifests/tiny.json):"
    assert problems[1] == (
        f"tensor 'targets' has other values than the committed manifest says (committed with NumPy {committed['numpy_version']}, "
        f"now 9.9): sha256 {committed['tensor_sha256']['targets']} → {'0' * 64}"
    )
    assert len(problems) == 3 and f"`{REGENERATE}`" in problems[2]
    assert manifest_differences("tiny", committed, json.loads(json.dumps(committed))) == []


def test_a_changed_field_or_shape_is_named() -> None:
    """A manifest drawn for another spec names the field that differs, before any tensor."""
    committed = committed_manifest("tiny")
    other = copy.deepcopy(committed)
    other["tensors"]["data"] = [10, 32, 64]
    assert manifest_differences("tiny", committed, other)[1] == (
        f"tensors: committed {committed['tensors']!r}, now {other['tensors']!r}"
    )
