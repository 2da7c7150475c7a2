"""Each new optimizer, loop feature, model or module row adds at most a second to the suite (issue 47).

Read, not timed: speed is checked by measurement, never by a timed unit test. The whole suite's seconds per test are
measured once (``python -m pytest -n 2 --dist loadgroup --store-durations``, written to ``tests/data/durations.json``),
and this test reads them beside the session's own collection. A test function parametrized over a table's rows (it has a case for at
least half of them, so a new row gets one too) charges each row the seconds of that row's cases. A row's charge, as a
share of the whole suite's seconds, times the suite's budget, is what the row costs in a suite that takes its budget:
at most :data:`ROW_BUDGET_S`. A share, so a measurement taken on a busy machine (every test slowed alike) still reads
right. A case with no measured seconds is charged its function's measured mean; a function with none measured fails
the test, naming the command that measures it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from harness.contract.models import MODELS
from harness.workload.features import FEATURES
from harness.workload.modules import MODULE_ROWS
from harness.workload.optimizers import OPTIMIZERS
from tests.support import COLLECTED, DURATIONS, ROOT

#: The suite's budget on 2 vCPUs, with R torch and the browser, as .ci/run runs it (issue 47; docs/development.md).
SUITE_BUDGET_S = 360.0
#: What one new row may add to it (issue 47).
ROW_BUDGET_S = 1.0
#: The benchmarks: the suite skips them (``--benchmark-skip``), so their cases cost it nothing.
BENCHMARKS = "tests/benchmarks/"
#: The tables whose rows the rule covers, and the attribute a parametrized object names its row by (a matrix Cell).
TABLES: dict[str, tuple[Iterable[str], str]] = {
    "optimizer": (OPTIMIZERS, "optimizer"), "feature": (FEATURES, "feature"), "model": (MODELS, "model"),
    "module": (MODULE_ROWS, "python"),
}


def _names(value: object, attribute: str, rows: frozenset[str]) -> set[str]:
    """The rows a parameter's value names: the value itself, the members of a tuple, or an object's row attribute."""
    if isinstance(value, str):
        return {value} & rows
    if isinstance(value, tuple | list):
        return {name for member in value for name in _names(member, attribute, rows)}
    named = getattr(value, attribute, None)
    return {named} & rows if isinstance(named, str) else set()


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def row_charges(items: Iterable[tuple[str, Mapping[str, object]]], seconds: Mapping[str, Sequence[float]], rows: Iterable[str],
                attribute: str) -> tuple[dict[str, float], list[str]]:
    """Each row's seconds over the functions parametrized by (at least half of) the rows, and the functions with no case
    measured. ``items``: each test's node id and its parameters; ``seconds``: each test's ``[setup, call, teardown]``.

    A case's setup and teardown are charged at most its function's median setup and teardown: a shared fixture (the
    session's runner) is built in whichever case needs it first and torn down after whichever runs last (1.02 s of
    teardown in one case of a spec unit test that takes milliseconds: charged to ``ignite_adagrad`` in one measurement),
    and is the fixture's cost, not that row's."""
    table = frozenset(rows)
    by_function: dict[str, list[tuple[str, set[str]]]] = defaultdict(list)
    for node, params in items:
        named = {name for value in params.values() for name in _names(value, attribute, table)}
        if named and not node.startswith(BENCHMARKS):
            by_function[node.split("[")[0]].append((node, named))
    charges: dict[str, float] = dict.fromkeys(table, 0.0)
    unmeasured = []
    for function, cases in by_function.items():
        if len({name for _, named in cases for name in named}) * 2 < len(table) or len(table) < 2:
            continue  # a few rows (one per family, say): a new row adds no case here
        measured = [seconds[node] for node, _ in cases if node in seconds]
        if not measured:
            unmeasured.append(function)
            continue
        setup, teardown = _median([m[0] for m in measured]), _median([m[2] for m in measured])
        cost = {node: min(seconds[node][0], setup) + seconds[node][1] + min(seconds[node][2], teardown)
                for node, _ in cases if node in seconds}
        mean = sum(cost.values()) / len(cost)
        for node, named in cases:
            for name in named:
                charges[name] += cost.get(node, mean) / len(named)
    return charges, unmeasured


def _whole_suite(collected: Iterable[tuple[str, Mapping[str, object]]], seconds: Mapping[str, float]) -> bool:
    """Whether the session collected every test file the measurement saw that is still there (``-k`` and ``-m`` do not
    matter: the collection is kept before they deselect): only then are every row's cases here."""
    files = {node.split("::")[0] for node, _ in collected}
    return all(file in files for file in {node.split("::")[0] for node in seconds} if (ROOT / file).is_file())


