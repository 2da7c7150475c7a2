"""The R scripts and their Python twins read as text (no R needed): the same files, names, sources and record fields.

What needs ``Rscript`` (parsing, bad input, the record writer, the clock) is in ``tests/integration/test_r_scripts.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness.contract.modes import SCRIPTS
from harness.files.paths import REPO_ROOT, script_path

R_FILES = sorted((REPO_ROOT / "r_scripts").glob("*.R"))
#: Files that are not scripts but twins of each other, shared by every script in both languages and split by job: what a
#: script reads of its run spec, the model, the optimizer, the scaler, the loop features' hooks, the checkpoint, the
#: training loop's frame, the trace, the clock and collector, the record, the patches of the bindings' functions (switches
#: and trace points: Python swaps module functions, R rewrites function bodies; harness/workload/patches.toml says what
#: each does) and the shell mode.
SHARED_PAIRS = {"run_spec", "model", "optimizer", "scaler", "features", "checkpoint", "loop", "tracing", "timing", "record",
                "patches", "shell"}
#: No file of the scripts is longer than this, nor a ``run_workload`` longer than RUN_WORKLOAD_LINES (issue 45: files
#: that grew by accretion are split by job).
MAX_FILE_LINES = 400
RUN_WORKLOAD_LINES = 80
#: Twins that are not training scripts: each runs on its own (none of the shared files, no run spec), given its input by the harness.
#: nn_init: every nn_init case (harness/contract/nn_init.py), run by ``python -m harness inits``.
TOOL_PAIRS = {"nn_init"}
#: The module sweep's sides (py_scripts/modules.py, r_scripts/modules.R; ``python -m harness modules``): twins with a test
#: of their own below (R builds, Python draws and compares, so each has names of its own).
SWEEP_PAIRS = {"modules"}
#: What a tool's Python twin defines that R does not: nn_init's switches, which compute a case as R torch does (the proofs
#: of harness/judge/init_parity.py's explanations), and their table; R computes as it does.
PY_ONLY_TOOL_NAMES = {"nn_init": {"orthogonal_in_float32", "trunc_normal_by_inverse_cdf", "switches"}}
#: R files with no Python twin, named with a leading "_" like _probe.R: the harness's rpy2 entry point (Python's
#: worker imports the scripts), the byte-code cache it loads our files with (Python keeps its own, __pycache__) and the
#: scripts' bootstrap (Python finds its modules by import).
R_ONLY_FILES = {"_bridge", "_bytecode", "_bootstrap"}
#: What R defines that its Python twin does not, because R lacks it: its reason is where each is defined.
#: R torch's scaler refuses CPU tensors, so scaler.R alone holds the lift of that one check (shared by every script that
#: scales; PyTorch's scaler takes CPU tensors itself).
R_LIFT_HELPERS = {"cuda_only_check", "expected_scale_method", "scaler_takes_cpu_tensors", "scaler_facts", "lift_cuda_only_check",
                  "drop_statement", "lifted_check_name"}
#: R's collector escalates by counters a full collection does not reset, and cannot be switched off inside the loop as
#: Python's is (``pause_gc``): timing.R alone takes a due escalation before the loop.
R_COLLECTOR_HELPERS = {"gc_counters", "collect_ahead", "gc_reported", "gc_counter_period", "gc_loop_room"}
R_ONLY_NAMES = {
    # use_trace_names: R names a point inside an optimizer's step by its index in the optimizer's groups, so with two
    # optimizers (loop feature multi_optimizer) the loop says whose step comes; Python names them by the tensor.
    # traced_parameters: the parameters make_optimizer() kept for the trace (R reads them in R code, issue 38).
    # number_point, number_bytes: an R number's bytes written by the sink, not by a 0-d tensor (issue 38); Python's points
    # take a Python number as it is.
    # abort_cli, require_r_torch: R signals cli-formatted conditions and checks R torch is there (Python raises, imports).
    "run_spec": {"abort_cli", "require_r_torch"},
    # model_files, model_functions: each model's file sourced once into an environment of its own (Python imports it).
    "model": {"model_files", "model_functions"},
    "tracing": {"use_trace_names", "traced_parameters", "number_point", "number_bytes"},
    "timing": {"clock_source", *R_COLLECTOR_HELPERS},
    # libtorch_version: read from R torch's namespace (Python's torch says it); R writes its record's JSON itself.
    "record": {"libtorch_version", "json_value", "json_string", "record_keys_json", "exact_json_numbers"},
    "scaler": R_LIFT_HELPERS,
    "optimizer": set(), "features": set(), "checkpoint": set(), "loop": set(),
    # Python's main_cli calls the harness in-process (parse_shell_args, prepare_shell_run_spec, exit_with_error).
    # shell_exit_status: the statuses R ends with before the harness hands them over (Python imports the enum).
    "shell": {"%||%", "amp_parity_r_dir", "shell_exit_status", "prepare_shell_run", "python_library_path", "print_traceback",
              "one_line"},
    # R torch's functions live in a locked namespace and its optimizers are R6 objects: R patches the values a script
    # gets (binding_function() for the clip and the scheduler's function, patch_optimizer(), patch_scaler() and
    # patch_scheduler() for the optimizer's, the scaler's and the scheduler's methods, through patch_methods()),
    # rewriting their bodies as language objects (statements compared as deparsed text, point calls spliced in);
    # Python swaps module functions.
    "patches": {"patch_rows", "patches_of", "binding_function", "patch_optimizer", "patch_scaler", "patch_scheduler",
                "patch_methods", "code_text",
                "is_part", "count_statement",
                "replace_statement", "with_point_calls",
                # each patched function made once per process, byte-compiled (issue 38): Python swaps a module function
                "patched_functions", "rewritten_function",
                # what a model's modules call inside R torch: replaced in its locked namespace, or on each module's R6
                # object (its active bindings), for the run; Python swaps a module's function or a class's method
                "patch_namespace", "replace_binding", "patch_modules", "replace_active_binding"},
}
#: What Python defines that R does not: the context manager that swaps PyTorch's module functions for the run, and its
#: statement normaliser (R compares deparsed code instead).
#: set_determinism: PyTorch's deterministic algorithms on CUDA; R torch has no such switch (r_scripts/loop.R says so).
PY_ONLY_NAMES: dict[str, set[str]] = {stem: set() for stem in SHARED_PAIRS} | {"patches": {"binding_patches", "statement"},
                                                                               "loop": {"set_determinism"}}


def test_every_python_script_has_its_r_partner() -> None:
    """Pairs are found by stem: each declared script and each shared file exists in both languages, and no orphan exists."""
    for stem in SCRIPTS:
        assert script_path("python", stem).exists() and script_path("r", stem).exists()
    py_stems = {p.stem for p in (REPO_ROOT / "py_scripts").glob("*.py") if not p.stem.startswith("_")}
    r_stems = {p.stem for p in R_FILES if not p.stem.startswith("_")}
    assert py_stems == set(SCRIPTS) | SHARED_PAIRS | TOOL_PAIRS | SWEEP_PAIRS
    assert r_stems == set(SCRIPTS) | SHARED_PAIRS | TOOL_PAIRS | SWEEP_PAIRS
    assert R_ONLY_FILES <= {p.stem for p in R_FILES}  # R-only files start with "_": no twin is expected


def _py_names(stem: str) -> list[str]:
    """The module's top-level functions and constants in order, as R spells them (``_DTYPES`` → ``dtypes``)."""
    tree = ast.parse(script_path("python", stem).read_text())
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id != "__all__":
                names.append(target.id)
    return [name.lstrip("_").lower() for name in names]


