"""The shape a result must have before anything reads it: every field the harness reads, one clear line for the first
that is missing or of the wrong JSON type, never a ``KeyError``, ``TypeError`` or ``unexpected …`` line.

``report``, ``merge`` and ``load_result`` read files a user may have edited, merged or truncated. The check is derived
from the declaration the JSON form is derived from (:mod:`harness.model.codec`): each stored dataclass's fields and type
hints, and the ``TypedDict``s of what workers report (:mod:`harness.model.reported`), so no field is listed here. A field
with a default may be absent (unless it says ``optional=False``); ``X | None`` may be null; ``tuple[X, Y]`` is a list of
two; a type that checks its own values (the workload spec, the timing protocol) is built, and the field it refuses is
named. What a field's *value* must agree with (a final loss with its last loss, a reference as long as the run, a weights
file named by one cell only) is :mod:`harness.store.consistency`'s, which runs next, on the typed result.

Stored verdicts (fields declared ``judged``: ``pairs``, ``targets``, each cell's ``verdict``) are not checked: they are
never read back, only judged again (:mod:`harness.judge.assess`), and :func:`strip_judged` drops them before a result is
built.

Two checks: :func:`check_shape`, the whole current schema (what ``from_json`` reads), and :func:`check_upgradable`, the
fields every schema version shares (no ``since``, no default), checked before an older file is upgraded (an upgrade step
reads them).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NoReturn, Union

from harness.errors import ResultError, SpecError, UsageError
from harness.model.codec import Since, decode, field_options, hints
from harness.model.reported import Peak

__all__ = ["check_shape", "check_upgradable", "judged_fields", "strip_judged"]

_FIX = "Re-run `python -m harness run --json` to write a complete one."


class _Refused(Exception):
    """The first field that is wrong: where, what it must be, and what it is (``missing``: absent)."""

    def __init__(self, where: str, expected: str, got: object, missing: bool = False) -> None:
        super().__init__(where)
        self.where, self.expected, self.got, self.missing = where, expected, got, missing


#: A check: raises :class:`_Refused` for a value (at ``where``) that does not have its shape.
Check = Callable[[object, str], None]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar(valid: Callable[[object], bool], expected: str) -> Check:
    def check(value: object, where: str) -> None:
        if not valid(value):
            raise _Refused(where, expected, value)
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _nullable(inner: Check) -> Check:
    expected = f"{_expected(inner)} or null"

    def check(value: object, where: str) -> None:
        if value is None:
            return
        try:
            inner(value, where)
        except _Refused as refused:
            if refused.where == where and not refused.missing:
                raise _Refused(where, expected, value) from refused
            raise
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _one_of(values: Collection[str], what: str) -> Check:
    listed = ", ".join(map(repr, values))
    return _scalar(lambda v: isinstance(v, str) and v in values, f"{what} ({listed})")


def _list(item: Check, expected: str, length: int | None = None, non_empty: bool = False) -> Check:
    def check(value: object, where: str) -> None:
        if not isinstance(value, list) or (length is not None and len(value) != length) or (non_empty and not value):
            raise _Refused(where, expected, value)
        for k, element in enumerate(value):
            item(element, f"{where}[{k}]")
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _values(item: Check, expected: str) -> Check:
    """An object whose keys are any strings and whose every value has ``item``'s shape."""
    def check(value: object, where: str) -> None:
        if not isinstance(value, Mapping):
            raise _Refused(where, expected, value)
        for key, element in value.items():
            item(element, f"{where}.{key}")
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _object(fields: Mapping[str, Check], optional: Collection[str] = (), expected: str = "an object") -> Check:
    """An object holding ``fields`` (those in ``optional`` may be absent, as null), and maybe others, unread."""
    def check(value: object, where: str) -> None:
        if not isinstance(value, Mapping):
            raise _Refused(where, expected, value)
        for name, field_check in fields.items():
            if name not in value:
                if name in optional:
                    continue
                raise _Refused(f"{where}.{name}" if where else name, _expected(field_check), None, missing=True)
            field_check(value[name], f"{where}.{name}" if where else name)
    check.expected = expected  # type: ignore[attr-defined]
    check.fields, check.optional = dict(fields), set(optional)  # type: ignore[attr-defined]
    return check


