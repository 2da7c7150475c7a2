"""Stand-in handlers for the Python worker tests: each misbehaves in one precise way."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any


class CrashHandler:
    """Segfaults on request, as a native-code crash would; echoes otherwise."""

    def __call__(self, request: dict[str, Any]) -> Any:
        if request.get("crash"):
            os.kill(os.getpid(), signal.SIGSEGV)
        if request.get("hang"):
            time.sleep(3600)
        if request.get("sleep_s"):
            time.sleep(request["sleep_s"])
        if request.get("fail"):
            raise ValueError("deliberate failure in CrashHandler")
        if request.get("allocate_mib"):
            block = bytearray(request["allocate_mib"] * 2**20)
            block[::4096] = b"\x01" * len(range(0, len(block), 4096))  # touch every page: make it resident
            del block
        return {"echo": request.get("value"), "torch_loaded": "torch" in sys.modules}


class BrokenStartHandler:
    """Fails while starting, as a frontend whose import fails would."""

    def __init__(self) -> None:
        raise ImportError("no module named 'imaginary_frontend'")


class FailOnceStartHandler:
    """Fails its first start (while the file ``AMP_PARITY_TEST_FAIL_ONCE`` names exists: it removes it), then echoes."""

    def __init__(self) -> None:
        flag = os.environ.get("AMP_PARITY_TEST_FAIL_ONCE", "")
        if flag and os.path.exists(flag):
            os.remove(flag)
            raise ImportError("a start that fails once")

    def __call__(self, request: dict[str, Any]) -> Any:
        return {"echo": request.get("value")}


class EnvHandler:
    """Answers with the value of an environment variable in the worker."""

    def __call__(self, request: dict[str, Any]) -> Any:
        return os.environ.get(request["name"])


class PidHandler:
    """Answers with its process id, or hangs (``hang``): for the tests that a stopped worker leaves no process behind."""

    def __call__(self, request: dict[str, Any]) -> Any:
        if request.get("hang"):
            time.sleep(3600)
        return os.getpid()


class WarnThenFailHandler:
    """Logs a warning (as R echoes its error to the console), then fails: the parent shows one error, not a WARNING too."""

    def __call__(self, request: dict[str, Any]) -> Any:
        import logging

        logging.getLogger("harness.r").warning("Error in loadNamespace(x) : there is no package called 'torch'")
        raise ValueError("there is no package called 'torch'")
