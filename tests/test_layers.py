"""The harness's layers: no import cycle among its modules, and the parent process never imports torch."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from harness.files.paths import REPO_ROOT

HARNESS = REPO_ROOT / "harness"
#: Modules that run inside a worker process only (they import torch, or rpy2 and R torch).
WORKER_SIDE = frozenset({
    "harness.frontends.python_handler", "harness.frontends.r_handler",
    "harness.frontends.matmul_peak", "harness.frontends.gemm_profiler",
})


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(HARNESS.rglob("*.py"))}


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The harness modules ``path`` imports anywhere (functions included), except under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(node) for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body for node in ast.walk(stmt)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} & modules
            found |= {f"{node.module}.{a.name}" for a in node.names} & modules
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    names = set(modules)
    return {name: _imports(path, names) - {name} for name, path in modules.items() if name != "harness"}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (depth-first search), or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    """The check below can fail: a cycle planted into a copy of the real graph is found and named."""
    graph = _graph()
    assert "harness.model.result" in graph["harness.run.runner"]
    planted = {name: set(edges) for name, edges in graph.items()}
    planted["harness.model.result"].add("harness.run.runner")
    cycle = _cycle(planted)
    assert cycle is not None and cycle[0] == cycle[-1] and {"harness.model.result", "harness.run.runner"} <= set(cycle)


def test_the_harness_has_no_import_cycle() -> None:
    """No harness module imports, however indirectly, a module that imports it (functions' imports included)."""
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()) or [])


def test_the_model_imports_no_process_or_judging_code() -> None:
    """The result model sits below everything that computes it: it imports leaf modules only."""
    assert _graph()["harness.model.result"] <= {
        "harness.errors", "harness.workload.matrix", "harness.model.protocol", "harness.model.shape", "harness.workload.spec", "harness.model.verdicts",
        "harness.model.record", "harness.model.measures", "harness.judge.divergence",
    }
    assert _graph()["harness.judge.divergence"] <= {"harness.frontends.tensor_bytes"}
    assert "harness.run.runner" not in _graph()["harness.run.measure"]
    assert not {"harness.run.worker", "harness.run.pool", "harness.run.runner"} & _graph()["harness.judge.pairs"]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_importing_every_parent_module_imports_no_torch() -> None:
    """Every harness module but the worker-side ones imports without pulling in torch."""
    parent = sorted(set(_modules()) - WORKER_SIDE)
    done = _python(
        "import importlib, json, sys\n"
        f"for name in {parent!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))))"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_a_whole_run_leaves_the_parent_without_torch(tmp_path: Path) -> None:
    """``harness run --preset tiny --frontend python --profile`` in-process: cells, peaks, profiles ran; torch never in the parent."""
    result = tmp_path / "r.json"
    done = _python(
        "import json, sys\n"
        "from harness.cli.main import main\n"
        "try:\n"
        f"    main(['run', '--preset', 'tiny', '--frontend', 'python', '--rounds', '1', '--profile', '--json', {str(result)!r}])\n"
        "except SystemExit as end:\n"
        "    print('exit', end.code, file=sys.stderr)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))))"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
    cells = json.loads(result.read_text())["cells"]
    assert [c["status"] for c in cells] == ["ok"] * 4 and all(c["record"]["torch_version"] for c in cells)
