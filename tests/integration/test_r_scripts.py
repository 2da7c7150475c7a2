"""The R scripts under Rscript without R torch: they parse, refuse bad input, load their shared code and write records as Python reads them.

The twins read as text (names, sources, record fields) are in ``tests/unit/scripts/test_r_scripts.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.contract.modes import SCRIPTS
from harness.errors import ExitCode
from harness.files.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(shutil.which("Rscript") is None, reason="R is not installed: apt-get install r-base-core")
R_FILES = sorted((REPO_ROOT / "r_scripts").glob("*.R"))


def _rscript(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["Rscript", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)


def _r_value(expression: str) -> list[str]:
    """Source the shared files (no torch needed) and print an R character vector one element per line."""
    done = _rscript("-e", f'source("r_scripts/_bootstrap.R"); writeLines({expression})')
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("path", R_FILES, ids=[p.name for p in R_FILES])
def test_r_files_parse(path: Path) -> None:
    """Every R file under r_scripts/ parses."""
    done = _rscript("-e", f'invisible(parse(file = "{path}"))')
    assert done.returncode == 0, done.stderr


def test_each_file_loads_what_its_job_needs() -> None:
    """Sourcing _bridge.R (given its folder, as the harness gives it) yields the entry point and the workload's pieces but not the
    shell mode; a script sourced on its own gets both and r_file_path() through the bootstrap, into its own environment, with no
    helper variable left behind."""
    done = _rscript("-e", 'amp_parity_r_dir <- "r_scripts"; source("r_scripts/_bridge.R"); '
                          'cat(exists("amp_parity_call"), exists("make_record"), exists("main_cli"), "")'
                          '; rm(list = ls()); f <- function() { e <- new.env(); source("r_scripts/with_autocast.R", local = e); '
                          'cat(exists("main_cli", envir = e, inherits = FALSE), exists("make_record", envir = e, inherits = FALSE), '
                          'exists("r_file_path", envir = e, inherits = FALSE), exists("this_file", envir = e), exists("here", envir = e), '
                          'exists("path", envir = e)) }; f()')
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["TRUE", "TRUE", "FALSE", "TRUE", "TRUE", "TRUE", "FALSE", "FALSE", "FALSE"]


def test_r_file_path_names_the_innermost_source_then_rscripts_file(tmp_path: Path) -> None:
    """r_file_path() is the file being sourced (innermost first), else the file Rscript runs, else NULL (Rscript -e)."""
    inner, outer = tmp_path / "inner.R", tmp_path / "outer.R"
    inner.write_text('cat("inner", r_file_path(), "\\n")\n')
    outer.write_text(f'source("{REPO_ROOT}/r_scripts/_bootstrap.R")\nsource("inner.R")\ncat("outer", r_file_path(), "\\n")\n')
    done = subprocess.run(["Rscript", "outer.R"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"inner {inner.resolve()} ", f"outer {outer.resolve()} "]
    bare = _rscript("-e", 'source("r_scripts/_bootstrap.R"); cat(is.null(r_file_path()), basename(amp_parity_r_dir))')
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout == "TRUE r_scripts"


def test_a_copy_of_the_scripts_loads_its_own_shared_code(tmp_path: Path) -> None:
    """A script of a copied r_scripts/, sourced from another folder, loads the copy's bootstrap, shared files and shell.R, not ours."""
    from tests.planting import copy_scripts

    root = copy_scripts(tmp_path / "copy")
    with (root / "r_scripts" / "record.R").open("a") as handle:
        handle.write("\nplanted_in_the_copy <- TRUE\n")
    done = subprocess.run(
        ["Rscript", "-e", f'e <- new.env(); source("{root}/r_scripts/cuda_amp_grad_scaler.R", local = e); '
                          'cat(isTRUE(e$planted_in_the_copy), e$amp_parity_r_dir, sep = "\\n")'],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["TRUE", str((root / "r_scripts").resolve())]


def test_the_bridge_without_its_folder_says_what_to_set() -> None:
    """Sourced without ``amp_parity_r_dir`` (which the harness's R worker sets), _bridge.R stops naming the variable and who sets it."""
    done = _rscript("-e", 'source("r_scripts/_bridge.R")')
    assert done.returncode == 1
    assert "amp_parity_r_dir" in done.stderr and "r_handler.py" in done.stderr


@pytest.mark.parametrize("stem", list(SCRIPTS))
def test_the_pair_names_itself_and_reads_its_modes_from_the_run_spec(stem: str) -> None:
    """R's ``script`` is Python's ``SCRIPT``, the stem; ``mode_properties()`` reads each mode's properties from the run spec's
    ``modes`` (the harness's declaration, as jsonlite reads it), as Python's twin does, and refuses another script's mode."""
    import importlib


    module = importlib.import_module(f"py_scripts.{stem}")
    assert _r_value(f'{{source("r_scripts/{stem}.R", local = TRUE); script}}') == [stem] == [module.SCRIPT]
    modes = json.dumps(json.dumps({"modes": SCRIPTS[stem].modes_json()}))
    properties = _r_value(
        f"{{spec <- jsonlite::fromJSON({modes}, simplifyVector = TRUE); "
        f"vapply(c({', '.join(repr(m) for m in SCRIPTS[stem].mode_names)}), function(m) "
        "as.character(jsonlite::toJSON(mode_properties(spec, m), auto_unbox = TRUE)), character(1))}"
    )
    assert [json.loads(p) for p in properties] == list(SCRIPTS[stem].modes_json().values())
    other = next(m for pair in SCRIPTS.values() for m in pair.mode_names if m not in SCRIPTS[stem].mode_names)
    done = _rscript("-e", f'options(cli.width = 10000L); source("r_scripts/_bootstrap.R"); spec <- jsonlite::fromJSON({modes}); '
                          f'mode_properties(spec, "{other}")')
    names = [f'"{m}"' for m in SCRIPTS[stem].mode_names]  # cli's {.or}: "a", "b", or "c"
    listed = f"{', '.join(names[:-1])}, or {names[-1]}" if len(names) > 2 else " or ".join(names)
    assert done.returncode == 1 and f'`mode` must be one of {listed}, but got "{other}".' in done.stderr


def test_r_clock_is_the_best_installed_and_named_in_the_record() -> None:
    """R times with bench::hires_time where bench is installed (0.24 us steps, not proc.time's 1 ms), and names what it reads."""
    has_bench = _r_value('as.character(nzchar(system.file(package = "bench")))') == ["TRUE"]
    has_microbenchmark = _r_value('as.character(nzchar(system.file(package = "microbenchmark")))') == ["TRUE"]
    expected = (
        "microbenchmark::get_nanotime (CLOCK_MONOTONIC)" if has_microbenchmark
        else "bench::hires_time (CLOCK_REALTIME)" if has_bench else "proc.time (elapsed, 1 ms steps)"
    )
    assert _r_value("clock_name") == [expected]
    if not (has_bench or has_microbenchmark):
        pytest.skip("bench is not installed here (apt-get install r-cran-bench): R falls back to proc.time, 1 ms steps")
    # 1000 back-to-back reads: every step between distinct reads is far below proc.time's 1 ms.
    steps = _r_value("{ x <- vapply(1:1000, function(i) clock(), 0); d <- diff(x); format(c(min(d[d > 0]), median(d)), digits = 3) }")
    assert 0 < float(steps[0]) < 1e-5 and float(steps[1]) < 1e-4


def test_r_records_name_nan_and_infinities_as_python_json_reads_them() -> None:
    """R writes NaN, Inf and -Inf as JSON NaN/Infinity/-Infinity (not null), and NA as null, exactly as Python's json reads them."""
    import json
    import math

    line = _r_value('record_to_json(list(losses = I(c(0.5, NaN, Inf, -Inf, NA)), final_loss = NaN, skipped_steps = 2L))')
    assert line == ['{"losses":[0.5,NaN,Infinity,-Infinity,null],"final_loss":NaN,"skipped_steps":2}']
    record = json.loads(line[0])
    assert record["losses"][0] == 0.5 and math.isnan(record["losses"][1]) and record["losses"][2:4] == [math.inf, -math.inf]
    assert record["losses"][4] is None and math.isnan(record["final_loss"])


def test_r_records_write_every_value_as_json_reads_it_back() -> None:
    """R's record writer keeps one-element arrays, exact doubles, integers, logicals and hostile strings as Python reads them."""
    import json

    hostile = r'paste0("/tmp/a \"q\" \\ b/", intToUtf8(c(233, 9)), "x", intToUtf8(1), ".st")'
    line = _r_value(
        "record_to_json(list(losses = I(list(1/3)), loss_scale = I(65536), skipped = I(c(FALSE, TRUE, NA)), threads = 2147483647L, "
        f"output_dtype = NULL, clock = NA_character_, weights_path = {hostile}, x = -0.0, y = 1e300))"
    )
    record = json.loads(line[0])
    assert record == {
        "losses": [1 / 3], "loss_scale": [65536.0], "skipped": [False, True, None], "threads": 2147483647, "output_dtype": None,
        "clock": None, "weights_path": '/tmp/a "q" \\ b/\u00e9\tx\x01.st', "x": 0.0, "y": 1e300,
    }
    assert json.loads(line[0])["losses"][0].hex() == (1 / 3).hex()


@pytest.mark.parametrize(("stem", "allowed"), [("with_autocast", "'default', 'autocast', 'lowp_weights', 'lowp_weights_scaled'"),
                                                ("cuda_amp_grad_scaler", "'default', 'autocast_scaler', 'autocast_scaler_clip'")])
@pytest.mark.parametrize(("mode_args", "got"), [(["--mode", "bogus"], "'bogus'"), ([], "None")], ids=["bad-mode", "no-mode"])
def test_bad_mode_under_rscript_is_one_message_naming_the_allowed_values(stem: str, allowed: str, mode_args: list[str], got: str) -> None:
    """A bad or missing --mode is a usage error with one line naming the allowed modes, the Python script's words, before torch."""
    done = _rscript(f"r_scripts/{stem}.R", "--preset", "tiny", "--device", "cpu", *mode_args)
    assert (done.returncode, done.stdout) == (ExitCode.USAGE_ERROR, "")
    assert done.stderr.splitlines() == [f"error: mode must be one of {allowed} for {stem}.R, got {got}."]


@pytest.mark.parametrize("name", ["_bridge.R", "_bootstrap.R"])
def test_an_r_support_file_run_on_its_own_says_so_in_one_line(name: str) -> None:
    """``Rscript r_scripts/_bridge.R`` printed R's stack dump; now one line saying what the file is for, a usage error."""
    done = _rscript(f"r_scripts/{name}")
    assert (done.returncode, done.stdout) == (ExitCode.USAGE_ERROR, "")
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: r_scripts/{name} ") and "it runs nothing on its own" in lines[0]


def test_valid_mode_without_r_torch_says_how_to_install_it() -> None:
    """With R torch absent, a valid invocation is a usage error naming the install command."""
    probe = _rscript("-e", 'cat(requireNamespace("torch", quietly = TRUE))')
    if probe.stdout.strip() == "TRUE":
        pytest.skip("R torch is installed here: the message for its absence cannot be provoked")
    done = _rscript("r_scripts/with_autocast.R", "--preset", "tiny", "--mode", "autocast", "--device", "cpu")
    assert done.returncode == ExitCode.USAGE_ERROR
    assert 'install.packages("torch")' in done.stderr and "torch::install_torch()" in done.stderr


def test_sourcing_a_script_runs_nothing() -> None:
    """Sourcing an R script from another function defines run_workload and prints nothing."""
    done = _rscript("-e", 'f <- function() { e <- new.env(); source("r_scripts/with_autocast.R", local = e); '
                          'cat(is.function(e$run_workload)) }; f()')
    assert done.returncode == 0, done.stderr
    assert done.stdout == "TRUE"


def test_probe_reports_r_side_as_json() -> None:
    """r_scripts/_probe.R prints one JSON object with R's version and R torch's state."""
    import json

    done = _rscript("r_scripts/_probe.R")
    info = json.loads(done.stdout)
    assert info["r_version"].startswith("R version")
    assert isinstance(info["torch_installed"], bool) and isinstance(info["libtorch_loads"], bool)


def test_pause_gc_collects_every_generation_when_the_run_spec_says_full() -> None:
    """``pause_gc(spec)`` with ``collect_before_loop: full`` frees what R had promoted to its oldest generation (a tensor the
    previous call's loop held through R's collections), which a young collection leaves held; ``young`` costs ~2 ms."""
    code = (
        'held <- new.env(); freed <- new.env(); freed$yes <- FALSE; '
        'invisible(reg.finalizer(held, function(e) freed$yes <- TRUE)); '
        'for (k in 1:3) invisible(gc(full = TRUE)); '  # promoted to the oldest generation while alive
        'rm(held); young <- pause_gc(list(collect_before_loop = "young")); after_young <- freed$yes; '
        'full <- pause_gc(list(collect_before_loop = "full")); '
        'writeLines(c(as.character(after_young), as.character(freed$yes), as.character(is.numeric(full))))'
    )
    after_young, after_full, clock = _r_value_of(code)
    assert after_full == "TRUE" and clock == "TRUE"
    assert after_young == "FALSE"  # R's young collection does not look at the oldest generation


def _r_value_of(code: str) -> list[str]:
    done = _rscript("-e", f'source("r_scripts/_bootstrap.R"); {code}')
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


#: Cycles of ``collect_ahead()`` and a loop's worth of counted collections (0 to gc_loop_room, in turn): 60 cycles make
#: about 150 counted collections, seven of R's escalation periods.
_COLLECTOR_PROGRAM = """
source("r_scripts/_bootstrap.R")
young_levels <- function(n) {
  report <- character()
  con <- textConnection("report", "w", local = TRUE)
  sink(con, type = "message")
  for (i in seq_len(n)) invisible(gc(full = FALSE, verbose = TRUE))
  sink(type = "message")
  close(con)
  vapply(gc_reported(report), function(x) x$level, integer(1))
}
count_now <- function() {
  report <- character()
  con <- textConnection("report", "w", local = TRUE)
  sink(con, type = "message")
  invisible(gc(full = TRUE, verbose = TRUE))
  sink(type = "message")
  close(con)
  gc_reported(report)[[1]]$count
}
start <- count_now()
in_loops <- integer()
for (cycle in 0:59) {
  collect_ahead()
  n <- cycle %% (gc_loop_room + 1)
  if (n > 0) in_loops <- c(in_loops, young_levels(n))
}
cat(sprintf("loops %d escalated %d collections %g cycles %d room %d\\n", length(in_loops), sum(in_loops >= 1),
            count_now() - start, 60L, gc_loop_room))
"""


def test_the_collection_before_a_loop_leaves_the_loop_no_escalation() -> None:
    """After ``collect_ahead()`` (timing.R's ``pause_gc`` at ``bench``), a loop's worth of R's counted collections (up to
    ``gc_loop_room``) stays at level 0: R escalates every 21st counted collection to level 1 or 2 (0.09-0.1 s with R
    torch's objects alive), and a full collection does not reset its counters. Over seven escalation periods none lands in
    a loop; the young collections it makes to get there stay few (it does not collect ahead on every call)."""
    done = _rscript("-e", _COLLECTOR_PROGRAM)
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    said = {words[i]: float(words[i + 1]) for i in range(0, len(words) - 1, 2)}
    assert said["loops"] == sum(cycle % (said["room"] + 1) for cycle in range(60)) and said["loops"] >= 140
    assert said["escalated"] == 0, done.stdout
    # everything counted: the loops' collections, the full ones (one a cycle, two to count), and the ones made ahead
    ahead = said["collections"] - said["loops"] - said["cycles"] - 1
    assert 0 < ahead < 4 * said["cycles"], done.stdout
