"""The trace recorder both workers share: each point digested with the hash it names, values decoded, kept points whole."""

from __future__ import annotations

import numpy as np

from harness.model.cell_trace import DIGESTS
from harness.worker_side.trace_recorder import POINT_DIGEST, TraceRecorder

#: BLAKE3's published digest of the three bytes "abc" (the reference implementation's test vectors): the recorder's
#: digests are BLAKE3's, not merely some function of the bytes that the parent might compare with another's.
_ABC_BLAKE3 = "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"


def test_each_point_is_the_named_hash_of_its_bytes() -> None:
    """A point's digest is the BLAKE3 of its bytes (a buffer: numpy, as both handlers pass), and the reply names the hash,
    one the stored trace knows."""
    recorder = TraceRecorder()
    assert recorder.record(0, "batch.data", "uint8", [3], np.frombuffer(b"abc", dtype=np.uint8)) is False
    reply = recorder.reply({"schema_version": 1})
    assert reply["points"] == [[0, "batch.data", "uint8", [3], _ABC_BLAKE3, None]]
    assert reply["digest"] == POINT_DIGEST == "blake3" and POINT_DIGEST in DIGESTS


def test_one_element_points_carry_their_value_and_kept_points_their_bytes() -> None:
    """A loss keeps its number (facts such as clipping are read from it); a kept point travels whole, and the recorder
    says stop once every kept point is in (only when asked to stop)."""
    loss = np.array([1.25], dtype=np.float32)
    weight = np.arange(4, dtype=np.float32)
    recorder = TraceRecorder(keep=[[1, "param.layer0.weight"]])
    assert recorder.record(0, "loss", "float32", [], loss.view(np.uint8)) is False
    assert recorder.record(1, "param.layer0.weight", "float32", [2, 2], weight.view(np.uint8)) is True
    reply = recorder.reply(None)
    assert reply["points"][0][5] == 1.25 and reply["points"][1][5] is None
    assert reply["kept"] == {"1:param.layer0.weight": {"dtype": "float32", "shape": [2, 2], "data": weight.tobytes()}}
    running = TraceRecorder(keep=[[0, "loss"]], stop=False)
    assert running.record(0, "loss", "float32", [], loss.view(np.uint8)) is False
