"""One codec for the stored model: every stored type's JSON form is derived from its dataclass fields and type hints.

A stored type is a frozen dataclass that inherits :class:`Stored`: its ``to_json`` writes its fields in their declared
order, each by its value (a dataclass field by its own fields, a tuple as a list, an enum as its string, a mapping as an
object), and its ``from_json`` reads them back by their type hints (a list into the tuple the hint names, a string into
its enum, an object into its dataclass). pytest-benchmark drives its ``Stats`` from one list of fields the same way, and
pyperf its metadata from one registry. :mod:`harness.model.shape` reads the same declaration to check a stored file
before anything is built from it, so the JSON form and its check cannot disagree.

Numbers keep the type they were read with (R writes ``gc_seconds`` 0 as an integer): a result read and written again is
byte for byte the file it came from. A field says what is particular about it in its metadata (:func:`codec`'s options:
``field(default=(), metadata=codec(since=5))``), each with the line that says why beside it, where it is declared:

- ``since``: the version that added it; older data lacks it, and it reads as its default (or null). A type whose
  ``VERSION_FIELD`` names its own version field (a script's run record, kept as the script wrote it) also writes it only
  from that version on, so an older one is stored again as it came.
- ``optional``: a stored file may lack it, or hold null in it (it reads as its default, or null).
- ``omit``: it is not written where this is true of the object (a field added later, left out where it has its old value,
  so older files read back byte for byte).
- ``encode`` / ``decode``: its hand-written conversion, where its JSON form is not its value's (``decode`` reads a
  stored null too).
- ``flatten``: it is stored as several keys of its parent (declared by the ``TypedDict`` given), not as one.
- ``extra``: it holds the keys this version does not know, stored again where it is declared.
- ``json``: the declaration of its JSON form (a ``TypedDict``), where its value is kept as the plain JSON a worker or a
  probe reported.
- ``non_empty``: a list that must hold one element at least.
- ``judged``: a verdict, judged again from the rest on every load: never read back, so never checked
  (:func:`harness.model.shape.strip_judged`).

A key of a ``TypedDict`` (a JSON form declared as such) says the version that added it with ``Annotated[X, Since(n)]``.

A stored null in a field that has a default and whose type is not optional reads as that default (an empty list, say).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar, Union

__all__ = ["OPTIONS", "Since", "Stored", "codec", "decode", "encode", "field_options", "hints"]

#: The codec's options, keys of a field's ``dataclasses.field`` metadata (the contract's record fields use the same keys).
OPTIONS = ("since", "optional", "omit", "encode", "decode", "flatten", "extra", "json", "non_empty", "judged")

T = TypeVar("T", bound="Stored")


@dataclasses.dataclass(frozen=True)
class Since:
    """The version that added a key of a ``TypedDict`` (``Annotated[str, Since(8)]``): older data lacks it."""

    version: int


def codec(**options: Any) -> dict[str, Any]:
    """A field's codec options (see the module's list), for its ``dataclasses.field(metadata=...)``: the field stays a plain
    dataclass field, so every type checker reads its default as it reads any other.

    Raises:
        TypeError: an option the codec does not know (a typo would be ignored silently).
    """
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise TypeError(f"unknown codec options: {', '.join(sorted(unknown))}")
    return options


def field_options(field: dataclasses.Field[Any]) -> Mapping[str, Any]:
    """A field's codec options (none: an empty mapping)."""
    return field.metadata


@functools.cache
def hints(kind: Any) -> dict[str, Any]:
    """A dataclass's or ``TypedDict``'s type hints, resolved (cached: the model's types never change)."""
    return typing.get_type_hints(kind, include_extras=True)


class Stored:
    """A stored type: its JSON form is its fields' (:func:`encode` / :func:`decode`)."""

    #: The field holding the object's own version, where its fields' ``since`` says what an older one lacks (a run record).
    VERSION_FIELD: ClassVar[str | None] = None

    def to_json(self) -> dict[str, Any]:
        """Plain data (JSON-ready), derived from the fields."""
        return _encode_fields(self)

    @classmethod
    def from_json(cls: type[T], data: Any) -> T:
        """The inverse of :meth:`to_json`."""
        result: T = _decode_fields(cls, data)
        return result


#: Values written as they are: JSON's own scalars.
_SCALARS = (str, int, float, bool, type(None))


