"""The module sweep's Python side: PyTorch's own module samples (``module_db``) made into files, run, and compared.

Twin: ``r_scripts/modules.R`` (``run_module`` there builds the R torch module from the arguments the mapping made of
these). Three calls per ``module_db`` entry, each batching every sample of the entry:

- :func:`prepare_module`: draws the entry's samples after the sweep's seed, writes each sample's tensors (its
  constructor's, its forward inputs, the initial weights, the upstream gradients of every mode) to one safetensors file,
  runs the sample in every mode and in float64, and returns each sample's constructor and forward arguments as plain
  data (a tensor by the name of its file entry);
- the comparison of both languages' files is the worker's, not a script's: :mod:`harness.worker_side.module_compare`.

The sweep (harness/run/modules.py) maps the plain arguments to R's with the mapping table (harness/workload/modules.toml)
in between. Nothing here knows R.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import math
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

__all__ = ["SWITCHES", "module_entries", "prepare_module"]

SCRIPT = "modules"

#: The upstream gradient of each output is drawn from this generator's seed plus the output's position, in float64, then
#: cast to the output's dtype: every mode and both languages get the same numbers.
_UPSTREAM_SEED = 20260

_DB: dict[str, Any] | None = None


def _module_db() -> dict[str, Any]:
    """``module_db`` by entry name (``nn.Linear``), imported once (it pulls in PyTorch's test machinery: seconds)."""
    global _DB
    if _DB is None:
        try:
            from torch.testing._internal.common_modules import module_db
        except ModuleNotFoundError as err:  # PyTorch's test database needs expecttest, which torch does not install
            raise RuntimeError(f"PyTorch's module_db cannot be imported ({err}): pip install expecttest") from None

        _DB = {info.name: info for info in module_db}
    return _DB


def module_entries(request: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every ``module_db`` entry: its name and class name, in the database's order."""
    return [{"name": name, "class": info.module_cls.__name__} for name, info in _module_db().items()]


# --- encoding a sample as plain data ------------------------------------------------------------------------------------

def _encode(value: Any, tensors: dict[str, torch.Tensor], key: str) -> Any:
    """``value`` as plain data: a tensor becomes ``{"tensor": key}`` (its values in ``tensors``), a dtype
    ``{"dtype": name}``, a function ``{"callable": name}``, a module ``{"module": ...}``, a sequence holding anything but
    numbers ``{"list": [...]}``; numbers, strings, booleans and ``None`` stay."""
    if isinstance(value, torch.Tensor):
        tensors[key] = value.detach().clone().contiguous()
        return {"tensor": key, "grad": bool(value.requires_grad)}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.nn.Module):
        return {"module": _encode_module(value, tensors, key)}
    if isinstance(value, bool | int | float | str) or value is None:
        if isinstance(value, float) and not math.isfinite(value):
            return {"float": str(value)}
        return value
    if isinstance(value, tuple | list | torch.Size):
        items = [_encode(v, tensors, f"{key}.{i}") for i, v in enumerate(value)]
        if all(isinstance(v, bool | int | float) for v in items):
            return items
        return {"list": items}
    if isinstance(value, dict):
        return {"dict": {k: _encode(v, tensors, f"{key}.{k}") for k, v in value.items()}}
    if callable(value):
        return {"callable": getattr(value, "__name__", repr(value))}
    return {"unknown": type(value).__name__}


def _encode_module(module: torch.nn.Module, tensors: dict[str, torch.Tensor], key: str) -> dict[str, Any]:
    """A module passed as a constructor argument (TransformerEncoder's layer): its class and the arguments it was made
    with, as :func:`_capturing` kept them (a module made otherwise is its class alone, which R cannot build)."""
    made = getattr(module, "_sweep_made", None)
    if made is None:
        return {"class": type(module).__name__}
    args, kwargs = made
    return {"class": type(module).__name__,
            "constructor": {name: _encode(v, tensors, f"{key}.{name}") for name, v in _named(type(module), args, kwargs).items()}}


@contextlib.contextmanager
def _capturing() -> Iterator[None]:
    """While ``module_db``'s sample functions run, each module of a ``module_db`` class keeps the arguments it was made
    with (``_sweep_made``), so a module passed to another's constructor can be described as data and made again."""
    originals = {}
    for info in _module_db().values():
        cls = info.module_cls
        if cls in originals or "__init__" not in vars(cls):
            continue
        originals[cls] = vars(cls)["__init__"]

        def init(self: Any, *args: Any, __original: Any = originals[cls], **kwargs: Any) -> None:
            __original(self, *args, **kwargs)
            object.__setattr__(self, "_sweep_made", (args, kwargs))

        cls.__init__ = functools.wraps(originals[cls])(init)  # type: ignore[misc]
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.__init__ = original  # type: ignore[misc]


def _named(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The constructor's arguments by name, as the caller passed them (defaults not added)."""
    return dict(inspect.signature(cls).bind_partial(*args, **kwargs).arguments)


def _flatten(value: Any, path: str = "out") -> Iterator[tuple[str, torch.Tensor]]:
    """Each tensor of a forward's output with its path (``out``, ``out.1.0``); ``None`` is skipped, its place kept."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, tuple | list):
        for i, item in enumerate(value):
            yield from _flatten(item, f"{path}.{i}")


# --- running a sample ---------------------------------------------------------------------------------------------------

def _decode(value: Any, tensors: dict[str, torch.Tensor], dtype: torch.dtype | None) -> Any:
    """A forward argument back from plain data, a float tensor cast to ``dtype`` (a low-precision mode) as a fresh leaf."""
    if isinstance(value, dict) and "tensor" in value:
        t = tensors[value["tensor"]].clone()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        return t.requires_grad_(bool(value["grad"]))
    if isinstance(value, dict) and "list" in value:
        return tuple(_decode(v, tensors, dtype) for v in value["list"])
    if isinstance(value, dict) and "dtype" in value:
        return getattr(torch, value["dtype"])
    if isinstance(value, dict) and "float" in value:
        return float(value["float"])
    if isinstance(value, list):
        return tuple(value)
    return value


def _build(sample: Any, cls: type, seed: int) -> torch.nn.Module:
    """The sample's module made after the seed; a module among its arguments is made again there too, from the
    arguments it was made with (R makes it after the seed as well), else copied."""
    torch.manual_seed(seed)
    args = [_made_again(v) for v in sample.constructor_input.args]
    kwargs = {k: _made_again(v) for k, v in sample.constructor_input.kwargs.items()}
    return cls(*args, **kwargs)


def _made_again(value: Any) -> Any:
    made = getattr(value, "_sweep_made", None) if isinstance(value, torch.nn.Module) else None
    if made is None:
        return copy.deepcopy(value)
    args, kwargs = made
    return type(value)(*[_made_again(v) for v in args], **{k: _made_again(v) for k, v in kwargs.items()})


def _run_mode(module: torch.nn.Module, forward: dict[str, Any], tensors: dict[str, torch.Tensor], mode: dict[str, Any],
              seed: int, upstream: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One forward and backward of ``module`` in ``mode``; the tensors compared, by name.

    ``upstream``: each output's upstream gradient (float64) by path; one it lacks is drawn here and kept in it (for the
    other modes and for R)."""
    weights = getattr(torch, mode["weights"]) if mode["weights"] else None
    if weights is not None:
        module = module.to(weights)
    args = [_decode(a, tensors, weights) for a in forward["args"]]
    kwargs = {k: _decode(v, tensors, weights) for k, v in forward["kwargs"].items()}
    torch.manual_seed(seed)  # a module that draws in its forward (fractional max pooling) draws the same numbers in R
    if mode["autocast"]:
        with torch.autocast("cpu", dtype=getattr(torch, mode["autocast"])):
            output = module(*args, **kwargs)
    else:
        output = module(*args, **kwargs)
    kept: dict[str, torch.Tensor] = {}
    roots, grads = [], []
    for k, (path, t) in enumerate(_flatten(output)):
        kept[path] = t.detach().clone()
        if t.requires_grad:
            if path not in upstream:
                generator = torch.Generator().manual_seed(_UPSTREAM_SEED + k)
                upstream[path] = torch.randn(t.shape, generator=generator, dtype=torch.float64)
            g = upstream[path]
            roots.append(t)
            grads.append(g.to(t.dtype))
    if roots:
        torch.autograd.backward(roots, grads)
    inputs = {"args": args, "kwargs": kwargs}
    for key, t in _input_tensors(forward, inputs):
        if t.grad is not None:
            kept[f"grad.{key}"] = t.grad.detach().clone()
    for name, p in module.named_parameters():
        if p.grad is not None:
            kept[f"grad.{name}"] = p.grad.detach().clone()
    for name, b in module.named_buffers():
        kept[f"buffer.{name}"] = b.detach().clone()
    return kept


def _input_tensors(forward: dict[str, Any], inputs: dict[str, Any]) -> Iterator[tuple[str, torch.Tensor]]:
    """Each forward input tensor that was given as a leaf, with its key."""
    def walk(encoded: Any, value: Any) -> Iterator[tuple[str, torch.Tensor]]:
        if isinstance(encoded, dict) and "tensor" in encoded and isinstance(value, torch.Tensor):
            yield encoded["tensor"], value
        elif isinstance(encoded, dict) and "list" in encoded:
            for e, v in zip(encoded["list"], value, strict=True):
                yield from walk(e, v)
    for e, v in zip(forward["args"], inputs["args"], strict=True):
        yield from walk(e, v)
    for k, e in forward["kwargs"].items():
        yield from walk(e, inputs["kwargs"][k])


def prepare_module(request: dict[str, Any]) -> dict[str, Any]:
    """:func:`_prepare_module` with PyTorch's warnings kept from the terminal (its samples exercise deprecated options on
    purpose: the warnings say nothing about the sweep)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _prepare_module(request)


def _prepare_module(request: dict[str, Any]) -> dict[str, Any]:
    """Draw, write and run one entry's samples (the module docstring); plain data back.

    ``request``: ``entry`` (``nn.Linear``), ``folder`` (where the files go), ``seed``, ``modes`` (each ``{"name",
    "autocast", "weights"}``), ``limit`` (the most samples taken, in the database's order; ``None``: all), ``run``
    (``False``: only list the samples, for a class R torch lacks).
    """
    info = _module_db()[request["entry"]]
    folder = Path(request["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    seed = int(request["seed"])
    torch.manual_seed(seed)
    with _capturing():
        samples = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=True, training=True)
    if request.get("limit") is not None:
        samples = samples[: int(request["limit"])]
    if not request.get("run", True):  # a class R torch lacks: its samples counted, not run (R answers for all of them)
        return {"entry": request["entry"], "class": info.module_cls.__name__,
                "samples": [{"index": i, "desc": s.desc, "modes": {}, "parameters": [], "buffers": [], "state_dict": []}
                            for i, s in enumerate(samples)]}
    switch = request.get("switch")
    if switch is not None:  # a known difference's proof: the named samples again, PyTorch's mechanism switched off
        only = set(request["only"])
        with SWITCHES[switch]():
            return {"entry": request["entry"], "switch": switch, "samples": [
                _prepare_sample(info, sample, index, folder, seed, request["modes"], switch)
                for index, sample in enumerate(samples) if index in only]}
    answers = []
    for index, sample in enumerate(samples):
        answers.append(_prepare_sample(info, sample, index, folder, seed, request["modes"]))
    return {"entry": request["entry"], "class": info.module_cls.__name__, "samples": answers}


def _prepare_sample(info: Any, sample: Any, index: int, folder: Path, seed: int, modes: list[dict[str, Any]],
                    switch: str | None = None) -> dict[str, Any]:
    """One sample drawn, written and run in every mode (and float64); with ``switch``, run in ``modes`` only, into files
    named after the switch, from the inputs already written."""
    cls = info.module_cls
    tensors: dict[str, torch.Tensor] = {}
    answer: dict[str, Any] = {"index": index, "desc": sample.desc, "modes": {}}
    try:
        ctor = {name: _encode(v, tensors, f"ctor.{name}") for name, v in
                _named(cls, sample.constructor_input.args, sample.constructor_input.kwargs).items()}
        forward = {"args": [_encode(v, tensors, f"in.{i}") for i, v in enumerate(sample.forward_input.args)],
                   "kwargs": {k: _encode(v, tensors, f"in.{k}") for k, v in sample.forward_input.kwargs.items()}}
        module = _build(sample, cls, seed)
        positional = list(inspect.signature(module.forward).parameters)
        forward["names"] = positional[: len(sample.forward_input.args)]  # which input each position is (the mapping's)
    except Exception as err:  # PyTorch's own sample failing here is a fact of the sweep, reported
        answer["python_error"] = _one_line(err)
        return answer
    answer["constructor"] = ctor
    answer["forward"] = forward
    state = module.state_dict(keep_vars=False)
    for name, t in state.items():
        if not torch.nn.parameter.is_lazy(t):  # a lazy module's weights are made by its first forward
            tensors[f"init.{name}"] = t.detach().clone().contiguous()
    answer["parameters"] = [name for name, _ in module.named_parameters()]
    answer["buffers"] = [name for name, _ in module.named_buffers()]
    answer["state_dict"] = list(state)
    base = folder / f"{index}"
    upstream: dict[str, torch.Tensor] = {}
    suffix = "python" if switch is None else f"python.{switch}"
    if switch is not None:
        upstream = {k.removeprefix("upstream."): v for k, v in load_file(str(base) + ".inputs.safetensors").items()
                    if k.startswith("upstream.")}
    reference = [] if switch is not None else [{"name": "float64", "autocast": None, "weights": "float64"}]
    for mode in [*modes, *reference]:
        try:
            kept = _run_mode(_build(sample, cls, seed), forward, tensors, mode, seed, upstream)
        except Exception as err:  # PyTorch refusing a mode (a dtype CPU lacks) is reported, not raised
            answer["modes"][mode["name"]] = {"status": "python_error", "message": _one_line(err)}
            continue
        save_file({k: v.contiguous() for k, v in kept.items()}, str(base) + f".{mode['name']}.{suffix}.safetensors")
        answer["modes"][mode["name"]] = {"status": "ok", "names": sorted(kept)}
    if switch is not None:
        return answer
    tensors.update({f"upstream.{path}": g for path, g in upstream.items()})
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(base) + ".inputs.safetensors")
    return answer


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


# --- switches: a known difference's mechanism, switched off in PyTorch to prove it ---------------------------------

@contextlib.contextmanager
def _explicit_attention() -> Iterator[None]:
    """PyTorch's attention as R torch computes it: ``multi_head_attention_forward`` with ``need_weights=True`` takes the
    explicit path (``bmm``, ``softmax``, ``bmm``) that R's ``nnf_multi_head_attention_forward`` always takes; with
    ``need_weights=False`` (every transformer layer's call) PyTorch calls ``scaled_dot_product_attention`` instead."""
    import torch.nn.functional as F

    original = F.multi_head_attention_forward

    def explicit(*args: Any, **kwargs: Any) -> Any:
        kwargs["need_weights"] = True
        return original(*args, **kwargs)

    F.multi_head_attention_forward = explicit
    try:
        yield
    finally:
        F.multi_head_attention_forward = original


#: Each switch by the name harness/judge/module_differences.toml gives it.
SWITCHES = {"explicit_attention": _explicit_attention}
