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


def _point(value: float) -> np.ndarray:
    return np.array([value], dtype=np.float32).view(np.uint8)


def _digest(value: float) -> str:
    recorder = TraceRecorder()
    recorder.record(0, "x", "float32", [], _point(value))
    return str(recorder.reply(None)["points"][0][4])


def test_a_compared_run_is_cut_after_the_step_where_it_parts_keeping_the_triggers_points() -> None:
    """Against another run's points (digests as a stored trace keeps them, 32 hex digits), the recorder keeps every point
    through the end of the step where the runs part, then only the points named to keep; the reply says where it cut."""
    against = [[0, "loss", "float32", _digest(1.0)[:32]], [0, "clip.coef", "float32", _digest(0.5)[:32]],
               [1, "loss", "float32", _digest(2.0)[:32]], [1, "clip.coef", "float32", _digest(0.5)[:32]],
               [2, "loss", "float32", _digest(3.0)[:32]], [2, "clip.coef", "float32", _digest(0.5)[:32]]]
    recorder = TraceRecorder(stop=False, against=against, kept_after_cut=["clip.coef"])
    for step, (loss, coef) in enumerate([(1.0, 0.5), (2.5, 0.5), (3.0, 0.25)]):
        for name, value in (("loss", loss), ("clip.coef", coef)):
            assert recorder.keeps(step, name) is (step <= 1 or name == "clip.coef")
            recorder.record(step, name, "float32", [], _point(value))
    reply = recorder.reply(None)
    assert [(p[0], p[1]) for p in reply["points"]] == [(0, "loss"), (0, "clip.coef"), (1, "loss"), (1, "clip.coef"), (2, "clip.coef")]
    assert reply["cut"] == recorder.parted == 1
    assert reply["points"][-1][5] == 0.25  # a kept point after the cut is whole: the triggers read its value


def test_a_run_that_never_parts_is_never_cut_and_a_missing_point_is_a_part() -> None:
    """Equal runs keep every point (no cut); a run with a point the other lacks parts there, as find_divergence says."""
    against = [[0, "loss", "float32", _digest(1.0)[:32]]]
    same = TraceRecorder(stop=False, against=against, kept_after_cut=())
    same.record(0, "loss", "float32", [], _point(1.0))
    assert same.reply(None)["cut"] is None and same.keeps(5, "loss")
    longer = TraceRecorder(stop=False, against=against, kept_after_cut=())
    longer.record(0, "loss", "float32", [], _point(1.0))
    longer.record(0, "extra", "float32", [], _point(1.0))
    assert longer.parted == 0 and not longer.keeps(1, "loss")
    renamed = TraceRecorder(stop=False, against=against, kept_after_cut=())
    renamed.record(0, "loss", "float64", [], np.array([1.0]).view(np.uint8))  # same step and name, another dtype
    assert renamed.parted == 0
    uncompared = TraceRecorder(stop=False)
    uncompared.record(0, "loss", "float32", [], _point(9.0))
    assert uncompared.parted is None and uncompared.reply(None)["cut"] is None


def test_a_compared_run_keeps_the_tensor_it_parts_at() -> None:
    """The tensor where the run parts from the compared one (same point, other bytes) travels whole, so that side needs no
    second pass; a one-element point is not kept (its value is in the trace), nor a point the other run lacks."""
    mine, theirs = np.array([1.0, 2.0], dtype=np.float32), np.array([1.0, 2.5], dtype=np.float32)
    recorder = TraceRecorder(stop=False, against=[[0, "forward.layer0", "float32", _digest_of(theirs)[:32]]])
    assert recorder.record(0, "forward.layer0", "float32", [2], mine.view(np.uint8)) is False
    assert recorder.reply(None)["kept"] == {"0:forward.layer0": {"dtype": "float32", "shape": [2], "data": mine.tobytes()}}
    scalar = TraceRecorder(stop=False, against=[[0, "loss", "float32", _digest(2.0)[:32]]])
    scalar.record(0, "loss", "float32", [], _point(1.0))
    extra = TraceRecorder(stop=False, against=[])
    extra.record(0, "forward.layer0", "float32", [2], mine.view(np.uint8))
    assert scalar.parted == extra.parted == 0 and scalar.kept == extra.kept == {}


def _digest_of(array: np.ndarray) -> str:
    recorder = TraceRecorder()
    recorder.record(0, "x", str(array.dtype), list(array.shape), array.view(np.uint8))
    return str(recorder.reply(None)["points"][0][4])
