"""One codec for the stored model (issue 45): every committed result reads back byte for byte, and a stored type's JSON
form and shape check both come from its declaration, with no hand-written ``to_json``/``from_json`` beside it."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pkgutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import harness.model
from harness.errors import ResultError
from harness.files.atomic import write_json_atomic
from harness.files.paths import REPO_ROOT
from harness.model.codec import Stored, codec, decode, encode
from harness.model.record import RunRecord
from harness.model.result import RESULT_SCHEMA_VERSION, MatrixResult
from harness.model.shape import check_shape
from harness.store import result_file

#: Every committed result: the golden test data and the measurements under docs/results/.
COMMITTED = [REPO_ROOT / "tests" / "data" / "golden.json", *sorted((REPO_ROOT / "docs" / "results").glob("*/*.json"))]


def _saved(data: Mapping[str, Any], tmp_path: Path) -> bytes:
    """``data`` read into the model and written as :func:`harness.store.result_file.save_result` writes a file."""
    path = tmp_path / "saved.json"
    path.unlink(missing_ok=True)
    write_json_atomic(path, MatrixResult.from_json(data).to_json())
    return path.read_bytes()


def _upgraded(path: Path) -> dict[str, Any]:
    """A committed file as this schema reads it: through the numbered upgrade steps, as ``load_result`` upgrades it."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for step in range(data["schema_version"], RESULT_SCHEMA_VERSION):
        data = result_file._UPDATES[step](data, path)
    return data


def _kept(stored: Any, saved: Any, where: str = "") -> str | None:
    """Where ``saved`` lost or changed a value ``stored`` has (``None``: every value is kept; ``saved`` may add fields)."""
    if isinstance(stored, dict):
        if not isinstance(saved, dict):
            return where
        return next((w for k, v in stored.items() if (w := _kept(v, saved.get(k, KeyError), f"{where}.{k}")) is not None), None)
    if isinstance(stored, list):
        if not isinstance(saved, list) or len(saved) != len(stored):
            return where
        return next((w for k, v in enumerate(stored) if (w := _kept(v, saved[k], f"{where}[{k}]")) is not None), None)
    same = stored == saved or (stored != stored and saved != saved)  # NaN is kept as NaN
    return None if same and type(stored) is type(saved) else where


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_committed_result_reads_back_byte_for_byte(path: Path, tmp_path: Path) -> None:
    """A committed result of this schema read into the model and saved again is the same file, byte for byte. One of an
    older schema is upgraded by its numbered steps; the model keeps every value the upgraded file holds (adding the fields
    the model has defaults for), and what it saves reads back byte for byte from then on."""
    text = path.read_bytes()
    upgraded = _upgraded(path)
    saved = _saved(upgraded, tmp_path)
    if json.loads(text)["schema_version"] == RESULT_SCHEMA_VERSION:
        assert saved == text
    else:
        assert _kept(upgraded, json.loads(saved)) is None
    assert _saved(json.loads(saved), tmp_path) == saved


def test_a_changed_value_is_not_a_byte_for_byte_read() -> None:
    """The comparison above can fail: an integer stored again as a float (R's ``gc_seconds`` 0), a value lost, a NaN kept."""
    assert _kept({"a": 0}, {"a": 0.0}) == ".a" and _kept({"a": [1, 2]}, {"a": [1]}) == ".a"
    assert _kept({"a": {"b": 1}}, {"a": {}}) == ".a.b" and _kept({"a": float("nan")}, {"a": float("nan"), "c": 1}) is None


def _own_codec(kind: type) -> list[str]:
    return [name for name in ("to_json", "from_json") if name in vars(kind)]


def test_no_stored_type_writes_its_json_form_by_hand() -> None:
    """Every dataclass of the model that is stored inherits the codec, and none but :class:`MatrixResult` (whose
    ``from_json`` checks the file's shape and version first) defines a ``to_json`` or ``from_json`` of its own."""
    hand_written = {}
    for module_info in pkgutil.iter_modules(harness.model.__path__):
        module = importlib.import_module(f"harness.model.{module_info.name}")
        for name, kind in inspect.getmembers(module, inspect.isclass):
            if kind.__module__ == module.__name__ and dataclasses.is_dataclass(kind) and _own_codec(kind):
                hand_written[name] = _own_codec(kind)
    assert hand_written == {"MatrixResult": ["from_json"]}


def test_the_record_is_the_contracts_declaration() -> None:
    """The run record's fields are the contract's (harness/contract/record.py), declared once: the model adds only the
    fields a script did not write."""
    from harness.contract.record import RECORD_FIELD_NAMES, RecordFields

    names = [f.name for f in dataclasses.fields(RunRecord)]
    assert issubclass(RunRecord, RecordFields) and names == [*RECORD_FIELD_NAMES, "extra"]


@dataclasses.dataclass(frozen=True)
class _Toy(Stored):
    """A toy stored type."""

    name: str
    sizes: tuple[int, ...]
    #: Added at version 2: one line, its default what older data meant.
    scale: float = dataclasses.field(default=1.0, metadata=codec(since=2))
    note: str | None = dataclasses.field(default=None, metadata=codec(omit=lambda toy: toy.note is None))


@dataclasses.dataclass(frozen=True)
class _ToyResult(Stored):
    """A toy result."""

    toys: tuple[_Toy, ...]


def test_a_field_added_is_one_line_in_the_json_form_and_in_the_shape_check() -> None:
    """A stored field is declared once: its JSON form (an older object lacks it: its default) and its check both follow."""
    toy = _Toy("a", (1, 2), 0.5)
    assert encode(toy) == {"name": "a", "sizes": [1, 2], "scale": 0.5} and _Toy.from_json(encode(toy)) == toy
    assert decode(_Toy, {"name": "a", "sizes": [1]}) == _Toy("a", (1,))  # older data: the default
    check_shape(_ToyResult, {"toys": [{"name": "a", "sizes": [1], "scale": 2}]}, "t.json")
    with pytest.raises(ResultError, match=r"t.json .*: toys\[0\].scale must be a number, but got 'big'"):
        check_shape(_ToyResult, {"toys": [{"name": "a", "sizes": [1], "scale": "big"}]}, "t.json")
    with pytest.raises(ResultError, match=r"toys\[0\].sizes must be a list of whole numbers, but it is missing"):
        check_shape(_ToyResult, {"toys": [{"name": "a"}]}, "t.json")


def test_an_unknown_codec_option_is_refused() -> None:
    """A misspelt option would be ignored silently."""
    with pytest.raises(TypeError, match="unknown codec options: sinse"):
        codec(sinse=3)
