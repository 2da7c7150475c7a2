"""Installations: the named Python interpreters and R libraries a matrix runs, each one a frontend of its own.

A maintainer never has one Python and one R: a venv with another torch, an R library with R torch on another
libtorch. Each installation is named by the user and runs in a worker of its own; every cell id carries the name,
so ``python``, ``py28`` and ``r28`` sit side by side in one result and each is paired with a chosen baseline.

Two ways to name them (both parsed here, before any process starts, so a typo is one line and no cell runs):

- ``--frontend python,py28=python:~/venv-torch-2.8/bin/python,r,r28=r:../shared/rtorch-libtorch-2.8.0/activate.sh``.
  ``NAME=python:PATH`` is an interpreter (or a venv folder); ``NAME=r:PATH`` is an R library folder (put first on
  ``R_LIBS``) or a bash script that activates an R torch (its exported environment is the worker's).
  ``NAME=python`` / ``NAME=r`` are this harness's own interpreter and R, renamed (a CI job per GPU kind).
- ``--installations FILE``: a TOML file of ``[NAME]`` tables (``language``, and ``python``, ``r_libs``, ``activate``,
  ``env``), for what a command line cannot say (environment variables an activation script reads).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from harness.errors import UsageError
from harness.files.bounded_read import FileFormatError, FileSyntaxError, read_toml_file

__all__ = [
    "DEFAULT_INSTALLATIONS", "INSTALLATIONS_MAX_BYTES", "Installation", "LANGUAGES", "Language", "MAX_NAME_LENGTH", "check_name",
    "load_installations", "parse_frontends",
]

#: The languages a frontend can speak: each has its scripts (``py_scripts``, ``r_scripts``) and its worker handler.
Language = Literal["python", "r"]
LANGUAGES: tuple[str, ...] = get_args(Language)
#: A name is part of every cell id (``with_autocast-autocast-py28-cpu``), and so of every weights file's name
#: (``<cell id>.safetensors``, and the longer temporary names beside it): the file system's 255 bytes must hold the
#: longest script and mode (42 characters), a device, a merge label and a name (40 each) with room to spare. A name of
#: 300 characters was accepted, and then every cell failed with "File name too long".
MAX_NAME_LENGTH = 40
#: A name's characters: cell ids join their parts with ``-``, so a name has none.
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.]*\Z")
_FILE_KEYS = {"language", "python", "r_libs", "activate", "env"}
#: An installations file names a few installations in a few hundred bytes; a megabyte is more than any holds
#: (``--installations /dev/zero`` took all of the machine's memory before it was bounded).
INSTALLATIONS_MAX_BYTES = 2**20
#: The option an installations file is named by, in its errors.
_FILE_OPTION = "--installations"


@dataclass(frozen=True)
class Installation:
    """One frontend: a language, and where its torch comes from.

    ``python``: the interpreter of a Python installation (``None``: the harness's own). ``r_libs``: an R library folder
    put first on ``R_LIBS``; ``activate``: a bash script sourced to get the worker's environment (an R torch bundle's
    ``activate.sh``); neither: the R this harness finds. ``env``: variables added to the worker's environment (and
    seen by ``activate``).
    """

    name: str
    language: str
    python: str | None = None
    r_libs: str | None = None
    activate: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_default(self) -> bool:
        """Whether this is the harness's own interpreter or R, unchanged (what ``doctor`` and the availability probe check)."""
        return self.python is None and self.r_libs is None and self.activate is None and not self.env

    def where(self) -> str:
        """Where its torch comes from, in a few words (tables, errors)."""
        place = self.python or self.activate or self.r_libs
        return f"{self.language}: {place}" if place else f"{self.language}: this harness's own"

    def to_json(self) -> dict[str, Any]:
        """Plain data (stored with each cell, so a merged result still says what ran it)."""
        data: dict[str, Any] = {"name": self.name, "language": self.language}
        for key in ("python", "r_libs", "activate"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.env:
            data["env"] = dict(self.env)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Installation:
        """The inverse of :meth:`to_json`."""
        return cls(str(data["name"]), str(data["language"]), data.get("python"), data.get("r_libs"), data.get("activate"),
                   dict(data.get("env") or {}))


#: ``python`` and ``r`` mean this harness's own interpreter and the R it finds (what a run without ``--frontend`` runs).
DEFAULT_INSTALLATIONS: dict[str, Installation] = {name: Installation(name, name) for name in LANGUAGES}


def parse_frontends(
    values: list[str] | tuple[str, ...] | None, known: Mapping[str, Installation] | None = None,
) -> tuple[Installation, ...]:
    """The installations ``--frontend`` names, in the order given (the first is the default baseline).

    Each item is ``NAME`` (``python``, ``r`` or a name from ``known``, an ``--installations`` file) or
    ``NAME=LANGUAGE[:PATH]``. None given: ``python`` and ``r``.

    Raises:
        UsageError: an unknown name, a bad name, an unknown language, a path that does not exist, a name twice.
    """
    known = {**DEFAULT_INSTALLATIONS, **(known or {})}
    if not values:
        return tuple(DEFAULT_INSTALLATIONS.values())
    items = [item.strip() for value in values for item in value.split(",")]
    if not any(items):
        raise UsageError("--frontend", ",".join(values), "one or more of NAME or NAME=LANGUAGE[:PATH]")
    chosen: dict[str, Installation] = {}
    for item in items:
        installation = _parse_item(item, known)
        if installation.name in chosen:
            raise UsageError("--frontend", item, f"a name not given twice ({installation.name!r} already names "
                                                 f"{chosen[installation.name].where()})")
        chosen[installation.name] = installation
    return tuple(chosen.values())


def load_installations(path: Path) -> dict[str, Installation]:
    """The named installations of a TOML file: ``[NAME]`` tables with ``language`` and where its torch comes from.

    Relative paths are read from the file's folder, so one file serves every working directory.

    Raises:
        UsageError: the file cannot be read, is not TOML, or a table has an unknown key, language, path or name
            (``python`` and ``r`` only for their own language), each naming ``--installations``.
    """
    try:
        data = read_toml_file(path, INSTALLATIONS_MAX_BYTES)
    except OSError as err:
        raise UsageError(_FILE_OPTION, str(path), f"a readable TOML file ({err.strerror or err})") from err
    except FileSyntaxError as err:
        raise UsageError(_FILE_OPTION, str(path), f"a TOML file ({err})") from err
    except FileFormatError as err:
        raise UsageError(_FILE_OPTION, str(path), f"a regular file holding TOML ({err})") from err
    out = {}
    for name, table in data.items():
        where = f"{path} [{name}]"
        if not isinstance(table, dict):
            raise UsageError(_FILE_OPTION, where, "a table: [NAME] then language = \"python\" or \"r\"")
        unknown = sorted(set(table) - _FILE_KEYS)
        if unknown:
            raise UsageError(_FILE_OPTION, where, f"only the keys {', '.join(sorted(_FILE_KEYS))} (not {', '.join(unknown)})")
        env = table.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise UsageError(_FILE_OPTION, f"{where} env", "a table of strings (VAR = \"value\")")
        if "language" not in table:
            raise UsageError(_FILE_OPTION, where, f"a table with language = one of {', '.join(map(repr, LANGUAGES))} (it has none)")
        language = _language(table["language"], where, _FILE_OPTION)
        paths = {}
        for key in ("python", "r_libs", "activate"):
            if key in table:
                if not isinstance(table[key], str):
                    raise UsageError(_FILE_OPTION, f"{where} {key}", f"a path as a string (not {table[key]!r:.60})")
                paths[key] = _existing(table[key], f"{where} {key}", path.parent, _FILE_OPTION)
        _bound_to_its_language(check_name(name, where, _FILE_OPTION), language, where, _FILE_OPTION)
        out[name] = _checked(Installation(name, language, env=env, **paths), where, _FILE_OPTION)
    return out


def _parse_item(item: str, known: Mapping[str, Installation]) -> Installation:
    name, sep, rest = item.partition("=")
    if not sep:
        if item not in known:
            raise UsageError("--frontend", item, f"one of {', '.join(map(repr, known))}, or NAME=python:PATH / NAME=r:PATH")
        return known[item]
    name = check_name(name, item)
    language, colon, place = rest.partition(":")
    language = _language(language, item)
    _bound_to_its_language(name, language, item)
    if not colon:
        return Installation(name, language)
    resolved = _existing(place, item, Path.cwd())
    if language == "python":
        return _checked(Installation(name, language, python=resolved), item)
    if Path(resolved).is_file():
        return _checked(Installation(name, language, activate=resolved), item)
    return _checked(Installation(name, language, r_libs=resolved), item)


def check_name(name: str, where: str, option: str = "--frontend") -> str:
    """``name`` if it can name a frontend (or label a merged result's frontends).

    Raises:
        UsageError: it is not letters, digits, ``_`` and ``.`` starting with a letter (it is part of every cell id), or
            longer than :data:`MAX_NAME_LENGTH`.
    """
    if not _NAME.match(name):
        raise UsageError(option, _clipped(where), f"a name of letters, digits, '_' and '.', starting with a letter (not {_short(name)}: "
                                        "it is part of every cell id, whose parts are joined by '-')")
    if len(name) > MAX_NAME_LENGTH:
        raise UsageError(option, _clipped(where), f"a name of at most {MAX_NAME_LENGTH} characters (not {len(name)}: it is part of "
                                                "every weights file's name)")
    return name


def _bound_to_its_language(name: str, language: str, where: str, option: str = "--frontend") -> None:
    """Refuse one language's name bound to the other: ``r=python`` would print "python vs r: identical"
    for two Pythons. ``python`` may name another Python installation, ``r`` another R one.

    Raises:
        UsageError: ``python`` or ``r`` given another language.
    """
    if name in LANGUAGES and language != name:
        shown = {"python": "Python", "r": "R"}
        raise UsageError(option, where, f"a name other than {name!r} for a {shown[language]} installation ({name!r} means "
                                        f"{shown[name]} wherever a pair is printed)")


def _clipped(text: str, limit: int = 60) -> str:
    """``text``, cut to ``limit`` characters: one line names a 300-character name without printing it whole."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(text: str, limit: int = 60) -> str:
    return repr(_clipped(text, limit))


def _language(language: object, where: str, option: str = "--frontend") -> str:
    if language not in LANGUAGES:
        shown = repr(language) if isinstance(language, str) else f"{language!r:.40} ({type(language).__name__})"
        raise UsageError(option, where, f"a language of {', '.join(map(repr, LANGUAGES))} (not {shown})")
    assert isinstance(language, str)
    return language


def _existing(place: str, where: str, base: Path, option: str = "--frontend") -> str:
    # Absolute, not resolved: a venv's bin/python is a symlink to the system interpreter, and only its own path
    # makes Python read the venv's pyvenv.cfg (and so its site-packages, its torch).
    path = Path(os.path.abspath(base / Path(place).expanduser())) if place.strip() else None
    if path is None or not path.exists():
        raise UsageError(option, where, f"a path that exists ({place!r} does not)")
    return str(path)


def _checked(installation: Installation, where: str, option: str = "--frontend") -> Installation:
    """A Python installation names an interpreter (a venv folder means its ``bin/python``); an R one no interpreter."""
    if installation.language == "r" and installation.python is not None:
        raise UsageError(option, where, "an R installation with r_libs or activate, not python")
    if installation.language == "python" and (installation.r_libs or installation.activate):
        raise UsageError(option, where, "a Python installation with python = an interpreter, not r_libs or activate")
    if installation.python is not None and Path(installation.python).is_dir():
        interpreter = Path(installation.python) / "bin" / "python"
        if not interpreter.is_file():
            raise UsageError(option, where, f"an interpreter or a venv folder ({installation.python} has no bin/python)")
        return Installation(installation.name, "python", str(interpreter), env=installation.env)
    return installation
