"""The scripts run by hand (``python py_scripts/with_autocast.py``, ``Rscript r_scripts/with_autocast.R``): twins in bad input too.

Both shell modes take their flags through the harness (the R one through ``python -m harness prepare``),
so each refusal below must read the same, word for word, in both languages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT
from harness.run.availability import Availability
from tests.support import python_shell, require_r_torch

FRONTENDS = ("python", "r")
_TINY = ["--num-batches", "1", "--epochs", "1"]


def _shell(frontend: str, *args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    """The script run by hand: R's through ``Rscript``; Python's through its ``main_cli`` in this process (what its
    ``__main__`` block runs), but from another folder, which only a process of its own shows."""
    if frontend == "python" and cwd == REPO_ROOT:
        return python_shell("with_autocast", args)
    script = REPO_ROOT / ("py_scripts/with_autocast.py" if frontend == "python" else "r_scripts/with_autocast.R")
    command = [sys.executable, str(script)] if frontend == "python" else ["Rscript", str(script)]
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(params=FRONTENDS)
def frontend(request: pytest.FixtureRequest, availability: Availability) -> str:
    """Each shell mode; the R one needs R torch (it checks for it before asking the harness for a spec)."""
    if request.param == "r":
        require_r_torch(availability)
    name: str = request.param
    return name


def _error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == ExitCode.USAGE_ERROR, done.stderr
    assert done.stdout == ""
    return [line for line in done.stderr.splitlines() if line.startswith("error: ")]


def test_existing_weights_file_is_not_overwritten_without_the_flag(frontend: str, tmp_path: Path) -> None:
    """``--weights-out`` onto an existing file (here a result JSON) is refused in one line and leaves the file as it was."""
    path = tmp_path / "result.json"
    path.write_text('{"schema_version": 2}')
    done = _shell(frontend, "--mode", "default", *_TINY, "--weights-out", str(path))
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: --weights-out must be a path that does not exist yet (or pass --overwrite to replace it), got '{path}'."
    )
    assert _error_lines(done) and path.read_text() == '{"schema_version": 2}'


def test_overwrite_replaces_a_regular_file_with_the_weights(frontend: str, tmp_path: Path) -> None:
    """With ``--overwrite`` an existing regular file is replaced by the safetensors weights."""
    from safetensors.numpy import load_file

    path = tmp_path / "w.safetensors"
    path.write_text("old")
    done = _shell(frontend, "--mode", "default", *_TINY, "--weights-out", str(path), "--overwrite")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["weights_path"] == str(path)
    assert sorted(load_file(path)) == ["layer0.bias", "layer0.weight", "layer1.bias", "layer1.weight", "layer2.bias", "layer2.weight"]


@pytest.mark.parametrize("kind", ["folder", "symbolic link", "special file"])
def test_overwrite_never_replaces_what_is_not_a_regular_file(frontend: str, tmp_path: Path, kind: str) -> None:
    """Even with ``--overwrite``, a folder, a link or a device node is refused, naming what it is."""
    target = tmp_path / "target.json"
    target.write_text("{}")
    path = {"folder": tmp_path, "symbolic link": tmp_path / "link", "special file": Path("/dev/null")}[kind]
    if kind == "symbolic link":
        os.symlink(target, path)
    done = _shell(frontend, "--mode", "default", *_TINY, "--weights-out", str(path), "--overwrite")
    assert _error_lines(done)[-1] == (
        f"error: --weights-out must be a new file or a regular file to replace (this is a {kind}), got '{path}'."
    )
    assert target.read_text() == "{}"


def test_cuda_without_a_gpu_is_the_same_line_as_harness_run(frontend: str) -> None:
    """``--device cuda`` on a machine without a GPU gives harness run's message, not a raw pin_memory error."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = _shell(frontend, "--mode", "autocast", "--device", "cuda")
    assert done.stderr.strip().splitlines() == ["error: device must be 'cpu' on this machine: torch sees no CUDA GPU, got 'cuda'."]


def test_bad_flag_value_is_one_line(frontend: str) -> None:
    """``--lr inf`` is refused by the harness's parser in one line, a usage error, in either language."""
    done = _shell(frontend, "--mode", "default", "--lr", "inf")
    assert _error_lines(done) == [done.stderr.strip()]
    assert done.stderr.startswith("error: argument --lr: must be a finite number, got 'inf' (see ")


