"""The harness as a new user installs it: a wheel built from the checkout, installed into a fresh virtual environment that
reuses this interpreter's torch, runs ``amp-parity run --preset tiny --frontend python`` (and an R cell, where R torch is
active) from an empty folder that is not the checkout, with nothing of the checkout on its path.

One module-scoped build and install serve every test here (the build copies the tree, so the checkout gets no build/).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT
from harness.files.version import __version__
from harness.run.availability import Availability
from tests.support import require_r_torch

#: What a source tree needs to build the wheel: the metadata, and the folders the wheel maps in (pyproject.toml).
_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "harness", "py_scripts", "r_scripts", "fixtures/manifests")


@dataclass(frozen=True)
class Installed:
    """The built wheel, the virtual environment it is installed in, and what a user's shell there would have."""

    wheel: Path
    venv: Path
    home: Path
    env: dict[str, str]

    def command(self, *args: str, name: str = "amp-parity", timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """``amp-parity ARGS`` (or ``python -m harness`` for ``name="python"``) from an empty folder of its own."""
        folder = self.home / "work"
        folder.mkdir(exist_ok=True)
        program = [str(self.venv / "bin" / "amp-parity")] if name == "amp-parity" else [str(self.venv / "bin" / "python"), "-m", "harness"]
        return subprocess.run([*program, *args], cwd=folder, env=self.env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The wheel built from a copy of the checkout's sources, installed (no index: every dependency is this interpreter's)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    for part in _SOURCES:
        copy = shutil.copytree if (REPO_ROOT / part).is_dir() else shutil.copy
        (source / part).parent.mkdir(parents=True, exist_ok=True)
        copy(REPO_ROOT / part, source / part, **({"ignore": shutil.ignore_patterns("__pycache__", "cache")}  # type: ignore[operator]
                                                 if (REPO_ROOT / part).is_dir() else {}))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"), str(source)],
                   check=True, capture_output=True, text=True, timeout=600)
    (wheel,) = (root / "dist").glob("amp_parity-*.whl")
    venv = root / "venv"
    # --without-pip: the venv's own (older) setuptools would hide this interpreter's, which torch's metadata requires;
    # this interpreter's pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True, timeout=300)
    # from its own folder and without PYTHONPATH: a checkout on the path (``python -m`` puts the working folder first) is
    # amp-parity of the wheel's version, "already installed", and pip would install nothing
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([str(venv / "bin" / "python"), *pip[1:], "install", "--no-index", str(wheel)], check=True, capture_output=True,
                   text=True, timeout=600, cwd=root, env=clean)
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMP_PARITY_") and k not in ("PYTHONPATH", "XDG_CACHE_HOME")}
    env |= {"HOME": str(home), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "TMPDIR": str(root / "tmp")}
    (root / "tmp").mkdir()
    yield Installed(wheel, venv, home, env)


def test_the_wheel_holds_the_scripts_the_r_files_the_manifests_and_its_metadata(installed: Installed) -> None:
    """Every R file, every Python script and every fixture manifest is package data; licence, py.typed and the command are there."""
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(f"amp_parity-{__version__}.dist-info/METADATA").decode()
        entry_points = wheel.read(f"amp_parity-{__version__}.dist-info/entry_points.txt").decode()
    for folder, inside in (("r_scripts", "r_scripts"), ("py_scripts", "py_scripts"), ("fixtures/manifests", "fixtures/manifests")):
        for path in (REPO_ROOT / folder).iterdir():
            if path.is_file():
                assert f"harness/_project/{inside}/{path.name}" in names, path
    assert {"harness/py.typed", "harness/judge/known_differences.toml", f"amp_parity-{__version__}.dist-info/licenses/LICENSE"} <= names
    assert not any(n.startswith(("py_scripts/", "r_scripts/", "tests/")) for n in names)  # nothing stray at the top level
    assert "amp-parity = harness.cli.main:console_main" in entry_points
    for field in ("License-Expression: MIT", "Author: ", "Classifier: Typing :: Typed", "Keywords: "):
        assert field in metadata, field
    assert "Project-URL" not in metadata  # no link to a host the project does not own (issue 47)


def test_the_installed_command_runs_the_tiny_python_cells_from_an_empty_folder(installed: Installed) -> None:
    """``amp-parity run --preset tiny --frontend python`` (every mode, plain SGD) from an empty folder: every cell ok, fixtures
    in the user cache (not in the package), and a result whose provenance says it came from an installed package, without
    a commit."""
    done = installed.command("run", "--preset", "tiny", "--frontend", "python", "--optimizer", "sgd", "--json", "tiny.json")
    assert done.returncode == ExitCode.OK, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((installed.home / "work" / "tiny.json").read_text())
    assert [c["status"] for c in result["cells"]] == ["ok"] * 7  # with_autocast's four modes, the scaler script's three
    provenance = result["provenance"]
    assert (provenance["source"], provenance["commit"], provenance["harness_version"]) == ("installed", None, __version__)
    assert provenance["note"] == "installed package: no checkout, so no commit" and "r_scripts/_bridge.R" in provenance["files"]
    assert Path(provenance["scripts_root"]).parts[-2:] == ("harness", "_project") and str(REPO_ROOT) not in provenance["scripts_root"]
    assert any((installed.home / ".cache" / "amp-parity" / "fixtures").iterdir())
    assert "provenance: harness" in done.stdout and "installed package: no checkout" in done.stdout


def test_the_command_is_named_as_it_was_invoked(installed: Installed) -> None:
    """``amp-parity`` and ``python -m harness`` each name themselves in their help and their usage errors."""
    console = installed.command("run", "--bogus")
    module = installed.command("run", "--bogus", name="python")
    assert (console.returncode, module.returncode) == (ExitCode.USAGE_ERROR, ExitCode.USAGE_ERROR)
    assert console.stderr.strip() == "error: unrecognized arguments: --bogus (see amp-parity run --help)."
    assert module.stderr.strip() == "error: unrecognized arguments: --bogus (see python -m harness run --help)."
    assert installed.command("--help").stdout.startswith("usage: amp-parity ")


def test_the_installed_command_runs_an_r_cell(installed: Installed, availability: Availability) -> None:
    """Where R torch is active, the installed package runs an R cell from its own r_scripts/ (R's worker, its bridge) and pairs it."""
    require_r_torch(availability)
    done = installed.command("run", "--preset", "tiny", "--frontend", "python,r", "--mode", "default", "--optimizer", "sgd",
                             "--rounds", "1", "--warmup-rounds", "1", "--json", "r.json")
    assert done.returncode == ExitCode.OK, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((installed.home / "work" / "r.json").read_text())
    assert [(c["frontend"], c["status"]) for c in result["cells"]] == [("python", "ok"), ("r", "ok")] * 2  # both scripts' default
    assert [p["verdict"] for p in result["pairs"]] == ["identical", "identical"]
