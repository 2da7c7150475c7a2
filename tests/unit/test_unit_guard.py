"""The unit tests' guard (``tests/unit/conftest.py``) is tested by what it catches: a planted process start fails the test.

If the guard stopped working, a unit test could start workers or ``python -m harness`` again and nobody would
notice but the clock.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

#: Each way a planted unit test could start a process (none of them gets as far as starting it).
PLANTED: dict[str, Callable[[], object]] = {
    "subprocess.run": lambda: subprocess.run(["true"], check=True),
    "os.system": lambda: os.system("true"),
    "os.fork": lambda: os.fork(),
    "os.posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], os.environ),
    "multiprocessing": lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
}


@pytest.mark.parametrize("start", PLANTED.values(), ids=PLANTED.keys())
def test_a_process_started_in_a_unit_test_is_refused_naming_where_the_test_belongs(start: Callable[[], object]) -> None:
    """This test runs under the guard: the start is refused with the one line that says where such a test belongs."""
    with pytest.raises(pytest.fail.Exception, match=r" started a process in a unit test: this test belongs in tests/integration/$"):
        start()


_PLANTED_TESTS = """
import subprocess
import threading


def test_starts_a_process():
    subprocess.run(["true"], check=True)


def test_starts_one_in_a_thread():
    thread = threading.Thread(target=subprocess.run, args=(["true"],))
    thread.start()
    thread.join()


def test_starts_none():
    assert True
"""


def test_a_planted_process_start_fails_its_test_in_one_line(pytester: pytest.Pytester) -> None:
    """A session with the guard as its conftest: the tests that start a process (also from a thread) fail, the other passes."""
    pytester.makeconftest(Path(__file__).with_name("conftest.py").read_text(encoding="utf-8"))
    pytester.makepyfile(test_planted=_PLANTED_TESTS)
    plugins = ("no:cacheprovider", "no:xdist", "no:benchmark", "no:hypothesispytest")  # none is needed; hypothesis costs a second
    result = pytester.runpytest_inprocess(*(arg for plugin in plugins for arg in ("-p", plugin)), "-W", "ignore")
    result.assert_outcomes(passed=1, failed=2)
    line = "subprocess.Popen(['true']) started a process in a unit test: this test belongs in tests/integration/"
    result.stdout.fnmatch_lines(["*_ test_starts_a_process _*", line, "*_ test_starts_one_in_a_thread _*", line])
