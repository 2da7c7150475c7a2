"""The final weights' digest: equal for the same tensors however the file was written, different for any changed bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from harness.judge.weight_findings import weights_digest

WEIGHTS = {"0.weight": np.arange(6, dtype=np.float32).reshape(2, 3), "0.bias": np.array([0.5, -0.25], dtype=np.float32)}


def written(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> Path:
    """``tensors`` saved as safetensors at ``path``."""
    save_file(tensors, str(path), metadata=metadata)
    return path


def test_the_same_tensors_digest_alike_whatever_the_order_and_metadata(tmp_path: Path) -> None:
    """Insertion order and header metadata do not count: the digest is over the tensors."""
    a = weights_digest(written(tmp_path / "a.safetensors", WEIGHTS))
    b = weights_digest(written(tmp_path / "b.safetensors", dict(reversed(WEIGHTS.items())), {"writer": "R"}))
    assert a == b and len(a) == 64


@pytest.mark.parametrize("change", ["one-ulp", "dtype", "shape", "name"])
def test_any_change_to_a_tensor_changes_the_digest(tmp_path: Path, change: str) -> None:
    """One ULP of one element, a dtype, a shape or a name each give another digest."""
    changed = dict(WEIGHTS)
    if change == "one-ulp":
        changed["0.bias"] = np.nextafter(WEIGHTS["0.bias"], np.float32(1))
    elif change == "dtype":
        changed["0.bias"] = WEIGHTS["0.bias"].astype(np.float64)
    elif change == "shape":
        changed["0.weight"] = WEIGHTS["0.weight"].reshape(3, 2)
    else:
        changed["1.bias"] = changed.pop("0.bias")
    assert weights_digest(written(tmp_path / "a.safetensors", WEIGHTS)) != weights_digest(written(tmp_path / "b.safetensors", changed))


def test_an_unreadable_file_is_one_line_naming_it(tmp_path: Path) -> None:
    """A file that is not safetensors raises a ValueError with its path and the reader's own message."""
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not safetensors")
    with pytest.raises(ValueError, match=f"cannot digest the weights in {bad}: ") as caught:
        weights_digest(bad)
    assert "\n" not in str(caught.value)
