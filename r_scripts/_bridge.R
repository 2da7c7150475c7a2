#' The harness's entry point into R: what `harness/frontends/r_handler.py` sources in its rpy2 worker.
#'
#' It loads common.R from beside this file and defines `amp_parity_call()`, which the worker calls for
#' every cell with the script's path, the run spec as JSON and the mode. Only plain data crosses: the
#' spec comes in as JSON text and the record goes back as JSON text, the line the script prints in
#' shell mode. No Python twin: the Python worker imports the scripts (harness/frontends/python_handler.py).

# Run on its own (`Rscript r_scripts/_bridge.R`), there is nothing to source it from: say so in one line.
if (sys.nframe() == 0L) {
  message("error: r_scripts/_bridge.R is the harness's entry point into R, sourced by its rpy2 worker; it runs nothing on its own. Run a script: Rscript r_scripts/with_autocast.R --help")
  quit(save = "no", status = 1L)
}

# This file is sourced by its path: `source()` keeps it in a local `ofile`, the innermost one in progress.
source(
  file.path(dirname(Filter(is.character, lapply(rev(sys.frames()), function(frame) frame$ofile))[[1]]), "common.R"),
  local = environment()
)

#' Scripts the bridge has sourced, by path, each with the mtime it had then.
sourced_scripts <- new.env(parent = emptyenv())

#' The last run spec the bridge parsed, as JSON text and as a list.
last_spec <- new.env(parent = emptyenv())

#' What the harness's rpy2 worker calls: run one mode of one script and return its record as JSON.
#'
#' The script is sourced into a fresh environment whose parent holds these functions, so it sees
#' common.R without sourcing it again. That environment is kept for the next call until the file
#' changes: a script defines functions only, and sourcing it anew would add its parse time to
#' every timed round's bridge overhead. R errors propagate unchanged: the worker keeps R's own message.
amp_parity_call <- function(script_path, spec_json, mode) {
  if (!file.exists(script_path)) {
    abort_cli("R script {.path {script_path}} does not exist.")
  }
  # Timed rounds send the same spec again and again: parsed once (0.4 ms of bridge a call otherwise).
  # R copies on modify, so a script cannot change the kept spec.
  if (!identical(spec_json, last_spec$json)) {
    last_spec$spec <- jsonlite::fromJSON(spec_json, simplifyVector = TRUE)
    last_spec$json <- spec_json
  }
  spec <- last_spec$spec
  mtime <- file.mtime(script_path) # a POSIXct with sub-second digits; a tenth of file.info() and format()
  cached <- get0(script_path, envir = sourced_scripts, inherits = FALSE)
  if (is.null(cached) || !identical(cached$mtime, mtime)) {
    script_env <- new.env(parent = environment(sys.function()))
    source(script_path, local = script_env)
    cached <- list(env = script_env, mtime = mtime)
    assign(script_path, cached, envir = sourced_scripts)
  }
  run_workload <- get0("run_workload", envir = cached$env, mode = "function", inherits = FALSE)
  if (is.null(run_workload)) {
    abort_cli("{.path {script_path}} does not define {.fn run_workload}.")
  }
  record_to_json(run_workload(spec, mode))
}