def _r_names(stem: str) -> list[str]:
    """The R file's top-level definitions (``name <- ...`` at the start of a line), in order."""
    return re.findall(r"^`?([\w.%|]+)`? <- ", script_path("r", stem).read_text(), re.M)


@pytest.mark.parametrize("stem", sorted(SHARED_PAIRS))
def test_the_shared_files_define_the_same_names_in_the_same_order(stem: str) -> None:
    """Each shared R file defines what its Python twin defines, in the same order; R's extras are the declared R-only ones."""
    py, r = _py_names(stem), _r_names(stem)
    assert [name for name in r if name not in R_ONLY_NAMES[stem]] == [name for name in py if name not in PY_ONLY_NAMES[stem]]
    assert set(R_ONLY_NAMES[stem]) <= set(r) and set(PY_ONLY_NAMES[stem]) <= set(py)
    if stem not in ("shell", "patches"):  # shell.R says once, at its top, that all but main_cli() are R-only; patches.R too
        text = script_path("r", stem).read_text()
        for name in R_ONLY_NAMES[stem]:
            doc = text.split(f"\n{name} <- ")[0].rsplit("\n\n", 1)[-1]  # the roxygen block above the definition
            assert doc.startswith("#' R-only"), f"{name} in {stem}.R does not say why it is R-only"


