"""Patches of PyTorch's own functions for one run: the twin of ``r_scripts/patches.R``.

The run spec's ``patches`` (harness/workload/patches.py, docs/tracing.md, docs/known-differences.md) name, per
language, statements of the binding's functions to replace: a *switch* (a known difference's mechanism computed as the
other binding does, for the reconciled run) or a *point* (a trace point of a value the function computes inside
itself: applied only when the call is traced, so an untimed trace and a timed round run the same arithmetic). Each
``old`` statement must occur exactly once in the function's source as installed, so a patch written for one torch
refuses to touch another. A Python function is replaced in its module for the length of the run (``binding_patches``):
the functions that call it look it up there (a method, ``module:Class.method``, is swapped on its class); R's twin
patches a copy of each function and method the script calls instead, because R torch's functions are found through its
namespace and its optimizers' methods live on each object (and swaps what R torch's own modules call in its namespace).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import textwrap
from collections.abc import Iterator
from typing import Any

from py_scripts.tracing import amp_parity_point, tracing

__all__ = ["PatchError", "applied_switches", "binding_patches", "patched_function"]


class PatchError(RuntimeError):
    """A patch whose statement is not in the function exactly once: the binding is not the one it was written for."""


def applied_switches(spec: dict[str, Any]) -> list[str]:
    """The switches this run applies (the record's ``switches``): a replacement's id names its switch and the points it
    carries along (``switch+point:name``)."""
    return [part for patch in spec["patches"]["python"] if patch["kind"] == "switch"
            for part in patch["id"].split("+") if not part.startswith("point:")]


@contextlib.contextmanager
def binding_patches(spec: dict[str, Any]) -> Iterator[None]:
    """PyTorch's functions patched as the run spec says for the length of the ``with`` block, then restored."""
    patches = [p for p in spec["patches"]["python"] if p["kind"] == "switch" or tracing()]
    targets: dict[str, list[dict[str, Any]]] = {}
    for patch in patches:
        targets.setdefault(patch["target"], []).append(patch)
    replaced: list[tuple[Any, str, Any]] = []
    try:
        for target, group in targets.items():
            module_name, _, path = target.partition(":")
            module = importlib.import_module(module_name)
            # "module:function", or "module:Class.method": a method of a module's class (a model's layer, whose forward
            # calls it through ``self``), swapped on its class
            *owners, name = path.split(".")
            owner: Any = module
            for part in owners:
                owner = getattr(owner, part)
            original = getattr(owner, name)
            setattr(owner, name, patched_function(original, group, module.__dict__, target))
            replaced.append((owner, name, original))
        yield
    finally:
        for owner, name, original in reversed(replaced):
            setattr(owner, name, original)


def patched_function(function: Any, patches: list[dict[str, Any]], namespace: dict[str, Any], target: str) -> Any:
    """``function`` rebuilt from its source with each patch's ``old`` statement replaced by its ``new`` one.

    The source is the installed one (``inspect.getsource``, through any decorator, which is applied again); it is
    compiled with the function's module's globals and ``amp_parity_point``, so it runs exactly as the original but for
    the replaced statements.

    Raises:
        PatchError: an ``old`` statement is not in the source exactly once.
    """
    lines = textwrap.dedent(inspect.getsource(function)).splitlines()
    for patch in patches:
        old = [_statement(line) for line in patch["old"].splitlines()]
        found = [k for k in range(len(lines)) if [_statement(line) for line in lines[k:k + len(old)]] == old]
        if len(found) != 1:
            raise PatchError(f"patch {patch['id']}: {target} contains `{patch['old']}` {len(found)} times, not once: this torch "
                             f"({importlib.import_module('torch').__version__}) is not the one the patch was written for; update "
                             "harness/workload/patches.toml")
        at = found[0]
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines[at:at + len(old)] = [indent + line for line in patch["new"].splitlines()]
    scope = dict(namespace)
    scope["amp_parity_point"] = amp_parity_point
    exec(compile("\n".join(lines) + "\n", f"<{target}, patched by amp-parity>", "exec"), scope)  # noqa: S102: the binding's own source
    return scope[function.__name__]


def _statement(line: str) -> str:
    """A source line as a statement: without its indentation and a trailing comment (``# type: ignore[...]``)."""
    return re.sub(r"\s+#[^'\"]*$", "", line.strip())
