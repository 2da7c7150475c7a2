"""Installations are named and checked before any process starts: every bad one is one line naming it and the fix."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.workload.installations import (
    DEFAULT_INSTALLATIONS,
    INSTALLATIONS_MAX_BYTES,
    MAX_NAME_LENGTH,
    Installation,
    load_installations,
    parse_frontends,
)


def _venv(tmp_path: Path) -> Path:
    """A folder shaped like a venv (bin/python): parsing looks at paths only."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").write_text("#!/bin/sh\n")
    return tmp_path / "venv"


def test_no_frontend_means_this_harness_s_python_and_r() -> None:
    assert parse_frontends(None) == (DEFAULT_INSTALLATIONS["python"], DEFAULT_INSTALLATIONS["r"])
    assert all(i.is_default for i in parse_frontends(["python,r"]))


def test_named_installations_keep_the_order_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``NAME=python:PATH`` (a venv folder means its bin/python, the link kept), ``NAME=r:DIR`` (a library), ``NAME=r:FILE`` (activate)."""
    venv = _venv(tmp_path)
    (tmp_path / "Rlib").mkdir()
    (tmp_path / "activate.sh").write_text("export R_LIBS=x\n")
    monkeypatch.chdir(tmp_path)
    got = parse_frontends([f"r,py28=python:{venv}", "rlib=r:Rlib,r28=r:activate.sh,h100=python"])
    assert [i.name for i in got] == ["r", "py28", "rlib", "r28", "h100"]
    assert got[1] == Installation("py28", "python", python=str(venv / "bin" / "python"))
    assert got[2] == Installation("rlib", "r", r_libs=str(tmp_path / "Rlib"))
    assert got[3] == Installation("r28", "r", activate=str(tmp_path / "activate.sh"))
    assert got[4] == Installation("h100", "python") and got[4].is_default  # this harness's own interpreter, renamed


def test_a_venv_interpreter_is_not_resolved_through_its_link(tmp_path: Path) -> None:
    """A venv's bin/python links to the system interpreter; only its own path makes Python read the venv's site-packages."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    (got,) = parse_frontends([f"v=python:{tmp_path / 'bin' / 'python'}"])
    assert got.python == str(tmp_path / "bin" / "python")


@pytest.mark.parametrize(("item", "says"), [
    ("julia", "one of 'python', 'r', or NAME=python:PATH / NAME=r:PATH, got 'julia'"),
    ("py-28=python", "a name of letters, digits, '_' and '.', starting with a letter (not 'py-28'"),
    ("py28=julia", "a language of 'python', 'r' (not 'julia')"),
    ("py28=python:/no/such/python", "a path that exists ('/no/such/python' does not)"),
    ("python,python", "a name not given twice ('python' already names python: this harness's own)"),
])
def test_a_bad_frontend_is_one_line(item: str, says: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_frontends([item])
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_a_venv_folder_without_an_interpreter_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="an interpreter or a venv folder"):
        parse_frontends([f"v=python:{tmp_path}"])


def test_an_installations_file_names_what_a_command_line_cannot(tmp_path: Path) -> None:
    """Relative paths are read from the file's folder; ``env`` reaches the worker (and the activation script)."""
    venv = _venv(tmp_path)
    (tmp_path / "activate.sh").write_text("true\n")
    path = tmp_path / "installations.toml"
    path.write_text('[py28]\nlanguage = "python"\npython = "venv"\n\n'
                    '[r28]\nlanguage = "r"\nactivate = "activate.sh"\nenv = { AMP_RTORCH_TORCH_PYTHON = "venv/bin/python" }\n')
    known = load_installations(path)
    assert known["py28"].python == str(venv / "bin" / "python")
    env = {"AMP_RTORCH_TORCH_PYTHON": "venv/bin/python"}
    assert known["r28"] == Installation("r28", "r", activate=str(tmp_path / "activate.sh"), env=env)
    assert [i.name for i in parse_frontends(["python,r28"], known)] == ["python", "r28"]