@pytest.mark.parametrize("stem", sorted(TOOL_PAIRS))
def test_the_tool_twins_define_the_same_names_in_the_same_order(stem: str) -> None:
    """A tool's twins define the same functions in the same order, but for what its Python twin declares its own."""
    assert [n for n in _py_names(stem) if n not in PY_ONLY_TOOL_NAMES[stem]] == _r_names(stem)
    assert PY_ONLY_TOOL_NAMES[stem] <= set(_py_names(stem))


def test_only_the_bootstrap_and_the_bridge_load_the_shared_code() -> None:
    """Each script sources _bootstrap.R and nothing else; _bootstrap.R loads the shared files and shell.R, _bridge.R
    _bytecode.R (when sourced by hand) and then the same shared files, in the same order, byte-compiled (the shell mode is
    not the bridge's); no shared file sources another (a model's file is loaded by model.R)."""
    def sourced_files(text: str) -> list[str]:  # the first quoted file name in each source(...) call, comments left out
        text = re.sub(r"(?m)^\s*#.*$", "", text)
        windows = (text[call.end():call.end() + 200] for call in re.finditer(r"\bsource(?:_compiled)?\(", text))
        return [m.group(1) for window in windows if (m := re.search(r'"(\w+\.R)"', window))]

    def listed(stem: str) -> list[str]:  # the files a `for (part in c(...))` loads
        text = script_path("r", stem).read_text()
        return re.findall(r'"(\w+\.R)"', text[text.index("for (part in c("):].split(")) {")[0])

    sourced = {p.stem: sourced_files(p.read_text()) for p in R_FILES}
    for stem in SCRIPTS:
        assert sourced[stem] == ["_bootstrap.R"], sourced[stem]
    shared = [f"{stem}.R" for stem in SHARED_PAIRS - {"shell"}]
    assert sorted(listed("_bootstrap")) == sorted([*shared, "shell.R"]) and listed("_bootstrap")[-1] == "shell.R"
    assert listed("_bridge") == listed("_bootstrap")[:-1]
    assert sourced["_bridge"] == ["_bytecode.R"]
    assert all(sourced[stem] == [] for stem in SHARED_PAIRS | {"_bytecode"})


