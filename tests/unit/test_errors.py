"""The harness's own errors: a script's error keeps the frontend's words, without libtorch's C++ frames."""

from __future__ import annotations

from harness.errors import ScriptError, without_cpp_frames

#: The shape of R torch's error for an undefined gradient (issue 39's frozen cells): c10::Error's message, where libtorch
#: raised it, then a frame a line (63 of them there, cut to three here).
_R_TORCH_ERROR = (
    "tensor does not have a device\n"
    "Exception raised from device_default at torch/include/c10/core/TensorImpl.h:1303 (most recent call first):\n"
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9d (0x7f5cc4778b8d in libc10.so)\n"
    "frame #1: _lantern_amp_foreach_non_finite_check_and_unscale + 0x88f (0x7f5cc3615cdf in liblantern.so)\n"
    "frame #62: <unknown function> + 0x140e94 (0x7f5ccc740e94 in /usr/lib/R/lib/libR.so)\n"
)


def test_a_scripts_error_keeps_libtorchs_words_and_leaves_its_frames_out() -> None:
    """The message and where libtorch raised it stay, the frames go (counted); a message without frames is as it was."""
    err = ScriptError("r", "cuda_amp_grad_scaler", "autocast_scaler", "preset tiny", _R_TORCH_ERROR)
    assert err.frontend_message == (
        "tensor does not have a device\n"
        "Exception raised from device_default at torch/include/c10/core/TensorImpl.h:1303 (most recent call first):\n"
        "[3 frames of the C++ backtrace left out]"
    )
    assert "frame #" not in str(err) and str(err).endswith("[3 frames of the C++ backtrace left out]")
    assert without_cpp_frames("subscript out of bounds") == "subscript out of bounds"
    assert without_cpp_frames("a line\nanother: frame #2 is named here") == "a line\nanother: frame #2 is named here"