@pytest.mark.parametrize(("text", "says"), [
    ('[a]\nlanguage = "python"\npyhton = "x"\n', "only the keys activate, env, language, python, r_libs (not pyhton)"),
    ('[a]\nlanguage = "julia"\n', "a language of 'python', 'r'"),
    ('[a]\nlanguage = "r"\npython = "."\n', "an R installation with r_libs or activate, not python"),
    ('[a]\nlanguage = "python"\nenv = { X = 1 }\n', "a table of strings"),
    ("[a\n", "a TOML file"),
])
def test_a_bad_installations_file_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "i.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as refused:
        load_installations(path)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_an_installation_round_trips_as_stored() -> None:
    installation = Installation("r28", "r", activate="/a.sh", env={"X": "1"})
    assert Installation.from_json(installation.to_json()) == installation
    assert installation.to_json() == {"name": "r28", "language": "r", "activate": "/a.sh", "env": {"X": "1"}}


@pytest.mark.parametrize("item", ["python,r=python", "r=python", "python=r", "r,python=r:."])
def test_python_and_r_cannot_name_the_other_language(item: str) -> None:
    """``r=python`` printed "python vs r: identical" for two Pythons: the language names stay their languages'."""
    with pytest.raises(UsageError) as refused:
        parse_frontends([item])
    name, _, rest = item.split(",")[-1].partition("=")
    other = "Python" if rest.startswith("python") else "R"
    assert f"must be a name other than {name!r} for a {other} installation" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_python_and_r_may_name_another_installation_of_their_own_language(tmp_path: Path) -> None:
    """``python=python:VENV`` and ``r=r:DIR`` rebind a language's name to another installation of that language."""
    venv = _venv(tmp_path)
    got = parse_frontends([f"python=python:{venv},r=r:{tmp_path}"])
    assert [(i.name, i.language) for i in got] == [("python", "python"), ("r", "r")]


def test_an_installations_file_cannot_bind_r_to_python(tmp_path: Path) -> None:
    """``[r] language = "python"`` is refused as ``--frontend r=python`` is, labelled ``--installations``."""
    path = tmp_path / "i.toml"
    path.write_text('[r]\nlanguage = "python"\n')
    with pytest.raises(UsageError, match=r"^--installations must be a name other than 'r' for a Python installation"):
        load_installations(path)


def test_a_name_longer_than_the_bound_is_refused_before_any_cell() -> None:
    """A 300-character name was accepted, and every cell then failed with "File name too long": the bound is checked where
    names are parsed, in one short line."""
    with pytest.raises(UsageError) as refused:
        parse_frontends([f"{'a' * 300}=python"])
    assert str(refused.value).startswith(f"--frontend must be a name of at most {MAX_NAME_LENGTH} characters (not 300")
    assert len(str(refused.value)) < 250
    assert parse_frontends([f"{'a' * MAX_NAME_LENGTH}=python"])[0].name == "a" * MAX_NAME_LENGTH


@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "large"])
def test_an_installations_file_that_is_no_regular_small_file_is_refused(tmp_path: Path, kind: str) -> None:
    """``/dev/zero`` took all of the machine's memory and a FIFO hung: both are refused unread, as are a folder and a file
    over the bound, in one line labelled ``--installations``."""
    path = {"device": Path("/dev/zero"), "fifo": tmp_path / "fifo", "folder": tmp_path, "large": tmp_path / "big.toml"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "large":
        path.write_text("# padding\n" * (INSTALLATIONS_MAX_BYTES // 10 + 1))
    with pytest.raises(UsageError) as refused:
        load_installations(path)
    assert str(refused.value).startswith("--installations must be a regular file holding TOML (")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("text", "says"), [
    ('[a]\npython = "x"\n', "--installations must be a table with language = one of 'python', 'r' (it has none)"),
    ('[a]\nlanguage = 3\n', "--installations must be a language of 'python', 'r' (not 3 (int))"),
    ('[a]\nlanguage = "python"\npython = "/no/such"\n', "--installations must be a path that exists ('/no/such' does not)"),
    ('[a]\nlanguage = "python"\npython = 7\n', "--installations must be a path as a string (not 7)"),
    ('[a]\nlanguage = "r"\npython = "."\n', "--installations must be an R installation with r_libs or activate, not python"),
    ('[a-b]\nlanguage = "r"\n', "--installations must be a name of letters"),
])
def test_every_installations_file_error_names_the_option_and_no_none(tmp_path: Path, text: str, says: str) -> None:
    """An installations file's errors say ``--installations`` (they said ``--frontend``), and a missing language is said
    to be missing, not "(not 'None')"."""
    path = tmp_path / "i.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as refused:
        load_installations(path)
    assert str(refused.value).startswith(says) and "None" not in str(refused.value)