def test_no_script_file_is_long() -> None:
    """Every file of py_scripts/ and r_scripts/ (models included) is at most MAX_FILE_LINES lines, and each script's
    run_workload at most RUN_WORKLOAD_LINES, in both languages."""
    files = [*(REPO_ROOT / "py_scripts").rglob("*.py"), *(REPO_ROOT / "r_scripts").rglob("*.R")]
    long = {str(p.relative_to(REPO_ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert not long, long
    for stem in SCRIPTS:
        py = ast.parse(script_path("python", stem).read_text())
        (function,) = (node for node in py.body if isinstance(node, ast.FunctionDef) and node.name == "run_workload")
        assert function.end_lineno is not None and function.end_lineno - function.lineno + 1 <= RUN_WORKLOAD_LINES, stem
        r = script_path("r", stem).read_text().split("\nrun_workload <- function(")[1]
        assert r[:r.index("\n}\n")].count("\n") + 2 <= RUN_WORKLOAD_LINES, stem


def test_each_model_has_its_forward_in_both_languages() -> None:
    """Each model of harness/contract/models.py has a module of py_scripts/models/ and a file of r_scripts/models/ that
    define its build and forward (and its loss where it has its own: a classifier's), the same in both (R's extras each
    say why they are R-only), and no other file is there; a variant (``files``: another row's forward with other dims)
    has none of its own."""
    from harness.contract.models import MODELS

    py = {p.stem for p in (REPO_ROOT / "py_scripts" / "models").glob("*.py") if p.stem != "__init__"}
    r = {p.stem for p in (REPO_ROOT / "r_scripts" / "models").glob("*.R")}
    files = {row.files or name for name, row in MODELS.items()}
    assert py == r == files
    assert all(row.files is None or MODELS[row.files].files is None for row in MODELS.values())
    for name in files:
        tree = ast.parse((REPO_ROOT / "py_scripts" / "models" / f"{name}.py").read_text())
        functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert functions in (["build", "forward"], ["build", "forward", "loss"]), name
        text = (REPO_ROOT / "r_scripts" / "models" / f"{name}.R").read_text()
        r_only = re.findall(r"^#' R-only[^\n]*\n(?:#'[^\n]*\n)*(\w+) <- ", text, re.M)
        assert [f for f in re.findall(r"^(\w+) <- ", text, re.M) if f not in r_only] == functions, name


def _code_lines(path: Path) -> list[str]:
    """The R file's lines that are code: comment and roxygen lines left out."""
    return [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]


def test_r_files_find_themselves_in_one_place() -> None:
    """Only r_file_path() in _bootstrap.R reads where R keeps a file's path (`ofile`, `--file=`); each script repeats its expression
    verbatim in its one cold-start line (nothing is loaded before it), and no other R file reads either or walks the frames."""
    readers = {p.stem: [line for line in _code_lines(p) if "ofile" in line or "--file=" in line] for p in R_FILES}
    readers = {stem: lines for stem, lines in readers.items() if lines}
    assert set(readers) == {"_bootstrap", *SCRIPTS}, readers
    (finder_line,) = readers["_bootstrap"]
    match = re.fullmatch(r'  path <- (dynGet\("ofile", .*\))', finder_line)
    assert match, f"r_file_path() in _bootstrap.R no longer reads: {finder_line!r}"
    for stem in SCRIPTS:
        (cold_start,) = readers[stem]  # one line, not a copy of the function
        assert match.group(1) in cold_start and "_bootstrap.R" in cold_start, cold_start
    assert not [p.name for p in R_FILES if any("sys.frames" in line or "sys.frame(" in line for line in _code_lines(p))]


def test_the_loop_builds_records_with_the_same_field_names() -> None:
    """The names the loop's frame passes to make_record (for every script: finish_loop) are the same in both languages."""
    def names(text: str, call: str) -> set[str]:
        body = text[text.index(call):]
        return set(re.findall(r"(\w+)\s*=(?!=)", body[: body.index("\n    )") if "\n    )" in body else len(body)]))

    py = names(script_path("python", "loop").read_text(), "make_record(")
    r = names(script_path("r", "loop").read_text(), "make_record(")
    assert py == r and {"losses", "loss_scale", "skipped", "output_dtype"} <= py


def test_the_r_files_exit_with_the_harness_statuses() -> None:
    """R's own exit statuses are :class:`harness.errors.ExitCode`'s: the fallback table in shell.R, and every literal ``quit`` status."""
    from harness.errors import ExitCode

    shell = script_path("r", "shell").read_text()
    table = re.search(r"^shell_exit_status <- list\(usage_error = (\d+)L, internal_error = (\d+)L\)$", shell, re.M)
    assert table, "shell.R no longer defines shell_exit_status as list(usage_error = NL, internal_error = NL)"
    assert (int(table.group(1)), int(table.group(2))) == (ExitCode.USAGE_ERROR, ExitCode.INTERNAL_ERROR)
    literal = {p.name: [int(n) for n in re.findall(r"quit\(save = \"no\", status = (\d+)L\)", p.read_text())] for p in R_FILES}
    assert {name: codes for name, codes in literal.items() if codes} == {"_bootstrap.R": [4], "_bridge.R": [4]}
    assert ExitCode.USAGE_ERROR == 4
@pytest.mark.parametrize("stem", list(SCRIPTS))
def test_each_script_pair_defines_the_same_names_and_names_itself(stem: str) -> None:
    """A script defines what its twin does, in the same order (its ``SCRIPT``/``script`` constant, its helpers,
    ``run_workload``), and the constant is its own stem: the modes are the run spec's, never a list of its own."""
    assert _py_names(stem) == _r_names(stem) and _py_names(stem)[0] == "script" and _py_names(stem)[-1] == "run_workload"
    assert f'\nSCRIPT = "{stem}"\n' in script_path("python", stem).read_text()
    assert f'\nscript <- "{stem}"\n' in script_path("r", stem).read_text()
    for lang in ("python", "r"):
        assert not re.search(r"(?m)^(MODES|modes) (=|<-)", script_path(lang, stem).read_text()), f"{stem} ({lang}) lists its modes"


def test_the_scaler_lift_lives_in_scaler_r_only() -> None:
    """The lift of R torch's CUDA-only check is defined once, in scaler.R (make_grad_scaler() uses it), and in no script."""
    scaler = _r_names("scaler")
    assert R_LIFT_HELPERS <= set(scaler) and scaler.index("make_grad_scaler") < min(scaler.index(n) for n in R_LIFT_HELPERS)
    for stem in SCRIPTS:
        assert not R_LIFT_HELPERS & set(_r_names(stem)), stem
    assert "lift_cuda_only_check(scaler)" in script_path("r", "scaler").read_text().split("\nmake_grad_scaler <- ")[1].split("\n}\n")[0]


def test_neither_language_keeps_its_own_copy_of_the_record_fields() -> None:
    """The record's fields, kinds and version come from the run spec (harness/contract/record.py): record.py and record.R
    define neither, both read ``record_fields`` and ``record_schema_version``, and R names no record field itself (its
    writer keeps arrays by the kinds), nor any dtype (the run spec's ``dtypes``)."""
    from harness.contract.dtypes import DTYPES
    from harness.contract.record import RECORD_FIELD_NAMES

    for lang in ("python", "r"):
        text = script_path(lang, "record").read_text()
        names = _py_names("record") if lang == "python" else _r_names("record")
        assert not {"record_fields", "record_schema_version"} & set(names), lang
        assert 'spec["record_fields"]' in text or "spec$record_fields" in text
        assert 'spec["record_schema_version"]' in text or "spec$record_schema_version" in text
    code = [line.split("#")[0] for stem in SHARED_PAIRS for line in script_path("r", stem).read_text().splitlines()]
    lists = [line for line in code if len(set(re.findall(r'"(\w+)"', line)) & set(RECORD_FIELD_NAMES)) > 1]
    assert not lists, f"the shared R files list record fields of their own (read their kinds from the run spec): {lists}"
    libtorch_names = {f'"{d.libtorch}"' for d in DTYPES.values()} | {f"{d.libtorch} =" for d in DTYPES.values()}
    tables = [line for line in code if sum(name in line for name in libtorch_names) > 1]
    assert not tables, f"the shared R files keep a dtype table of their own (read the run spec's dtypes): {tables}"
    assert "record_keys_json <- local({" in script_path("r", "record").read_text()  # a function, caching the keys it quoted


#: What the module sweep's R side defines that Python's does not (each says why where it is defined: R copies PyTorch's
#: weights in by name and maps the names back, reads one request in and writes one answer out; Python draws the samples,
#: encodes them and compares the two sides' files, which R never does).
MODULES_R_ONLY = {"load_weights", "python_names", "run_module", "run_sample", "amp_parity_modules_reply"}


def test_the_module_sweep_sides_share_their_names_in_the_same_order() -> None:
    """What both sides of the sweep define comes in the same order (R's extras are the declared R-only ones, each saying
    so); Python's extras (drawing, encoding and comparing the samples) are Python's alone."""
    py, r = _py_names("modules"), _r_names("modules")
    shared = [name for name in r if name not in MODULES_R_ONLY]
    assert shared == [name for name in py if name in shared]
    assert {"script", "flatten", "decode", "build", "run_mode", "one_line"} <= set(shared)
    text = script_path("r", "modules").read_text()
    for name in MODULES_R_ONLY:
        doc = text.split(f"\n{name} <- ")[0].rsplit("\n\n", 1)[-1]
        assert doc.startswith("#' R-only"), f"{name} in modules.R does not say why it is R-only"