def _expected(check: Check) -> str:
    return str(getattr(check, "expected", "another value"))


def _anything(value: object, where: str) -> None:
    """Any JSON value: kept and shown as it is, never computed with."""



_INT = _scalar(_is_int, "a whole number")
_NUMBER = _scalar(_is_number, "a number")
_STR = _scalar(lambda v: isinstance(v, str), "a string")
_BOOL = _scalar(lambda v: isinstance(v, bool), "true or false")
#: The check of each JSON scalar type, and how a list of them is named.
_SCALARS: dict[type, tuple[Check, str]] = {
    bool: (_BOOL, "true or false"), int: (_INT, "whole numbers"), float: (_NUMBER, "numbers"), str: (_STR, "strings"),
}
_NUMBER_WORDS = {2: "two", 3: "three"}


class _Said(str):
    """A description shown as it is, not as a value's repr."""


def _noun(kind: type) -> str:
    """What a declared type is, in words: its docstring's first phrase (``Statistics of one clock's samples``)."""
    first = (kind.__doc__ or kind.__name__).strip().split("\n")[0]
    for stop in (". ", ": ", "; ", " (", "`"):
        first = first.split(stop)[0]
    first = first.rstrip(".,:;")
    return first[:1].lower() + first[1:] if first[1:2].islower() or first[1:2] == " " or first[1:2] == "'" else first


def _unwrap(hint: Any) -> Any:
    """``hint`` without ``Annotated``, ``NotRequired`` or ``Required`` around it."""
    while typing.get_origin(hint) in (typing.Annotated, typing.NotRequired, typing.Required):
        hint = typing.get_args(hint)[0]
    return hint


def _since(hint: Any) -> int | None:
    while typing.get_origin(hint) in (typing.Annotated, typing.NotRequired, typing.Required):
        found = [a.version for a in typing.get_args(hint)[1:] if isinstance(a, Since)]
        if found:
            return found[0]
        hint = typing.get_args(hint)[0]
    return None


def _union_parts(hint: Any) -> tuple[list[Any], bool]:
    """A union's types other than None, and whether None is one of them (any other type: itself, and no)."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = typing.get_args(hint)
        return [a for a in args if a is not type(None)], type(None) in args
    return [hint], False


def _plural(hint: Any) -> str:
    """How a list of ``hint``'s values is named: ``a list of {this}``."""
    hint = _unwrap(hint)
    inner, _ = _union_parts(hint)
    hint = inner[0] if len(inner) == 1 else hint
    origin = typing.get_origin(hint)
    if hint in _SCALARS:
        return _SCALARS[hint][1]
    if origin in (tuple, list, Sequence):
        return "lists"
    if origin in (dict, Mapping):
        return "objects"
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or typing.is_typeddict(hint)):
        return f"objects ({_noun(hint)})"
    return "values"


def _check_of(hint: Any, non_empty: bool = False, shallow: bool = False) -> Check:
    """The check of a value of type ``hint`` (``shallow``: of an older schema, only the fields every version has)."""
    hint = _unwrap(hint)
    inner, nullable = _union_parts(hint)
    if nullable:
        return _nullable(_check_of(inner[0] if len(inner) == 1 else Any, non_empty, shallow))
    if len(inner) > 1 or hint is Any or hint is object:
        return _anything
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return _one_of([str(a) for a in args], "one of")
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        if len(set(args)) == 1:
            expected = f"a list of {_NUMBER_WORDS.get(len(args), len(args))} {_plural(args[0])}"
            return _list(_check_of(args[0], shallow=shallow), expected, length=len(args))
        return _list(_anything, f"a list of {len(args)} values", length=len(args))
    if origin in (tuple, list, Sequence):
        expected = f"a {'non-empty ' if non_empty else ''}list of {_plural(args[0])}"
        return _list(_check_of(args[0], shallow=shallow), expected, non_empty=non_empty)
    if origin in (dict, Mapping):
        value = _unwrap(args[1])
        return _values(_check_of(value, shallow=shallow), "an object" if value is Any else f"an object of {_plural(value)}")
    if hint in _SCALARS:
        return _SCALARS[hint][0]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _one_of([str(m.value) for m in hint], "one of")
    if isinstance(hint, type) and typing.is_typeddict(hint):
        return _typeddict(hint, shallow)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint, shallow)
    return _anything


