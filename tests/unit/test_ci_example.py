"""The CI example a user copies (``.github/workflows/parity.yml``) cannot rot: its harness commands parse, and its slices merge.

Read as text (PyYAML is no test dependency): every ``python -m harness ...`` line is parsed by the harness's own
parser, the ``run`` slices are checked against what ``merge`` refuses (another workload, a cell id in two inputs, a
baseline no slice ran), and the ``merge`` job is checked to read every slice and to publish the report it writes.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from harness.cli.main import _parser
from harness.files.paths import REPO_ROOT
from harness.store.merge import blocking_differences
from harness.views.summary import SUMMARY_FILE
from harness.workload.flags import spec_from_args
from harness.workload.installations import parse_frontends

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "parity.yml"
#: ``python -m harness ARGS`` (or ``python3``), to the end of the line.
_HARNESS = re.compile(r"\bpython3? -m harness (.+)")
#: What GitHub allows as a job id (no dots: ``cpu-torch-2_13``, named ``cpu-torch-2.13``).
_JOB_ID = re.compile(r"^  ([A-Za-z_][A-Za-z0-9_-]*):\s*$", re.MULTILINE)


def _text() -> str:
    return WORKFLOW.read_text(encoding="utf-8")


def _commands() -> list[list[str]]:
    """Each harness command line of the workflow, as the words after ``-m harness``."""
    commands = []
    for line in _HARNESS.findall(re.sub(r"\\\n\s*", " ", _text())):
        words = shlex.split(line)
        assert not {"&&", "||", ";", "|"} & set(words), f"one harness command per line, please: {line}"
        commands.append(words)
    return commands


def _parsed(command: str) -> list[argparse.Namespace]:
    return [_parser().parse_args(words) for words in _commands() if words[0] == command]


def _frontend_names(args: argparse.Namespace) -> list[str]:
    """The installation names a ``run`` gives, each item's name and language checked as ``--frontend`` checks them."""
    names = []
    for item in (i for value in args.frontend for i in value.split(",")):
        name, sep, rest = item.partition("=")
        # Only the name and the language: the paths are the CI machine's, not this one's.
        names.append(parse_frontends([f"{name}={rest.partition(':')[0]}" if sep else name])[0].name)
    return names


def test_every_harness_command_parses() -> None:
    """Each command parses (a renamed or removed flag fails here); there are several slices and one merge."""
    commands = _commands()
    assert [c[0] for c in commands].count("run") >= 3 and [c[0] for c in commands].count("merge") == 1, commands
    for words in commands:
        _parser().parse_args(words)  # a flag it refuses exits (OneLineParser), failing the test


def test_the_slices_merge() -> None:
    """The ``run`` slices are one workload (spec equal but for the device and what it decides), name each cell once, and are all merged."""
    runs = _parsed("run")
    specs = [spec_from_args(args).to_json() for args in runs]
    for args, spec in zip(runs, specs, strict=True):
        differing = blocking_differences(specs[0], spec)
        assert not differing, f"{args.json} runs another workload than {runs[0].json}: its {sorted(differing)} differ"
    cells = [(name, spec["device"]) for args, spec in zip(runs, specs, strict=True) for name in _frontend_names(args)]
    assert len(cells) == len(set(cells)), f"an installation named twice on one device: {cells}"
    assert all(args.json is not None for args in runs), "every slice writes its result (--json)"

    merge, = _parsed("merge")
    merged = [Path(item.rpartition("=")[2]).name for item in merge.results]  # [LABEL=]RESULT
    assert merged == [args.json.name for args in runs], "the merge reads every slice's result"
    assert merge.baseline in {name for name, _ in cells}
    assert f'cat {merge.out}/{SUMMARY_FILE} >> "$GITHUB_STEP_SUMMARY"' in _text(), "the merge job publishes its report's summary"


def test_every_slice_uploads_its_result_and_the_merge_needs_them_all() -> None:
    """Each run job uploads its result folder with the weights marker (a hidden file); ``merge`` needs every other job."""
    text = _text()
    jobs = _JOB_ID.findall(text.split("\njobs:\n", 1)[1])
    assert "merge" in jobs and len(jobs) >= 4, jobs
    needs = re.search(r"^    needs: \[(.*)\]$", text, re.MULTILINE)
    assert needs is not None and sorted(n.strip() for n in needs.group(1).split(",")) == sorted(j for j in jobs if j != "merge")
    uploads = text.count("actions/upload-artifact@v4")
    assert uploads == len(jobs) and text.count("include-hidden-files: true") == len(jobs) - 1
    assert "actions/download-artifact@v4" in text and "merge-multiple: true" in text


def test_the_workflow_is_yaml() -> None:
    """Where PyYAML is installed: the file loads, and the jobs are the ones the text checks found."""
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(_text())
    assert set(workflow["jobs"]) == set(_JOB_ID.findall(_text().split("\njobs:\n", 1)[1]))
    assert set(workflow["jobs"]["merge"]["needs"]) == set(workflow["jobs"]) - {"merge"}


def test_the_workflow_is_where_the_docs_say() -> None:
    """docs/installations.md sends readers to this file."""
    assert Path(".github/workflows/parity.yml").as_posix() in (REPO_ROOT / "docs" / "installations.md").read_text(encoding="utf-8")
