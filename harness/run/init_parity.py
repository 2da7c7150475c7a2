"""Run the nn_init comparison: both twin scripts on the declared cases, then the judgement.

Each script runs in a process of its own (``python py_scripts/nn_init.py`` and ``Rscript r_scripts/nn_init.R``: two
libtorch builds never share a process, and this one never imports torch), with the cases of
:mod:`harness.contract.nn_init` as JSON, each case carrying the switches of the explanations that select it
(:func:`harness.judge.init_parity.switches_for`), on one thread with glibc's allocator as the workers have it
(:func:`harness.run.pool.worker_env`: the inits draw no reduction, so the count changes no bit; it is fixed anyway).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.contract.nn_init import INIT_SEED, init_cases
from harness.errors import ScriptError, UsageError
from harness.files.paths import script_path
from harness.judge.init_parity import InitParity, judge_init_cases, switches_for
from harness.run.pool import worker_env

__all__ = ["INIT_TIMEOUT_S", "run_init_parity"]

#: Seconds each script may take: both take under 15 s here (R: loading R torch, 200-odd cases), under load too.
INIT_TIMEOUT_S = 300.0


def run_init_parity(folder: Path, timeout: float = INIT_TIMEOUT_S) -> InitParity:
    """Write the cases to ``folder``, run both scripts into it (``python.safetensors``, ``r.safetensors``), judge them.

    Raises:
        UsageError: ``Rscript`` is not on the PATH.
        ScriptError: a script failed as a whole (its last lines of output say why), or ran past ``timeout``.
    """
    rscript = shutil.which("Rscript")
    if rscript is None:
        raise UsageError("Rscript", "not found", "R on the PATH (apt-get install r-base-core; `harness doctor` says more)")
    folder.mkdir(parents=True, exist_ok=True)
    cases = [case | {"switches": switches_for(case)} for case in init_cases()]
    cases_file = folder / "cases.json"
    cases_file.write_text(json.dumps({"seed": INIT_SEED, "cases": cases}, indent=1), encoding="utf-8")
    outputs = {"python": folder / "python.safetensors", "r": folder / "r.safetensors"}
    commands = {"python": [sys.executable, str(script_path("python", "nn_init"))],
                "r": [rscript, str(script_path("r", "nn_init"))]}
    env = {**os.environ, **worker_env(1)}
    for language, command in commands.items():
        outputs[language].unlink(missing_ok=True)
        try:
            done = subprocess.run([*command, str(cases_file), str(outputs[language])], capture_output=True, text=True,
                                  env=env, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as err:
            raise ScriptError(language, "nn_init", "-", "the nn_init cases", f"ran past {timeout:.0f} s") from err
        if done.returncode != 0 or not outputs[language].is_file():
            said = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:]) or f"exit status {done.returncode}"
            raise ScriptError(language, "nn_init", "-", "the nn_init cases", said)
    return judge_init_cases(cases, outputs["python"], outputs["r"])