def encode(value: Any) -> Any:
    """``value`` as plain JSON data: a stored type by its fields, a type with its own ``to_json`` (the workload spec) by
    that, a tuple or list as a list, a mapping as an object, an enum as its value, anything else as it is."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, Stored):
        return _encode_fields(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [v if type(v) in _SCALARS else encode(v) for v in value]
    if isinstance(value, Mapping):
        return {k: v if type(v) in _SCALARS else encode(v) for k, v in value.items()}
    if hasattr(value, "to_json") and not isinstance(value, type):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _encode_fields(value)
    return value


@dataclasses.dataclass(frozen=True)
class _Field:
    """One field as the codec reads and writes it (a plan made once per type: :func:`_plan`)."""

    name: str
    options: Mapping[str, Any]
    init: bool
    has_default: bool
    nullable: bool
    decode: Callable[[Any], Any]


@functools.cache
def _plan(kind: Any) -> tuple[_Field, ...]:
    types_of = hints(kind)
    return tuple(
        _Field(f.name, field_options(f), f.init, _has_default(f), _nullable(types_of[f.name]),
               field_options(f).get("decode") or _decoder(types_of[f.name]))
        for f in dataclasses.fields(kind)
    )


def _encode_fields(obj: Any) -> dict[str, Any]:
    version_field = getattr(obj, "VERSION_FIELD", None)
    version = getattr(obj, version_field) if version_field else None
    data: dict[str, Any] = {}
    kind: Any = type(obj)
    for field in _plan(kind):
        options = field.options
        if options and options.get("omit") is not None and options["omit"](obj):
            continue
        if version is not None and options.get("since") is not None and version < options["since"]:
            continue
        value = getattr(obj, field.name)
        if not options:
            data[field.name] = value if type(value) in _SCALARS else encode(value)
        elif options.get("extra"):
            data.update(value)
        elif options.get("flatten") is not None:
            data.update(options["encode"](value))
        else:
            data[field.name] = options["encode"](value) if options.get("encode") else encode(value)
    return data


def decode(hint: Any, raw: Any) -> Any:
    """``raw`` (plain JSON data) as the type ``hint`` names: the inverse of :func:`encode`."""
    return _decoder(hint)(raw)


def _as_is(raw: Any) -> Any:
    return raw


def _or_none(inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda raw: None if raw is None else inner(raw)


@functools.cache
def _decoder(hint: Any) -> Callable[[Any], Any]:
    """The function that reads a value of type ``hint`` from its JSON (made once per type; ``None`` reads as ``None``)."""
    if hint is Any or hint is object:
        return _as_is
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _decoder(args[0])
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _decoder(inner[0]) if len(inner) == 1 else _as_is
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            return _or_none(tuple if item is _as_is else lambda raw: tuple(item(v) for v in raw))
        items = [_decoder(a) for a in args]
        return _or_none(lambda raw: tuple(d(v) for d, v in zip(items, raw, strict=True)))
    if origin in (list, Sequence):
        item = _decoder(args[0])
        return _or_none(list if item is _as_is else lambda raw: [item(v) for v in raw])
    if origin in (dict, Mapping):
        value = _decoder(args[1])
        return _or_none(dict if value is _as_is else lambda raw: {k: value(v) for k, v in raw.items()})
    if origin is not None or not isinstance(hint, type) or typing.is_typeddict(hint) or hint in _SCALARS:
        return _as_is  # a scalar, a Literal, or a TypedDict: plain JSON, kept as it is
    if issubclass(hint, enum.Enum):
        return _or_none(hint)
    if issubclass(hint, Stored) or (dataclasses.is_dataclass(hint) and not hasattr(hint, "from_json")):
        return _or_none(lambda raw: _decode_fields(hint, raw))
    if hasattr(hint, "from_json"):
        return _or_none(hint.from_json)
    return _as_is


def _has_default(field: dataclasses.Field[Any]) -> bool:
    return field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING


def _nullable(hint: Any) -> bool:
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(hint)


def _decode_fields(kind: Any, data: Mapping[str, Any]) -> Any:
    values: dict[str, Any] = {}
    known: set[str] = set()
    extra: str | None = None
    for field in _plan(kind):
        options = field.options
        if options.get("extra"):
            extra = field.name
            continue
        if options.get("flatten") is not None:
            known |= set(hints(options["flatten"]))
            values[field.name] = options["decode"](data)
            continue
        known.add(field.name)
        if not field.init:  # written for readers, never read back
            continue
        raw = data.get(field.name)
        if raw is None and field.name in data and options.get("decode"):  # its own reading says what a stored null is
            values[field.name] = options["decode"](raw)
            continue
        if raw is None and (field.name not in data or not field.nullable):
            if field.has_default:
                continue
            if field.name not in data and options.get("since") is None and not options.get("optional"):
                raise KeyError(field.name)
            values[field.name] = None
            continue
        values[field.name] = field.decode(raw)
    if extra is not None:
        values[extra] = {k: v for k, v in data.items() if k not in known}
    return kind(**values)