@functools.cache
def _typeddict(kind: type, shallow: bool = False) -> Check:
    """A ``TypedDict``'s keys (``NotRequired``: may be absent, as in a ``total=False`` one), each checked by its type."""
    checks: dict[str, Check] = {}
    optional: set[str] = set()
    for name, hint in hints(kind).items():
        if shallow and _since(hint) is not None:
            continue
        checks[name] = _check_of(hint, shallow=shallow)
        if typing.get_origin(hint) is typing.NotRequired or not getattr(kind, "__total__", True):
            optional.add(name)
    check = _object(checks, optional, expected=f"an object ({_noun(kind)})")
    rule = _RULES.get(kind)
    if rule is None:
        return check

    def with_rule(value: object, where: str) -> None:
        check(value, where)
        assert isinstance(value, Mapping)
        rule(value, where)
    with_rule.expected = _expected(check)  # type: ignore[attr-defined]
    return with_rule


def _optional(field: dataclasses.Field[Any]) -> bool:
    """A field a stored object may lack: one with a default (unless it says ``optional=False``), or ``optional=True``, or one
    written for readers only (``init=False``)."""
    has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    flag = field_options(field).get("optional")
    return bool(flag) or (has_default and flag is not False) or not field.init


@functools.cache
def _dataclass(kind: type, shallow: bool = False) -> Check:
    """A stored dataclass: each of its fields by its type (or the JSON form it declares), those in ``judged`` left out."""
    checks: dict[str, Check] = {}
    optional: set[str] = set()
    types_of = hints(kind)
    for field in dataclasses.fields(kind):
        options = field_options(field)
        if options.get("judged") or options.get("extra"):
            continue
        if shallow and (options.get("since") is not None or _optional(field)):
            continue
        if options.get("flatten") is not None:
            flattened = _typeddict(options["flatten"], shallow)
            checks |= flattened.fields  # type: ignore[attr-defined]
            optional |= flattened.optional  # type: ignore[attr-defined]
            continue
        field_check = _check_of(options.get("json", types_of[field.name]), bool(options.get("non_empty")), shallow)
        if options.get("optional") and not _union_parts(_unwrap(types_of[field.name]))[1]:
            field_check = _nullable(field_check)
        checks[field.name] = field_check
        if _optional(field):
            optional.add(field.name)
    expected = f"an object ({_noun(kind)})"
    fields_check = _object(checks, optional, expected=expected)
    builds = hasattr(kind, "__post_init__") or not hasattr(kind, "VERSION_FIELD")  # a type that checks its own values

    def check(value: object, where: str) -> None:
        fields_check(value, where)
        if not builds:
            return
        at = f"{where}." if where else ""
        try:
            decode(kind, value)
        except SpecError as err:
            raise _Refused(f"{at}{err.field}", err.allowed, err.value) from err
        except UsageError as err:
            raise _Refused(f"{at}{err.option}", err.allowed, err.value) from err
        except (TypeError, ValueError) as err:  # a key it has no field for: its constructor names it
            raise _Refused(where, f"{expected}, of its fields only", _Said(str(err))) from err
    check.expected = expected  # type: ignore[attr-defined]
    check.fields, check.optional = checks, optional  # type: ignore[attr-defined]
    return check


def _peak_names_its_layouts(value: Mapping[str, Any], where: str) -> None:
    """A measured peak that names its fastest layout lists every layout's rate (the report prints them): a rule between two
    keys, which no type says."""
    if value.get("layout") and not isinstance(value.get("layouts_tflops"), Mapping):
        raise _Refused(f"{where}.layouts_tflops", "an object of each layout's TFLOP/s (the peak names its layout)",
                       value.get("layouts_tflops"), missing="layouts_tflops" not in value)


