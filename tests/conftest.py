"""Shared fixtures: the tiny spec, one long-lived matrix runner, and the matrix parametrized once.

Cell ids read ``with_autocast-autocast-sgd-r-cpu``; pair ids ``with_autocast-autocast-sgd-cpu``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.run.availability import Availability, probe
from harness.run.runner import MatrixRunner
from harness.workload.spec import WorkloadSpec
from tests import support
from tests.benchmarks.loss_compare import OPTION, POLICY_CHOICES
from tests.support import CELLS, COLLECTED, DURATIONS, FRONTENDS, PAIRS, ROOT, SharedRun, shared_run, write_durations

#: ``pytester`` runs a planted session in-process (the unit tests' guard is tested by what it catches).
pytest_plugins = ["pytester"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--run-slow``: also run the tests marked ``slow`` (minutes, or a gigabyte of fixture). ``--benchmark-compare-losses``:
    what a cell's changed loss does under ``--benchmark-compare`` (tests/benchmarks/loss_compare.py); declared here, at the
    root, so pytest knows it whichever folder it is run on."""
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow (e.g. the whole recipe fixture)")
    parser.addoption("--store-durations", metavar="PATH", nargs="?", const=str(DURATIONS), default=None,
                     help=f"write each test's seconds (setup, call and teardown) to PATH (default {DURATIONS.relative_to(ROOT)}), "
                          "for tests/unit/test_row_costs.py: run the whole suite with it "
                          "(python -m pytest -n 2 --dist loadgroup --store-durations)")
    parser.getgroup("benchmark").addoption(
        OPTION, default="auto", metavar="POLICY",
        help=f"with --benchmark-compare, compare each cell's per-step losses and final weights digest with the saved run's: "
             f"{POLICY_CHOICES}. auto (default): a change fails on the same libtorch build, is reported on another; "
             "identity: any change fails; tolerance:REL: a relative loss change beyond REL fails; off: not compared",
    )


#: What pytest-benchmark warns while it loads the saved runs ``--benchmark-compare`` names, in its own ``pytest_configure``:
#: no saved run (empty storage, a number that is not there) or one it cannot read (a truncated file). Under
#: ``filterwarnings = error`` each ended the session in a 20-40 line INTERNALERROR (exit 3, the run not saved). They are
#: not raised; the benchmarks' closing section says, in one line, which saved run was not loaded and why
#: (tests/benchmarks/conftest.py).
BENCHMARK_LOADING_WARNINGS = ("Can't compare. ", "Failed to load ")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before pytest applies ``filterwarnings`` (the warnings plugin's own ``pytest_configure``, which runs next, before
    pytest-benchmark's), let pytest-benchmark's loading warnings through as nothing: its comparison must not crash the session."""
    for message in BENCHMARK_LOADING_WARNINGS:
        config.addinivalue_line("filterwarnings", f"ignore:{message}:pytest_benchmark.logger.PytestBenchmarkWarning")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Where this process runs tests (not an xdist controller), torch and NumPy's BLAS run them on
    :data:`~tests.support.TEST_PROCESS_THREADS` threads: the suite's processes share the cores."""
    config = session.config
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        import torch  # here, not at the top: the controller of an xdist session never needs it
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(support.TEST_PROCESS_THREADS)
        threadpool_limits(limits=support.TEST_PROCESS_THREADS, user_api="blas")


#: Each test's seconds per phase (setup, call, teardown), as the reports reach this process (under xdist, the controller
#: sees every worker's): what ``--store-durations`` writes at the end of the session.
_SECONDS: dict[str, list[float]] = {}
_PHASES = ("setup", "call", "teardown")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep a test's setup, call and teardown seconds (for ``--store-durations``)."""
    node = report.nodeid
    head, _, group = node.rpartition("@")
    if head and "]" not in group and "::" not in group:  # pytest-xdist's loadgroup appends ``@<xdist_group>`` to the node id
        node = head
    _SECONDS.setdefault(node, [0.0, 0.0, 0.0])[_PHASES.index(report.when)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the session's kept workers (:func:`tests.support.kept_workers`) here, not in a fixture's teardown, which pytest
    charges to the session's last test (5 s on a unit test's row in ``--store-durations``). ``--store-durations``: write
    what every test took, once, from the process that saw every report (not an xdist worker)."""
    support.close_kept_workers()
    path = session.config.getoption("--store-durations")
    if path and not hasattr(session.config, "workerinput") and _SECONDS:
        write_durations(Path(path), _SECONDS, workers=session.config.getoption("numprocesses", None))


@pytest.hookimpl(tryfirst=True)  # before ``-k`` and ``-m`` deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep what was collected (``COLLECTED``); skip ``slow`` tests, with the flag that runs them, unless ``--run-slow``."""
    config.stash[COLLECTED] = [(item.nodeid, dict(getattr(getattr(item, "callspec", None), "params", {}))) for item in items]
    if config.getoption("--run-slow"):
        return
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.skip(reason=f"slow ({_slow_reason(item)}): run with --run-slow"))


def _slow_reason(item: pytest.Item) -> str:
    """Why the test is slow, as its marker says (``@pytest.mark.slow("300 examples and their shrinking")``), so a skip names
    the test's own cost rather than another test's."""
    marker = item.get_closest_marker("slow")
    if marker is not None and marker.args:
        return str(marker.args[0])
    return "minutes, or a gigabyte of fixture"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``cell`` and ``pair`` arguments over the CPU matrix, once, for every test module."""
    if "cell" in metafunc.fixturenames:
        metafunc.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
    if "pair" in metafunc.fixturenames:
        metafunc.parametrize("pair", PAIRS)


@pytest.fixture(scope="session")
def availability() -> Availability:
    """One probe of R, rpy2 and R torch for the whole session."""
    return probe()


@pytest.fixture(scope="session")
def tiny_spec() -> WorkloadSpec:
    """The tiny preset on CPU: what CI runs."""
    return WorkloadSpec.from_preset("tiny")


@pytest.fixture(scope="session")
def runner(tiny_spec: WorkloadSpec, availability: Availability, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MatrixRunner]:
    """Both frontends' workers, alive for the whole session (R's start-up is paid once; the weights in a folder of its own)."""
    weights = tmp_path_factory.mktemp("weights")
    with MatrixRunner(tiny_spec, FRONTENDS, timeout=300, availability=availability, staging=weights) as matrix_runner:
        matrix_runner.describe_installations()  # the workers start here: the fixture's setup, not the first test's call
        yield matrix_runner



@pytest.fixture(scope="session")
def python_run(tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """One real ``run`` of the seven Python cells of ``tiny`` with plain SGD (every mode of both scripts; 3 interleaved rounds,
    GEMM profile, report).

    Run once per test session, whatever the number of xdist workers (their temporary folders share a
    parent): the CLI tests that only read a run's result, table and report read this one.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    return shared_run(root, "python-run", "--preset", "tiny", "--frontend", "python", "--optimizer", "sgd", "--rounds", "3",
                      "--warmup-rounds", "1", "--interleave", "--profile")
