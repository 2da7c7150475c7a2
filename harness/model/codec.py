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
- ``encode`` / ``decode``: its hand-written conversion, where its JSON form is not its value's.
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
from collections.abc import Mapping, Sequence
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


def encode(value: Any) -> Any:
    """``value`` as plain JSON data: a stored type by its fields, a type with its own ``to_json`` (the workload spec) by
    that, a tuple or list as a list, a mapping as an object, an enum as its value, anything else as it is."""
    if isinstance(value, Stored) or (dataclasses.is_dataclass(value) and not isinstance(value, type) and not hasattr(value, "to_json")):
        return _encode_fields(value)
    if hasattr(value, "to_json") and not isinstance(value, type):
        return value.to_json()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    return value


def _encode_fields(obj: Any) -> dict[str, Any]:
    version_field = getattr(obj, "VERSION_FIELD", None)
    version = getattr(obj, version_field) if version_field else None
    data: dict[str, Any] = {}
    for field in dataclasses.fields(obj):
        options = field_options(field)
        if options.get("omit") is not None and options["omit"](obj):
            continue
        if version is not None and options.get("since") is not None and version < options["since"]:
            continue
        value = getattr(obj, field.name)
        if options.get("extra"):
            data.update(value)
        elif options.get("flatten") is not None:
            data.update(options["encode"](value))
        else:
            data[field.name] = options["encode"](value) if options.get("encode") else encode(value)
    return data


def decode(hint: Any, raw: Any) -> Any:
    """``raw`` (plain JSON data) as the type ``hint`` names: the inverse of :func:`encode`."""
    if raw is None or hint is Any or hint is object:
        return raw
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return decode(args[0], raw)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return decode(inner[0], raw) if len(inner) == 1 else raw
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], v) for v in raw)
        return tuple(decode(a, v) for a, v in zip(args, raw, strict=True))
    if origin in (list, Sequence):
        return [decode(args[0], v) for v in raw]
    if origin in (dict, Mapping):
        return {k: decode(args[1], v) for k, v in raw.items()}
    if origin is not None or not isinstance(hint, type) or typing.is_typeddict(hint):
        return raw  # a Literal, or a TypedDict: plain JSON, kept as it is
    if issubclass(hint, enum.Enum):
        return hint(raw)
    if issubclass(hint, Stored):
        return _decode_fields(hint, raw)
    if hasattr(hint, "from_json"):
        return hint.from_json(raw)
    if dataclasses.is_dataclass(hint):
        return _decode_fields(hint, raw)
    return raw


def _has_default(field: dataclasses.Field[Any]) -> bool:
    return field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING


def _nullable(hint: Any) -> bool:
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(hint)


def _decode_fields(kind: Any, data: Mapping[str, Any]) -> Any:
    types_of = hints(kind)
    values: dict[str, Any] = {}
    known: set[str] = set()
    extra: str | None = None
    for field in dataclasses.fields(kind):
        options = field_options(field)
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
        hint = types_of[field.name]
        raw = data.get(field.name)
        if raw is None and (field.name not in data or not _nullable(hint)):
            if _has_default(field):
                continue
            if field.name not in data and options.get("since") is None and not options.get("optional"):
                raise KeyError(field.name)
            values[field.name] = None
            continue
        values[field.name] = options["decode"](raw) if options.get("decode") else decode(hint, raw)
    if extra is not None:
        values[extra] = {k: v for k, v in data.items() if k not in known}
    return kind(**values)
