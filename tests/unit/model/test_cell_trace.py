"""A cell's stored trace: written and read back exactly, and refused when it is not the one its result recorded."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from safetensors.numpy import load_file, save_file

from harness.errors import ResultError
from harness.model.cell_trace import DIGEST_HEX, CellTrace, TraceFile, file_sha256

POINTS = [
    [0, "batch.data", "float32", [32, 128], "ab" * 32, None],
    [0, "loss", "float32", [], "cd" * 32, 1.0187934637069702],
    [0, "optim.step.layer0.weight", "int64", [], "ef" * 32, 1.0],
    [1, "clip.coef", "float32", [1], "01" * 32, 0.8527587652206421],
]


def _trace(points: list[list[object]], digest: str = "blake3") -> CellTrace:
    return CellTrace.from_reply({"points": points, "digest": digest})


def _rewrite_metadata(path: Path, **changes: str | None) -> None:
    """The file at ``path`` with its safetensors metadata changed (None removes a key): what another writer made."""
    with path.open("rb") as handle:
        metadata = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))["__metadata__"]
    metadata = {k: v for k, v in {**metadata, **changes}.items() if v is not None}
    save_file(load_file(str(path)), str(path), metadata=metadata)


def test_a_trace_reads_back_as_it_was_written(tmp_path: Path) -> None:
    """Every point (step, name, dtype, shape, 128-bit digest, value), the switches and a kept tensor survive the file."""
    kept = {"1:clip.coef": {"dtype": "float32", "shape": [1], "data": b"\x01\x02\x03\x04"}}
    trace = CellTrace.from_reply({"points": POINTS, "digest": "blake3", "kept": kept}, ("r-clip-coef-reciprocal",))
    stored = trace.write(tmp_path / "c.trace.safetensors")
    assert stored.points == 4 and stored.switches == ("r-clip-coef-reciprocal",)
    again = CellTrace.read(stored)
    assert again == trace and again.digest == "blake3"
    assert again.points[0][4] == "ab" * (DIGEST_HEX // 2) and again.points[1][5] == 1.0187934637069702
    assert again.points[3][3] == (1,) and again.kept["1:clip.coef"]["data"] == b"\x01\x02\x03\x04"


def test_a_replaced_trace_file_is_refused(tmp_path: Path) -> None:
    """A trace file that is not the one the result recorded (another SHA-256) is refused, naming the file."""
    stored = _trace(POINTS).write(tmp_path / "a.trace.safetensors")
    _trace(POINTS[:2]).write(tmp_path / "a.trace.safetensors")  # replaced after the run
    with pytest.raises(ResultError, match="a.trace.safetensors is not the one its result recorded"):
        CellTrace.read(stored)


def test_a_trace_whose_count_the_result_contradicts_is_refused(tmp_path: Path) -> None:
    """A result that says a trace holds other than its points (edited by hand) is refused as malformed."""
    stored = _trace(POINTS).write(tmp_path / "b.trace.safetensors")
    with pytest.raises(ResultError, match="holds 4 points, its result says 9"):
        CellTrace.read(dataclasses.replace(stored, points=9))


def test_a_missing_trace_file_is_one_line(tmp_path: Path) -> None:
    """A trace file that is gone is named, with what to do."""
    with pytest.raises(ResultError, match="cannot read the cell trace .*gone.trace.safetensors"):
        CellTrace.read(TraceFile(str(tmp_path / "gone.trace.safetensors"), "0" * 64, 1))


def test_a_trace_from_before_the_hash_was_named_reads_as_sha256(tmp_path: Path) -> None:
    """A format-1 file (written when every point was SHA-256's, with no hash in its metadata) reads back as SHA-256's, so
    it is never compared with a BLAKE3 trace as if equal bytes could give equal digests."""
    path = tmp_path / "old.trace.safetensors"
    _trace(POINTS).write(path)
    _rewrite_metadata(path, format="amp-parity cell trace 1", digest=None)
    stored = TraceFile(str(path), file_sha256(path), len(POINTS))
    old = CellTrace.read(stored)
    assert old.digest == "sha256" and old.points == _trace(POINTS).points


@pytest.mark.parametrize("digest", ["md5", None], ids=["unknown-hash", "no-hash"])
def test_a_trace_naming_no_known_hash_is_refused(tmp_path: Path, digest: str | None) -> None:
    """A format-2 file whose points' hash is missing or unknown is malformed: its digests cannot be compared with anyone's."""
    path = tmp_path / "odd.trace.safetensors"
    _trace(POINTS).write(path)
    _rewrite_metadata(path, digest=digest)
    with pytest.raises(ResultError, match=r"odd.trace.safetensors is malformed .*hash is .*not one of blake3, sha256"):
        CellTrace.read(TraceFile(str(path), file_sha256(path), len(POINTS)))


def test_traces_hashed_differently_are_not_comparable() -> None:
    """Equal digest strings under two hashes say nothing: two traces are comparable only when one hash made both."""
    assert CellTrace.comparable(_trace(POINTS), _trace(POINTS)) is None
    why = CellTrace.comparable(_trace(POINTS), _trace(POINTS, "sha256"))
    assert why is not None and "blake3 and sha256" in why and "re-run" in why


def test_a_difference_whose_tensors_were_not_kept_never_reads_none() -> None:
    """Issue 37 (12): a first difference measured from digests only (no kept tensors) says so, never "None of None
    elements differ"."""
    from harness.model.pair_trace import PointDifference

    line = PointDifference(19, "record.weights.layer0.weight", "bytes", ("float32", "float32"), ((128, 128), (128, 128))).describe(
        ("python", "r"))
    assert "None" not in line and line == ("step 19, record.weights.layer0.weight (float32 128×128): the bytes differ (the tensors "
                                           "were not kept, so how far is not measured)")


def test_a_trace_at_the_limit_reads_back_and_one_over_it_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48 (3): the writer holds to the reader's limit. A trace of exactly ``MAX_POINTS`` points is written and read; one
    point more is refused before a byte is written (a long run wrote 2,100,008 points its reader then refused, saying "it
    holds 2100008 points, its result says 2100008"), and a file over the limit is refused in words that say so."""
    monkeypatch.setattr("harness.model.cell_trace.MAX_POINTS", 4)
    stored = _trace(POINTS).write(tmp_path / "a.trace.safetensors")
    assert CellTrace.read(stored).points == _trace(POINTS).points
    longer = _trace([*POINTS, [1, "loss", "float32", [], "cd" * 32, 0.5]])
    assert longer.too_long() == "it holds 5 points, over the 4 a trace may hold"
    with pytest.raises(ValueError, match=r"cannot write the trace .*b\.trace\.safetensors: it holds 5 points, over the 4"):
        longer.write(tmp_path / "b.trace.safetensors")
    assert not (tmp_path / "b.trace.safetensors").exists()
    monkeypatch.setattr("harness.model.cell_trace.MAX_POINTS", 3)
    with pytest.raises(ResultError, match=r"is malformed \(ValueError: it holds 4 points, over the 3 a trace may hold\)"):
        CellTrace.read(stored)
