"""The committed fixture manifests (``fixtures/manifests/<preset>.json``): where they live, how they are
written, and how a regenerated fixture is compared with them.

Write them again (only when a change of the fixtures is intended, e.g. a new generator):
``python3 -m tests.fixture_manifests`` (about a minute: ``recipe``'s fixture is 1 GB; it is built in a
temporary folder and removed).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.files.paths import REPO_ROOT
from harness.workload.fixtures import ensure_fixtures
from harness.workload.spec import PRESETS, WorkloadSpec

__all__ = ["MANIFESTS_DIR", "REGENERATE", "built_manifest", "committed_manifest", "manifest_differences", "tensor_differences"]

MANIFESTS_DIR = REPO_ROOT / "fixtures" / "manifests"
REGENERATE = "python3 -m tests.fixture_manifests"
#: What decides the tensors: the spec fields, and each tensor's shape and values. The file's own
#: checksum and size, and the NumPy version that drew it, are kept for information only: a new
#: safetensors that writes the same values differently, or a new NumPy that draws the same values,
#: changes nothing a frontend reads.
_DECIDING = ("digest", "fields", "tensors")


def committed_manifest(preset: str) -> dict[str, Any]:
    """The manifest committed for ``preset``."""
    data: dict[str, Any] = json.loads((MANIFESTS_DIR / f"{preset}.json").read_text(encoding="utf-8"))
    return data


def built_manifest(preset: str, cache: Path) -> dict[str, Any]:
    """The manifest ``harness.workload.fixtures`` writes when it builds ``preset``'s fixture afresh in ``cache``."""
    fixture = ensure_fixtures(WorkloadSpec.from_preset(preset), cache)
    data: dict[str, Any] = json.loads((fixture.path.parent / "manifest.json").read_text(encoding="utf-8"))
    return data


def manifest_differences(preset: str, committed: dict[str, Any], built: dict[str, Any]) -> list[str]:
    """One line per difference that changes what the frontends read, naming the field or tensor, then what to do."""
    lines = [
        f"{key}: committed {committed.get(key)!r}, now {built.get(key)!r}" for key in _DECIDING if committed.get(key) != built.get(key)
    ]
    lines += tensor_differences(committed, built.get("tensor_sha256", {}), numpy_version=built.get("numpy_version"))
    return _with_fix(preset, lines)


def tensor_differences(committed: dict[str, Any], checksums: dict[str, str], numpy_version: object = None) -> list[str]:
    """A line per tensor in ``checksums`` whose values differ from the committed manifest's checksum of it."""
    expected: dict[str, str] = committed.get("tensor_sha256", {})
    drawn = f" (committed with NumPy {committed.get('numpy_version')}, now {numpy_version})" if numpy_version else ""
    return [
        f"tensor {name!r} has other values than the committed manifest says{drawn}: sha256 {expected.get(name)} → {sha}"
        for name, sha in checksums.items() if expected.get(name) != sha
    ]


def _with_fix(preset: str, lines: list[str]) -> list[str]:
    if not lines:
        return []
    return [
        f"{preset}'s fixture is no longer the committed one (fixtures/manifests/{preset}.json):", *lines,
        "Both frontends and every stored result were drawn from the committed tensors. If the change is intended "
        f"(a new generator, a new NumPy that draws other values), write the manifests again with `{REGENERATE}` and "
        "say why in the commit; otherwise find what changed the draw.",
    ]


def main() -> None:
    """Build every preset's fixture in a temporary folder and write its manifest under ``fixtures/manifests/``."""
    MANIFESTS_DIR.mkdir(parents=True, exist_ok=True)
    for preset in PRESETS:
        with tempfile.TemporaryDirectory(prefix="amp-parity-manifest-") as cache:
            manifest = built_manifest(preset, Path(cache))
        (MANIFESTS_DIR / f"{preset}.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {MANIFESTS_DIR / f'{preset}.json'}", file=sys.stderr)


if __name__ == "__main__":
    main()