def test_debug_shows_the_traceback_and_still_ends_in_the_error_line(frontend: str) -> None:
    """``--debug`` is accepted by the shell mode: a traceback, then the same one ``error:`` line."""
    done = _shell(frontend, "--mode", "default", "--batch-size", "0", "--debug")
    assert done.returncode == ExitCode.USAGE_ERROR
    assert "Traceback" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == "error: batch_size must be a whole number >= 1, got 0."
    plain = _shell(frontend, "--mode", "default", "--batch-size", "0")
    assert plain.stderr.strip() == "error: batch_size must be a whole number >= 1, got 0."


def test_a_script_run_from_another_folder_finds_its_shared_code(frontend: str, tmp_path: Path) -> None:
    """Run by its full path from an unrelated folder, a script loads its shared code (R: _bootstrap.R, shared files, shell.R) and runs."""
    weights = tmp_path / "w.safetensors"
    done = _shell(frontend, "--mode", "default", *_TINY, "--weights-out", str(weights), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["frontend"] == frontend and record["weights_path"] == str(weights) and weights.is_file()
    assert list(tmp_path.iterdir()) == [weights]  # nothing written into the folder it was run from


def test_weights_written_by_hand_get_the_mode_a_plain_write_gives(frontend: str, tmp_path: Path) -> None:
    """Weights written by hand were 0600 from Python (safetensors' temporary file) and 0644 from R: both now follow the umask."""
    import stat

    weights = tmp_path / "w.safetensors"
    done = _shell(frontend, "--mode", "default", *_TINY, "--weights-out", str(weights))
    assert done.returncode == 0, done.stderr
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(weights.stat().st_mode) == 0o666 & ~mask


@pytest.mark.parametrize(
    "args",
    [["--help"], ["-h"], ["--bogus"], [], ["stray"], ["--mode"], ["--mode", "default", "stray"], ["--lr", "-inf", "--mode", "default"],
     ["--mode", "default", "--preset", ""]],
    ids=["help", "h", "unknown-flag", "no-mode", "stray", "mode-without-value", "stray-after", "lr-minus-inf", "empty-preset"],
)
def test_the_r_script_answers_every_flag_as_its_python_twin(availability: Availability, args: list[str]) -> None:
    """``--help``, ``-h``, an unknown flag, no ``--mode``, a stray word: R prints what Python prints (its own name in it), same status.

    R said "Flag --help needs a value" (exit 1), and two lines for a missing mode or a stray word.
    """
    require_r_torch(availability)
    python, r = _shell("python", *args), _shell("r", *args)
    assert r.returncode == python.returncode == (0 if args[:1] in (["--help"], ["-h"]) else ExitCode.USAGE_ERROR)
    # argparse indents the usage lines by the name's length: the help is compared word for word
    assert r.stdout.split() == python.stdout.replace("with_autocast.py", "with_autocast.R").split()
    assert r.stderr == python.stderr.replace("with_autocast.py", "with_autocast.R")
    assert len(r.stderr.splitlines()) == (0 if r.returncode == 0 else 1) and ("usage: with_autocast.R" in r.stdout) == (r.returncode == 0)


def test_a_broken_libtorch_is_one_line(availability: Availability, tmp_path: Path) -> None:
    """A libtorch that will not load (files present, not libraries) ends the R script in one ``error:`` line, not a dozen."""
    require_r_torch(availability)
    home = Path(os.environ.get("TORCH_HOME", ""))
    if not (home / "lib").is_dir():
        pytest.skip("R torch's libtorch is not in $TORCH_HOME/lib here: nothing to break a copy of")
    (tmp_path / "lib").mkdir()
    for library in (home / "lib").iterdir():
        (tmp_path / "lib" / library.name).write_text("not a library")
    script = REPO_ROOT / "r_scripts" / "with_autocast.R"
    done = subprocess.run(["Rscript", str(script), "--mode", "default", *_TINY], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TORCH_HOME": str(tmp_path)})
    assert (done.returncode, done.stdout) == (ExitCode.INTERNAL_ERROR, "")  # R torch's own error, which the harness did not foresee
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("error: ") and "liblantern" in done.stderr
