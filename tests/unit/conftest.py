"""Unit tests start no process: one that does fails, in one line saying it belongs in ``tests/integration/``.

While a test under ``tests/unit/`` is set up and runs, every way Python starts a process is refused:
``subprocess`` (``Popen``, so ``run`` and ``check_output`` too), ``multiprocessing`` (a ``Process``, the
resource tracker), ``os.fork``, ``os.forkpty``, ``os.posix_spawn(p)`` and ``os.system``. The refusal wraps the
setup phase, not only the test's body, so a module- or session-scoped fixture the test pulls in is held to it
too (a function-scoped autouse fixture would be set up after those). A start refused in another thread
(which pytest would only warn about) still fails the test once it returns.

The session fixtures of ``tests/conftest.py`` that start processes are replaced here by ones that fail at
once: a session fixture is built once per process, so the first test to ask for it would be caught and
the next one, on the same xdist worker, would not.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import multiprocessing.process
import os
import subprocess
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

#: The integration tests' folder, named in every refusal.
INTEGRATION = "tests/integration/"

#: Each way of starting a process: the object that holds it, the attribute replaced while a unit test runs, its name.
STARTERS: tuple[tuple[Any, str, str], ...] = (
    (subprocess.Popen, "__init__", "subprocess.Popen"),
    (multiprocessing.process.BaseProcess, "start", "multiprocessing Process.start"),
    (_posixsubprocess, "fork_exec", "_posixsubprocess.fork_exec"),  # multiprocessing's spawn and resource tracker
    (os, "fork", "os.fork"),
    (os, "forkpty", "os.forkpty"),
    (os, "posix_spawn", "os.posix_spawn"),
    (os, "posix_spawnp", "os.posix_spawnp"),
    (os, "system", "os.system"),
)


def _short(word: object) -> str:
    text = str(word)
    return text if len(text) <= 40 else text[:37] + "..."


def _command(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """What was about to start, short: the command line's first words, where there is one."""
    if name == "subprocess.Popen":
        argv = args[1] if len(args) > 1 else kwargs.get("args")
    elif name in ("os.posix_spawn", "os.posix_spawnp"):
        argv = args[1] if len(args) > 1 else None
    elif name == "os.system":
        argv = args[0] if args else None
    else:
        argv = None
    if isinstance(argv, (list, tuple)):
        return repr([_short(a) for a in argv[:3]] + (["..."] if len(argv) > 3 else []))
    return "" if argv is None else repr(_short(argv))


def _refusal(name: str, refused: list[tuple[str, int]]) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        line = f"{name}({_command(name, args, kwargs)}) started a process in a unit test: this test belongs in {INTEGRATION}"
        refused.append((line, threading.get_ident()))
        pytest.fail(line, pytrace=False)

    return refuse


@contextlib.contextmanager
def refusing_processes() -> Iterator[list[tuple[str, int]]]:
    """Inside, every process start fails the test; yields what was refused (the line and the refusing thread)."""
    refused: list[tuple[str, int]] = []
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in STARTERS if hasattr(owner, attr)]
    for owner, attr, name in STARTERS:
        if hasattr(owner, attr):
            setattr(owner, attr, _refusal(name, refused))
    try:
        yield refused
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)


def _guarded() -> Generator[None, object, object]:
    """One phase of a unit test under :func:`refusing_processes`."""
    with refusing_processes() as refused:
        outcome = yield
    elsewhere = [line for line, thread in refused if thread != threading.get_ident()]
    if elsewhere:  # the refusal was raised in another thread, and the test went on
        pytest.fail(elsewhere[0], pytrace=False)
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """The fixtures a unit test asks for, whatever their scope, start no process."""
    return (yield from _guarded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Nor does the test itself."""
    return (yield from _guarded())


def _refused_fixture(name: str, starts: str) -> Any:
    @pytest.fixture(name=name)
    def refused() -> None:
        pytest.fail(f"the {name} fixture {starts}: a unit test starts no process, so this test belongs in {INTEGRATION}",
                    pytrace=False)

    refused.__doc__ = f"Refused in unit tests: tests/conftest.py's {name} {starts}."
    return refused


runner = _refused_fixture("runner", "starts both frontends' workers")
python_run = _refused_fixture("python_run", "runs python -m harness")
availability = _refused_fixture("availability", "probes R with Rscript")
