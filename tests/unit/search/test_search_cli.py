"""``harness search``'s refusals: each bad option one line and exit 4, before any worker starts and before --out is
touched (a unit test starts no process: a refusal that came after the workers' start would fail here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_cli


@pytest.mark.parametrize(("args", "says"), [
    (["--budget", "ten"], "--budget must be a number of examples (200) or of seconds (90s), above 0, got 'ten'."),
    (["--budget", "0s"], "--budget must be a number of examples (200) or of seconds (90s), above 0, got '0s'."),
    (["--model", "resnet"], "--model must be one of mlp (the only model until the model is a row), got 'resnet'."),
    (["--optimizer", "nadam"], "optimizer must be one of"),
    (["--feature", "warmup"], "feature must be one of"),
    (["--mode", "fp8"], "mode must be one of"),
    (["--seed", "-1"], "--seed must be a whole number >= 0, got -1."),
    (["--optimizer", "ignite_adagrad", "--feature", "param_groups"], "--feature must be a feature the search can draw"),
])
def test_a_bad_option_is_one_line_and_exit_4(args: list[str], says: str, tmp_path: Path) -> None:
    done = run_cli("search", *args, "--out", str(tmp_path / "out"), "--database", str(tmp_path / "db"))
    assert done.returncode == 4, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_an_out_folder_that_holds_files_is_refused_without_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):  # --overwrite replaces an earlier search's output, never a folder of other files
        done = run_cli("search", "--out", str(out), "--database", str(tmp_path / "db"), *extra)
        assert done.returncode == 4 and len(done.stderr.strip().splitlines()) == 1, done
        assert "--out must be" in done.stderr
    assert (out / "notes.txt").read_text() == "mine"


def test_an_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("mine")
    done = run_cli("search", "--out", str(out), "--database", str(tmp_path / "db"))
    assert done.returncode == 4 and "--out must be a folder (this is a file)" in done.stderr, done
    assert out.read_text() == "mine"
