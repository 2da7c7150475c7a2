"""Each timed round's load, read from /proc: other processes' CPU time and the worker's page faults.

Real processes, not mocks: a sibling that burns CPU must show as other processes' CPU, the worker's own CPU must not, and a
worker that touches fresh memory must show its page faults. Only lower bounds are asserted: another test running beside
this one (pytest-xdist) adds to the machine's busy time.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.run.machine_load import read_load, round_load

pytestmark = pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="/proc is Linux's")

#: A child that waits for a line, then burns CPU or touches 64 MiB of fresh memory, says "done" and waits again.
_CHILD = """
import sys, time, mmap
for line in sys.stdin:
    if line.strip() == "burn":
        end = time.process_time() + 0.5
        while time.process_time() < end:
            pass
    else:
        m = mmap.mmap(-1, 64 << 20)
        for i in range(0, 64 << 20, 4096):
            m[i] = 1
        m.close()
    print("done", flush=True)
"""


@pytest.fixture
def child() -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as process:
        yield process
        process.kill()


def _ask(process: subprocess.Popen[str], what: str) -> None:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(what + "\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "done"


def test_another_process_burning_cpu_is_other_load(child: subprocess.Popen[str]) -> None:
    """0.5 s of CPU in a process that is not the worker shows as at least 0.3 s of other processes' CPU."""
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as worker:
        before = read_load(worker.pid)
        _ask(child, "burn")
        load = round_load(before, read_load(worker.pid))
        worker.kill()
    assert load is not None and load.other_cpu_seconds >= 0.3


def test_the_workers_own_cpu_and_faults_are_its_own(child: subprocess.Popen[str]) -> None:
    """The worker's 0.5 s of CPU is counted as the worker's (at least 30 ticks), and touching 64 MiB of fresh memory gives it
    at least 10 000 page faults (16 384 pages)."""
    before = read_load(child.pid)
    _ask(child, "burn")
    burnt = read_load(child.pid)
    assert before is not None and burnt is not None and burnt.worker_ticks - before.worker_ticks >= 30
    _ask(child, "touch")
    load = round_load(burnt, read_load(child.pid))
    assert load is not None and load.page_faults >= 10_000


def test_no_worker_or_a_gone_one_gives_no_load() -> None:
    """A cell whose worker has no process, or whose process has ended, keeps no load for the round (it is not made up)."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    time.sleep(0.05)
    assert read_load(None) is None and read_load(gone.pid) is None
    reading = read_load(gone.pid) or read_load(1)
    assert round_load(None, reading) is None and round_load(reading, None) is None