#: The rules between keys of a reported object that its types cannot say, each with why (in its docstring).
_RULES: dict[type, Callable[[Mapping[str, Any], str], None]] = {Peak: _peak_names_its_layouts}


def _guard(kind: type, data: object, source: str, shallow: bool) -> None:
    try:
        check = _dataclass(kind, shallow)
        _object({}, expected="a JSON object")(data, "")
        check(data, "")
        if not shallow:
            _check_frontends(data)
    except _Refused as refused:
        _refuse(source, refused)


def _check_frontends(result: object) -> None:
    """Besides each field's type: every cell's frontend is one of ``frontends``, ``baseline`` is one of them, and no frontend
    is named twice (a rule between fields)."""
    assert isinstance(result, Mapping)
    frontends = result.get("frontends")
    if not isinstance(frontends, list) or not isinstance(result.get("cells"), list):
        return
    twice = next((f for k, f in enumerate(frontends) if f in frontends[:k]), None)
    if twice is not None:
        raise _Refused("frontends", "a list naming each frontend once", frontends)
    for k, cell in enumerate(result["cells"]):
        if cell["frontend"] not in frontends:
            raise _Refused(f"cells[{k}].frontend", f"one of the result's frontends ({', '.join(frontends)})", cell["frontend"])
    if "baseline" in result and result["baseline"] not in frontends:
        raise _Refused("baseline", f"one of the result's frontends ({', '.join(frontends)})", result["baseline"])


def check_shape(kind: type, result: object, source: str) -> None:
    """Refuse a stored ``kind`` (a result) of the current schema that anything would trip over, naming the first field that
    is missing or wrong.

    Raises:
        ResultError: one line: where in ``source`` the problem is, what was expected, what it is, and what to do.
    """
    _guard(kind, result, source, shallow=False)


def check_upgradable(kind: type, result: object, source: str) -> None:
    """Refuse a stored ``kind`` of any schema version whose fields every version has (no ``since``, no default: what an
    upgrade step reads) an upgrade step would trip over.

    Raises:
        ResultError: one line naming the field, as :func:`check_shape`.
    """
    _guard(kind, result, source, shallow=True)


def judged_fields(kind: type) -> tuple[str, ...]:
    """The fields of ``kind`` declared ``judged``: verdicts, judged again on every load, never read back."""
    return tuple(f.name for f in dataclasses.fields(kind) if field_options(f).get("judged"))


def strip_judged(kind: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a stored ``kind``) without its stored verdicts, at every level where its fields' types declare some (a
    result's ``pairs`` and ``targets``, each cell's ``verdict``), so a hand edit there cannot stop it from loading."""
    judged = set(judged_fields(kind))
    stripped = {k: v for k, v in data.items() if k not in judged}
    types_of = hints(kind)
    for field in dataclasses.fields(kind):
        value = stripped.get(field.name)
        args = typing.get_args(_unwrap(types_of[field.name]))
        inner = args[0] if typing.get_origin(types_of[field.name]) is tuple and len(args) == 2 and args[1] is Ellipsis else None
        if isinstance(value, list) and isinstance(inner, type) and dataclasses.is_dataclass(inner) and judged_fields(inner):
            stripped[field.name] = [strip_judged(inner, v) if isinstance(v, Mapping) else v for v in value]
    return stripped


def _refuse(source: str, refused: _Refused) -> NoReturn:
    shown = "it is missing" if refused.missing else f"got {_short(refused.got)}"
    raise ResultError(
        f"{source} is not a result a report can be drawn from: {refused.where or 'the result'} must be {refused.expected}, "
        f"but {shown}. {_FIX}"
    )


def _short(value: object, limit: int = 60) -> str:
    if isinstance(value, _Said):
        text = str(value)
    elif isinstance(value, float) and not math.isfinite(value):
        text = str(value)
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
