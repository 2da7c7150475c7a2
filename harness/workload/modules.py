"""The module sweep's table: each PyTorch module class and the R torch constructor it maps to, and the modes it runs in.

The rows are data (``modules.toml`` beside this file, one table per class); this module reads them and turns one PyTorch
sample, as the Python worker describes it in plain data (``py_scripts/modules.py``), into the R call: the constructor
and its arguments under R's names, with the indices and dimensions R counts from 1 moved by one, and the names of the
parameters and buffers R gives them. Nothing here imports torch.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import SpecError

__all__ = ["MODULE_MODES", "MODULE_ROWS", "ModuleMode", "ModuleRow", "conventional_r_name", "load_rows", "r_sample"]

_TABLE = Path(__file__).with_name("modules.toml")


@dataclass(frozen=True)
class ModuleMode:
    """One way the sweep runs a sample: autocast around the forward in ``autocast`` (a dtype name, or ``None``), the
    module and its float inputs cast to ``weights`` (``None``: float32, as built)."""

    name: str
    autocast: str | None = None
    weights: str | None = None
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        """What both workers read of a mode."""
        return {"name": self.name, "autocast": self.autocast, "weights": self.weights}


#: The modes of the sweep, in the order they run. float16 autocast runs on CPU since PyTorch 2.1 (and R torch's
#: with_autocast passes the dtype through); low-precision weights are the AMP guide's `--fp16` on a module.
MODULE_MODES: tuple[ModuleMode, ...] = (
    ModuleMode("float32", why="the module as built: the binding's own arithmetic"),
    ModuleMode("autocast_bfloat16", autocast="bfloat16", why="CPU autocast's default dtype"),
    ModuleMode("autocast_float16", autocast="float16", why="CPU autocast in float16 (PyTorch's CPU autocast allows it)"),
    ModuleMode("lowp_bfloat16", weights="bfloat16", why="module and inputs in bfloat16, no autocast"),
)


@dataclass(frozen=True)
class ModuleRow:
    """One class's mapping (``modules.toml``'s header says what each field means)."""

    python: str
    r: str
    args: dict[str, str] = field(default_factory=dict)
    forward_args: dict[str, str] = field(default_factory=dict)
    one_based: tuple[str, ...] = ()
    one_based_inputs: tuple[str, ...] = ()
    layer_names: str | None = None
    names: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, Any] = field(default_factory=dict)

    def r_name(self, python_name: str) -> str:
        """The R name of a parameter or buffer PyTorch names ``python_name``."""
        if python_name in self.names:
            return self.names[python_name]
        if self.layer_names is None:
            return python_name
        return re.sub(self.layer_names, lambda m: m.group(0)[: m.start(1) - m.start(0)] + str(int(m.group(1)) + 1),
                      python_name)


_FIELDS = {"r", "args", "forward_args", "one_based", "one_based_inputs", "layer_names", "names", "dropped"}


def load_rows(path: Path = _TABLE) -> dict[str, ModuleRow]:
    """The rows of ``path`` by PyTorch class name.

    Raises:
        SpecError: a row with a field the table does not have, or without its R constructor.
    """
    with path.open("rb") as f:
        table = tomllib.load(f)
    rows = {}
    for name, row in table.items():
        unknown = set(row) - _FIELDS
        if unknown or not isinstance(row.get("r"), str):
            raise SpecError(f"{path.name}: [{name}]", sorted(row),
                            f"a row with r = \"nn_...\" and only the fields {', '.join(sorted(_FIELDS))} (fix the row)")
        rows[name] = ModuleRow(python=name, r=row["r"], args=dict(row.get("args", {})),
                               forward_args=dict(row.get("forward_args", {})),
                               one_based=tuple(row.get("one_based", ())),
                               one_based_inputs=tuple(row.get("one_based_inputs", ())),
                               layer_names=row.get("layer_names"), names=dict(row.get("names", {})), dropped=dict(row.get("dropped", {})))
    return rows


MODULE_ROWS: dict[str, ModuleRow] = load_rows()


def conventional_r_name(python_class: str) -> str:
    """The R torch constructor a PyTorch class would have by R torch's naming (``ReflectionPad1d`` →
    ``nn_reflection_pad1d``): what the sweep asks R for where no row maps the class, so R says in its words it lacks it."""
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", python_class)
    snake = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", snake)
    return "nn_" + snake.lower()


def _one_based(value: Any) -> Any:
    """An index or dimension R counts from 1: a number >= 0 moves up by one; a negative one (from the end) and ``None``
    stay."""
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    return value + 1 if value >= 0 else value


def r_sample(row: ModuleRow, sample: dict[str, Any], rows: dict[str, ModuleRow] | None = None) -> dict[str, Any]:
    """The R call of one sample: ``{"constructor": r, "args": {...}, "forward": {"args", "kwargs"}, "names": {python: r}}``.

    ``sample``: what ``py_scripts/modules.py``'s ``prepare_module`` answers for it (plain data). A tensor stays
    ``{"tensor": key}``; one R reads as 1-based indices gets ``"shift": 1``. A module among the arguments (a transformer
    encoder's layer) becomes ``{"module": {"constructor": r, "args": {...}}}`` by its own row of ``rows`` (default the
    table's); one no row maps stays ``{"module": {"class": name}}``, which R refuses.
    """
    rows = MODULE_ROWS if rows is None else rows
    constructor = sample["constructor"]
    if set(constructor) == {"kwargs"} and isinstance(constructor["kwargs"], dict) and "dict" in constructor["kwargs"]:
        constructor = constructor["kwargs"]["dict"]  # a constructor of (*args, **kwargs), as the RNNs: its names inside
    args = {row.args.get(name, name): _nested(_one_based(value) if name in row.one_based else value, rows)
            for name, value in constructor.items() if name not in row.dropped or row.dropped[name] != value}
    forward = sample["forward"]
    params = _forward_params(forward)
    kwargs = {}
    for name, value in forward["kwargs"].items():
        kwargs[row.forward_args.get(name, name)] = _shifted(value) if name in row.one_based_inputs else value
    positional = [(_shifted(v) if params.get(i) in row.one_based_inputs else v) for i, v in enumerate(forward["args"])]
    names = {name: row.r_name(name) for name in sample["state_dict"]}
    return {"constructor": row.r, "args": args, "forward": {"args": positional, "kwargs": kwargs}, "names": names}


def _nested(value: Any, rows: dict[str, ModuleRow]) -> Any:
    """A module argument as R's call (its own row's constructor and arguments); any other value as it is."""
    if not (isinstance(value, dict) and "module" in value):
        return value
    module = value["module"]
    row = rows.get(module.get("class", ""))
    if row is None or "constructor" not in module:
        return value
    call = r_sample(row, {"constructor": module["constructor"], "forward": {"args": [], "kwargs": {}}, "state_dict": []},
                    rows)
    return {"module": {"constructor": call["constructor"], "args": call["args"]}}


def _forward_params(forward: dict[str, Any]) -> dict[int, str]:
    """The forward's positional inputs by position → PyTorch name, as ``prepare_module`` gave them (``names``)."""
    return {i: name for i, name in enumerate(forward.get("names", []))}


def _shifted(value: Any) -> Any:
    if isinstance(value, dict) and "tensor" in value:
        return {**value, "shift": 1}
    return value