def _measured() -> tuple[dict[str, list[float]], float]:
    document: dict[str, Any] = json.loads(DURATIONS.read_text(encoding="utf-8"))
    seconds = {str(k): [float(x) for x in v] for k, v in document["seconds"].items()}
    return seconds, sum(sum(v) for v in seconds.values())


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_each_new_row_adds_at_most_a_second_to_the_suite(kind: str, request: pytest.FixtureRequest) -> None:
    """Every row of the table costs at most :data:`ROW_BUDGET_S` of a suite that takes :data:`SUITE_BUDGET_S`."""
    seconds, total = _measured()
    items = request.config.stash.get(COLLECTED, [])
    if not _whole_suite(items, seconds):
        pytest.skip("reads the whole suite's collection: run it with the suite (python -m pytest -n 2 --dist loadgroup), "
                    "or -k row_costs")
    rows, attribute = TABLES[kind]
    charges, unmeasured = row_charges(items, seconds, rows, attribute)
    assert not unmeasured, (f"{len(unmeasured)} test function(s) parametrized by every {kind} row have no measured seconds in "
                            f"{DURATIONS.relative_to(ROOT)}: {', '.join(unmeasured)}; measure them: python -m pytest -n 2 "
                            "--dist loadgroup --store-durations (the whole suite)")
    over = {name: charge / total * SUITE_BUDGET_S for name, charge in charges.items()
            if charge / total * SUITE_BUDGET_S > ROW_BUDGET_S}
    assert not over, (f"{kind} rows over {ROW_BUDGET_S:g} s of a {SUITE_BUDGET_S:g} s suite: "
                      + ", ".join(f"{name} {cost:.2f} s" for name, cost in sorted(over.items(), key=lambda kv: -kv[1])))


def test_a_row_is_charged_its_cases_in_functions_over_most_rows() -> None:
    """The rule's arithmetic: a function over most rows charges each row its cases (an unmeasured case its function's
    mean; a setup and a teardown at most the function's median ones); a function over a few rows charges nothing; a
    function with no case measured is named; a benchmark costs the suite nothing."""
    rows = ("a", "b", "c", "d")
    items = [("t.py::f[a-python]", {"row": "a", "frontend": "python"}), ("t.py::f[a-r]", {"row": "a", "frontend": "r"}),
             ("t.py::f[b]", {"row": "b"}), ("t.py::f[c]", {"row": "c"}),
             ("t.py::family[a]", {"row": "a"}),  # one row of four: a new row adds no case here
             ("t.py::new[a]", {"row": "a"}), ("t.py::new[b]", {"row": "b"}), ("t.py::new[c]", {"row": "c"}),
             (f"{BENCHMARKS}b.py::timed[a]", {"row": "a"}), (f"{BENCHMARKS}b.py::timed[b]", {"row": "b"})]
    seconds = {"t.py::f[a-python]": [0.0, 1.0, 0.0], "t.py::f[a-r]": [30.0, 3.0, 0.0], "t.py::f[b]": [0.0, 2.0, 20.0],
               "t.py::family[a]": [0.0, 50.0, 0.0]}
    charges, unmeasured = row_charges(items, seconds, rows, "row")
    # a: f[a-r]'s 30 s setup is the shared fixture's, as f[b]'s 20 s teardown; c: f's mean
    assert charges == {"a": 4.0, "b": 2.0, "c": 2.0, "d": 0.0}
    assert unmeasured == ["t.py::new"]
