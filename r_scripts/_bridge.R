#' The harness's entry point into R: what `harness/frontends/r_handler.py` sources in its rpy2 worker.
#'
#' It loads common.R from the folder the harness names in `amp_parity_r_dir` and defines `amp_parity_call()`,
#' which the worker calls for every cell with the script's path, the run spec as JSON and the mode. Only plain data crosses: the
#' spec comes in as JSON text and the record goes back as JSON text, the line the script prints in
#' shell mode. No Python twin: the Python worker imports the scripts (harness/frontends/python_handler.py).

# Run on its own (`Rscript r_scripts/_bridge.R`), there is nothing to source it from: say so in one line.
if (sys.nframe() == 0L) {
  message("error: r_scripts/_bridge.R is the harness's entry point into R, sourced by its rpy2 worker; it runs nothing on its own. Run a script: Rscript r_scripts/with_autocast.R --help")
  quit(save = "no", status = 4L) # harness.errors.ExitCode.USAGE_ERROR: run the wrong file
}

# The harness knows where the scripts are: its R worker (harness/frontends/r_handler.py) sets `amp_parity_r_dir`
# to this file's folder before sourcing it, so the bridge never finds itself (files run by hand use r_file_path()).
if (!is.character(get0("amp_parity_r_dir"))) {
  cli::cli_abort(c(
    "{.var amp_parity_r_dir} must name the folder holding common.R before {.file _bridge.R} is sourced.",
    i = "The harness's R worker sets it (harness/frontends/r_handler.py); by hand: {.code amp_parity_r_dir <- \"r_scripts\"}."
  ))
}
source(file.path(amp_parity_r_dir, "common.R"), local = environment())

# The worker is the harness's process: an error's message is a cell's one-line reason, so cli must not wrap it.
options(cli.width = 10000L)

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

#' What the harness's rpy2 worker calls to trace a cell: `amp_parity_call()` with every `trace_point()`
#' handed to `record_point(step, name, dtype, shape, bytes)`, the worker's recorder (a Python function,
#' harness/frontends/trace_recorder.py), so both languages' points are digested by the same code.
#'
#' The tensor's bytes come from R torch's `buffer_from_torch_tensor()` (a raw vector, what safetensors
#' writes), of a fresh copy: that function copies from the start of the tensor's storage and ignores a
#' view's storage offset (lantern's `_lantern_buffer_from_tensor`, src/lantern/src/Tensor.cpp at
#' mlverse/torch e4de110), so for `data[i, , ]` with `i > 1` it would return the first batch's bytes
#' (tests/integration/test_r_worker.py keeps a test of it). When the recorder has every point it was asked to keep, it returns `TRUE` and the run stops
#' there (a condition of class `amp_parity_trace_done`; `with_autocast()` restores its state on the way
#' out): the result is then `"null"`, no record.
amp_parity_trace_call <- function(script_path, spec_json, mode, record_point) {
  on_cuda <- identical(jsonlite::fromJSON(spec_json)$device, "cuda")
  contiguous <- torch::torch_contiguous_format()
  set_trace_sink(function(step, name, value) {
    # A contiguous copy with storage of its own (offset 0, see above), in as few calls as can be: each R torch
    # method call costs tens of microseconds, paid at every point (the copy may carry autograd history: unused).
    if (on_cuda) value <- value$cpu()
    value <- torch::torch_clone(value, memory_format = contiguous)
    done <- record_point(step, name, dtype_name(value$dtype), value$shape, torch::buffer_from_torch_tensor(value))
    if (isTRUE(done)) {
      stop(errorCondition("the trace has every point it was asked to keep", class = "amp_parity_trace_done"))
    }
  })
  on.exit(set_trace_sink(NULL), add = TRUE)
  tryCatch(amp_parity_call(script_path, spec_json, mode), amp_parity_trace_done = function(cond) "null")
}
