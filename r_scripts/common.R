#' Code shared by the R scripts; the twin of `py_scripts/common.py` (same names, same order).
#'
#' The contract both halves follow is `docs/contract.md`. Sourcing this file defines functions only:
#' it loads neither torch nor anything else, so argument handling and the rpy2 bridge
#' (`amp_parity_call()`) work where R torch is not installed. Functions that need torch call it
#' with `torch::` prefixes, so nothing is attached to the search path either.
#'
#' Every R torch call below is one in mlverse/torch's own sources; the file is named where the
#' API differs from PyTorch's.

#' The run record's fields, in the contract's order; `RECORD_FIELDS` in common.py is the same list.
record_fields <- c(
  "schema_version", "frontend", "script", "mode", "device", "amp_dtype",
  "losses", "final_loss", "loss_scale", "skipped", "skipped_steps",
  "output_dtype", "loss_dtype", "weights_path",
  "seconds_total", "seconds_per_epoch", "seconds_workload", "gc_seconds", "clock", "peak_memory_bytes",
  "torch_version", "libtorch_version", "language_version", "threads", "device_name"
)
#' 3: `clock` (which clock timed the loop). The harness reads this version only (harness/results.py).
record_schema_version <- 3L
#' Record fields that are JSON arrays even with one element (jsonlite would unbox a length-1 vector).
record_array_fields <- c("losses", "loss_scale", "skipped", "seconds_per_epoch")

# ---- errors and arguments -----------------------------------------------------------------------

#' `x`, or `y` where `x` is `NULL` (base R has this only from 4.4.0).
`%||%` <- function(x, y) if (is.null(x)) y else x

#' Signal an error with a cli-formatted message.
#'
#' `cli::cli_abort()` needs rlang, which every R torch install has (torch imports it); where rlang is
#' missing (a machine without torch, checking arguments only) the same text is raised with `stop()`.
abort_cli <- function(message, ..., .envir = parent.frame()) {
  if (requireNamespace("rlang", quietly = TRUE)) {
    cli::cli_abort(message, ..., call = NULL, .envir = .envir)
  }
  stop(errorCondition(cli::format_message(message, .envir = .envir), class = "amp_parity_error"))
}

#' The file being `source()`d (innermost first), or the `Rscript` entry file; `NULL` if neither.
#'
#' `source()` keeps the path it was given in a local variable `ofile`; `Rscript file.R` passes
#' `--file=file.R` in `commandArgs()`.
sourced_file <- function() {
  for (frame in rev(sys.frames())) {
    if (is.character(frame$ofile)) {
      return(normalizePath(frame$ofile))
    }
  }
  file_arg <- grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE)
  if (length(file_arg) > 0L) normalizePath(sub("^--file=", "", file_arg[[1]])) else NULL
}

#' The folder holding this file (`r_scripts/`), fixed when common.R is sourced.
amp_parity_r_dir <- dirname(sourced_file() %||% file.path(getwd(), "r_scripts", "common.R"))

#' Shell flags that take no value: `--debug` (R's traceback on error) and `--overwrite` (replace an
#' existing `--weights-out` file), as in the Python scripts' shell mode.
cli_switches <- c("debug", "overwrite")

#' Shell flags as a named list: `--batch-size 32` (or `--batch-size=32`) → `list("batch-size" = "32")`.
#'
#' Every `--name value` pair is kept as given: the spec flags are validated by the harness
#' (`python -m harness prepare`), not here. A switch (`cli_switches`) is kept as `TRUE`. A repeated
#' flag keeps its last value, as argparse does.
parse_cli_args <- function(args) {
  parsed <- list()
  i <- 1L
  while (i <= length(args)) {
    arg <- args[[i]]
    if (!startsWith(arg, "--") || nchar(arg) <= 2L) {
      abort_cli(c(
        "Expected a flag such as {.code --mode}, but got {.val {arg}}.",
        i = "Flags come in {.code --name value} pairs, e.g. {.code --preset tiny --mode autocast}."
      ))
    }
    if (substring(arg, 3L) %in% cli_switches) {
      name <- substring(arg, 3L)
      value <- TRUE
      i <- i + 1L
    } else if (grepl("=", arg, fixed = TRUE)) {
      name <- sub("=.*$", "", substring(arg, 3L))
      value <- sub("^[^=]*=", "", arg)
      i <- i + 1L
    } else {
      name <- substring(arg, 3L)
      value <- if (i < length(args)) args[[i + 1L]] else NA_character_
      if (is.na(value) || startsWith(value, "--")) {
        abort_cli("Flag {.code --{name}} needs a value.")
      }
      i <- i + 2L
    }
    parsed[[name]] <- value
  }
  parsed
}

#' Refuse a missing mode or one this script does not run, naming the ones it does.
check_mode <- function(mode, modes) {
  if (is.null(mode) || length(mode) != 1L || is.na(mode)) {
    abort_cli(c(
      "{.var mode} is required: one of {.or {.val {modes}}}.",
      i = "Pass it as {.code --mode {modes[[1]]}}."
    ))
  }
  if (!mode %in% modes) {
    abort_cli("{.var mode} must be one of {.or {.val {modes}}}, but got {.val {mode}}.")
  }
  invisible(mode)
}

#' The run spec for shell mode, from the harness: spec validation and fixtures live in Python only.
#'
#' Runs `python -m harness prepare <flags>` from the checkout's root (the folder above r_scripts/),
#' with `python` from `AMP_PARITY_PYTHON` (default `python3`). It prints the run spec as one JSON
#' object, or one line `error: ...` and a non-zero status, which becomes this function's error.
prepare_run_spec <- function(cli_args) {
  python <- Sys.getenv("AMP_PARITY_PYTHON", "python3")
  cli_args[["mode"]] <- NULL
  flags <- character()
  for (name in names(cli_args)) {
    value <- cli_args[[name]]
    flags <- c(flags, paste0("--", name), if (isTRUE(value)) character() else value)
  }
  old_wd <- setwd(dirname(amp_parity_r_dir))
  on.exit(setwd(old_wd), add = TRUE)
  old_library_path <- Sys.getenv("LD_LIBRARY_PATH")
  Sys.setenv(LD_LIBRARY_PATH = python_library_path())
  on.exit(Sys.setenv(LD_LIBRARY_PATH = old_library_path), add = TRUE)
  # system2() quotes the command but passes the arguments to the shell as they are.
  python_fix <- c(i = "Set {.envvar AMP_PARITY_PYTHON} to a Python that can import the harness.")
  output <- tryCatch(
    suppressWarnings(system2(
      python, shQuote(c("-m", "harness", "prepare", flags)),
      stdout = TRUE, stderr = TRUE
    )),
    error = function(err) abort_cli(c("Could not run {.code {python}}: {conditionMessage(err)}.", python_fix))
  )
  status <- attr(output, "status") %||% 0L
  is_json <- startsWith(output, "{")
  if (status != 0L || !any(is_json)) {
    # Every error of the harness, argparse's included, is one line `error: ...`; under --debug the
    # Python traceback above it is shown too.
    if (isTRUE(cli_args[["debug"]])) {
      for (line in output) message(line)
    }
    error_line <- grep("^error: ", output, value = TRUE)
    if (length(error_line) > 0L) {
      abort_cli("{sub('^error: ', '', error_line[[length(error_line)]])}") # main_cli() prefixes its own
    }
    abort_cli(c(
      "{.code {python} -m harness prepare} failed (status {status}).",
      " " = "{paste(utils::tail(output, 5), collapse = ' | ')}",
      python_fix
    ))
  }
  for (line in output[!is_json & nzchar(output)]) message(line) # the harness's warnings
  jsonlite::fromJSON(utils::tail(output[is_json], 1L), simplifyVector = TRUE)
}

#' `LD_LIBRARY_PATH` as it was before R started, for Python child processes.
#'
#' R's start-up script (`R.home("etc")/ldpaths`) puts R's library folders in front of it, and on
#' Debian these include the system's, where `libpython3.x.so` may be another build than the one
#' a pyenv or conda Python was linked against (that Python then starts with the wrong standard
#' library). The prefix is found by running that same script on an empty path.
python_library_path <- function() {
  current <- Sys.getenv("LD_LIBRARY_PATH")
  ldpaths <- file.path(R.home("etc"), "ldpaths")
  if (!nzchar(current) || !file.exists(ldpaths)) {
    return(current)
  }
  script <- sprintf('unset LD_LIBRARY_PATH; . %s; printf "%%s" "$LD_LIBRARY_PATH"', shQuote(ldpaths))
  r_prefix <- tryCatch(
    suppressWarnings(system2("sh", c("-c", shQuote(script)), stdout = TRUE, stderr = FALSE)),
    error = function(err) character()
  )
  if (length(r_prefix) != 1L || !nzchar(r_prefix)) {
    return(current)
  }
  if (identical(current, r_prefix)) {
    return("")
  }
  if (startsWith(current, paste0(r_prefix, ":"))) substring(current, nchar(r_prefix) + 2L) else current
}

#' Stop with the install instructions unless R torch and its libtorch are installed.
require_r_torch <- function() {
  fix <- c(i = "Install it with {.code install.packages(\"torch\"); torch::install_torch()}.")
  if (!requireNamespace("torch", quietly = TRUE)) {
    abort_cli(c("The R package {.pkg torch} is not installed.", fix))
  }
  if (!torch::torch_is_installed()) {
    abort_cli(c("The R package {.pkg torch} is installed, but libtorch is not.", fix))
  }
  invisible(TRUE)
}

# ---- the workload's pieces ----------------------------------------------------------------------

#' The torch dtype for a contract dtype name (`bfloat16`, `float16`, ...).
torch_dtype <- function(name) {
  switch(name,
    float32 = torch::torch_float32(),
    float16 = torch::torch_float16(),
    bfloat16 = torch::torch_bfloat16(),
    float64 = torch::torch_float64(),
    abort_cli("{.var amp_dtype} must be one of {.or {.val {c('bfloat16', 'float16')}}}, but got {.val {name}}.")
  )
}

#' The contract's name for a torch dtype.
#'
#' `as.character()` on an R torch dtype gives libtorch's scalar-type name (R/dtype.R:
#' `as.character.torch_dtype` → `cpp_dtype_to_string`): "Float", "Half", "BFloat16", "Double".
dtype_name <- function(dtype) {
  libtorch_name <- as.character(dtype)
  contract_names <- c(Float = "float32", Half = "float16", BFloat16 = "bfloat16", Double = "float64")
  if (!libtorch_name %in% names(contract_names)) {
    abort_cli("Unexpected dtype {.val {libtorch_name}}: expected one of {.or {.val {names(contract_names)}}}.")
  }
  contract_names[[libtorch_name]]
}

#' The last fixture file loaded, on its device, with its key (path, mtime, size, device).
fixture_cache <- new.env(parent = emptyenv())

#' The fixture tensors on the spec's device (the same file Python loads with `load_file`).
#'
#' The last file loaded stays in memory for the next call in this process: the harness times
#' repeated calls, and a timed round must measure training, not reading a gigabyte from disk (at
#' `recipe`). A rewritten file (new mtime or size) is read again. The tensors are never written to.
#' safetensors' `safe_load_file(path, ..., framework)` returns CPU tensors unless told otherwise;
#' they are moved with `$to(device =)`.
load_fixtures <- function(spec) {
  info <- file.info(spec$fixture_path)
  key <- paste(spec$fixture_path, format(as.numeric(info$mtime), digits = 17), info$size, spec$device)
  if (!identical(fixture_cache$key, key)) {
    fixture_cache$tensors <- NULL # one file at a time: a recipe fixture is a gigabyte
    fixtures <- safetensors::safe_load_file(spec$fixture_path, framework = "torch")
    fixture_cache$tensors <- lapply(fixtures, function(x) x$to(device = spec$device))
    fixture_cache$key <- key
  }
  fixture_cache$tensors
}

#' The recipe's MLP (Linear+ReLU … Linear) with weights copied from the fixtures.
#'
#' R's `nn_linear()` has no `device` argument (R/nn-linear.R): each layer is moved with `$to()`
#' (in place, R/nn.R `.apply`) before its weights are copied, as Python builds it on the device.
make_model <- function(spec, fixtures) {
  layers <- list()
  for (k in seq_len(spec$num_layers) - 1L) {
    out_features <- if (k == spec$num_layers - 1L) spec$out_size else spec$in_size
    linear <- torch::nn_linear(spec$in_size, out_features)
    linear$to(device = spec$device)
    torch::with_no_grad({
      linear$weight$copy_(fixtures[[sprintf("layer%d.weight", k)]])
      linear$bias$copy_(fixtures[[sprintf("layer%d.bias", k)]])
    })
    layers <- c(layers, list(linear))
    if (k < spec$num_layers - 1L) {
      layers <- c(layers, list(torch::nn_relu()))
    }
  }
  do.call(torch::nn_sequential, layers)
}

#' The Linear layers in order (every other module is a ReLU).
linear_layers <- function(net) {
  Filter(function(module) inherits(module, "nn_linear"), net$children)
}

#' Wait for queued device work, so a clock read measures finished work (no-op on CPU).
sync_device <- function(device) {
  if (device == "cuda") {
    torch::cuda_synchronize()
  }
  invisible(NULL)
}

#' Which clock `clock()` reads: the best installed, checked once, without loading bench.
#'
#' Base R's only sub-second clock is `proc.time()`'s elapsed time, in milliseconds: a 15 ms loop
#' would read as 15 or 16. Debian's r-cran-bench (installed by .ci/setup) has `bench::hires_time()`:
#' nanoseconds, but from `CLOCK_REALTIME` on Linux (bench's src/nanotime.c), so it is not monotonic:
#' an NTP step during a loop would show in that loop's time (NTP normally slews, which does not).
#' No Debian R package exports a monotonic clock (r-cran-clock and r-cran-nanotime are wall-clock time;
#' microbenchmark, which reads `CLOCK_MONOTONIC`, is not packaged in Debian; it is preferred where it
#' is installed). The double bench returns (~1.8e9 s) resolves 0.24 us.
clock_source <- if (nzchar(system.file(package = "microbenchmark"))) {
  "microbenchmark"
} else if (nzchar(system.file(package = "bench"))) {
  "bench"
} else {
  "proc.time"
}

#' The clock as each record names it (`clock`): the function and what it reads.
clock_name <- c(
  microbenchmark = "microbenchmark::get_nanotime (CLOCK_MONOTONIC)",
  bench = "bench::hires_time (CLOCK_REALTIME)",
  proc.time = "proc.time (elapsed, 1 ms steps)"
)[[clock_source]]

#' A clock in seconds, the best one installed (`clock_name`); the twin of common.py's monotonic one.
clock <- switch(clock_source,
  microbenchmark = function() microbenchmark::get_nanotime() / 1e9,
  bench = function() as.numeric(bench::hires_time()),
  function() proc.time()[["elapsed"]]
)

#' Empty R's young generation now, before the timed loop; returns R's GC clock (seconds).
#'
#' R cannot switch its collector off as Python's `gc.disable()` does, so the loop may still collect;
#' `gc.time()` (which also switches GC timing on) counts the elapsed seconds R spent collecting, and
#' `resume_gc()` reports those inside the loop rather than hiding them. A minor collection
#' (`full = FALSE`) makes one inside the loop less likely without the cost of a full one per call.
pause_gc <- function() {
  gc(verbose = FALSE, full = FALSE)
  gc.time()[[3]]
}

#' The seconds R spent collecting garbage since `pause_gc()` returned `gc_state` (its GC clock).
resume_gc <- function(gc_state) {
  gc.time()[[3]] - gc_state
}

#' Start the device's peak-memory counter afresh, where the frontend can.
#'
#' R torch cannot: R/cuda.R has `cuda_memory_stats()` and `cuda_empty_cache()` but no
#' `reset_peak_memory_stats()`. On CUDA the peak is therefore the worker process's high-water mark
#' since it started, which can include an earlier run in the same worker. A no-op, kept so the
#' scripts read like their Python twins.
reset_peak_memory <- function(device) {
  invisible(NULL)
}

#' Peak bytes allocated by tensors on CUDA; `NULL` (JSON null) on CPU.
#'
#' `cuda_memory_stats()` (R/cuda.R) nests its entries: `allocated_bytes$all$peak` is libtorch's
#' "allocated_bytes.all.peak", what `torch.cuda.max_memory_allocated()` reads.
peak_memory_bytes <- function(device) {
  if (device != "cuda") {
    return(NULL)
  }
  torch::cuda_memory_stats()$allocated_bytes$all$peak
}

#' The trained weights, named like the fixtures, as a CPU safetensors file; nothing when `path` is `NULL`.
#'
#' The harness passes no path in timed rounds after the first call: their weights equal the first's.
save_final_weights <- function(net, path) {
  if (is.null(path)) {
    return(invisible(NULL))
  }
  tensors <- list()
  linears <- linear_layers(net)
  for (k in seq_along(linears) - 1L) {
    linear <- linears[[k + 1L]]
    tensors[[sprintf("layer%d.weight", k)]] <- linear$weight$detach()$cpu()$contiguous()
    tensors[[sprintf("layer%d.bias", k)]] <- linear$bias$detach()$cpu()$contiguous()
  }
  dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
  safetensors::safe_save_file(tensors, path)
  invisible(path)
}

#' The libtorch version R torch runs on, or `NULL` where the installed torch does not say.
#'
#' R torch keeps it as the internal string `torch_version` in R/install.R (e.g. "2.8.0"): the
#' libtorch that `install_torch()` downloads and lantern is built against. It is not exported, so
#' it is read from the namespace. A `TORCH_URL` install of another libtorch is not reflected.
libtorch_version <- function() {
  version <- get0("torch_version", envir = asNamespace("torch"), inherits = FALSE)
  if (is.character(version) && length(version) == 1L) version else NULL
}

#' `cpu` or the CUDA device's name.
#'
#' R torch has no device-name call (R/cuda.R: capability, count, memory stats only), so the name
#' comes from `nvidia-smi` for the current device (honouring `CUDA_VISIBLE_DEVICES`); `"cuda"` if
#' that fails.
device_name <- function(device) {
  if (device != "cuda") {
    return("cpu")
  }
  index <- torch::cuda_current_device()
  visible <- trimws(strsplit(Sys.getenv("CUDA_VISIBLE_DEVICES"), ",", fixed = TRUE)[[1]])
  id <- if (length(visible) > index) visible[[index + 1L]] else as.character(index)
  name <- tryCatch(
    suppressWarnings(system2(
      "nvidia-smi", c("--query-gpu=name", "--format=csv,noheader", paste0("--id=", shQuote(id))),
      stdout = TRUE, stderr = FALSE
    )),
    error = function(err) character()
  )
  if (length(name) == 1L && is.null(attr(name, "status")) && nzchar(trimws(name))) trimws(name) else "cuda"
}

#' The record fields that are the same for every call of a process, looked up once: the version strings
#' (`packageVersion()` alone costs most of a millisecond, which a timed round would pay after its clock).
static_fields <- local({
  cached <- NULL
  function() {
    if (is.null(cached)) {
      cached <<- list(
        schema_version = record_schema_version, frontend = "r",
        torch_version = as.character(utils::packageVersion("torch")),
        libtorch_version = libtorch_version(), language_version = R.version.string, clock = clock_name
      )
    }
    cached
  }
})

#' The run record with exactly `record_fields`; a missing or extra field is a script bug.
#'
#' `schema_version`, `frontend`, `torch_version`, `libtorch_version`, `language_version` and `clock` are
#' filled in unless given. A `NULL` field is kept (it becomes JSON null). `seconds_workload` is stamped
#' last, from `workload_start` (the first line of `run_workload`), so building the record is the script's
#' own cost: what the harness calls its bridge starts after it.
make_record <- function(workload_start, ...) {
  fields <- list(...)
  static <- static_fields()
  for (name in setdiff(names(static), names(fields))) {
    fields[name] <- list(static[[name]])
  }
  fields$seconds_workload <- clock() - workload_start
  missing <- setdiff(record_fields, names(fields))
  extra <- setdiff(names(fields), record_fields)
  if (length(missing) > 0L || length(extra) > 0L || anyDuplicated(names(fields)) > 0L) {
    abort_cli(c(
      "The run record's fields differ from the contract.",
      x = "Missing: {.val {missing}}; extra or repeated: {.val {c(extra, names(fields)[duplicated(names(fields))])}}."
    ))
  }
  fields[record_fields]
}

#' The record as one line of JSON (the shell summary and what the bridge returns).
#'
#' Array fields stay arrays with one element; `NULL` and `NA` become null; NaN and infinities are written
#' as Python's json does (`NaN`, `Infinity`), which jsonlite cannot. Doubles are written with 17
#' significant digits (`exact_json_numbers()`), so Python reads back the very same doubles. Written with
#' vectorised base R rather than `jsonlite::toJSON()` on the whole list, whose method dispatch per field
#' every timed round would pay as bridge overhead (Python's twin is `json.dumps`): the scalar strings and
#' doubles are each written in one call (a call costs tens of microseconds, whatever its length), and a
#' record with the contract's fields reuses their quoted keys (`record_keys_json`).
record_to_json <- function(record) {
  if (!is.list(record) || is.null(names(record))) {
    abort_cli("{.fn run_workload} must return a named list (the run record), not {.cls {class(record)}}.")
  }
  keys <- names(record)
  is_array <- keys %in% record_array_fields
  is_scalar <- lengths(record) == 1L & !is_array
  is_string <- is_scalar & vapply(record, is.character, NA, USE.NAMES = FALSE)
  is_number <- is_scalar & vapply(record, is.double, NA, USE.NAMES = FALSE)
  is_null <- vapply(record, is.null, NA, USE.NAMES = FALSE)
  values <- character(length(record))
  values[is_string] <- json_string(unlist(record[is_string], use.names = FALSE))
  values[is_number] <- exact_json_numbers(unlist(record[is_number], use.names = FALSE))
  values[is_null] <- "null"
  for (k in which(!(is_string | is_number | is_null))) {
    values[[k]] <- json_value(record[[k]], is_array = is_array[[k]])
  }
  keys_json <- if (identical(keys, record_fields)) record_keys_json else json_string(keys)
  paste0("{", paste0(keys_json, ":", values, collapse = ","), "}")
}

#' One field's value as JSON text: a number, string or logical, or an array of them; `NULL` is null.
json_value <- function(value, is_array) {
  if (is.null(value)) {
    return("null")
  }
  value <- unlist(value, use.names = FALSE) # a list of numbers (the losses as collected) is a vector
  text <- if (is.double(value)) {
    exact_json_numbers(value)
  } else if (is.logical(value)) {
    ifelse(is.na(value), "null", ifelse(value, "true", "false"))
  } else if (is.integer(value)) {
    ifelse(is.na(value), "null", as.character(value))
  } else {
    json_string(as.character(value))
  }
  if (is_array || length(text) != 1L) paste0("[", paste(text, collapse = ","), "]") else text
}

#' Strings as JSON text (vectorised: a record's keys in one call). Printable ASCII (every name, dtype,
#' version and ordinary path) is quoted by base R's `encodeString()`, which escapes `"` and `\\` exactly
#' as JSON does; any other string goes through jsonlite, which also escapes control characters and keeps
#' UTF-8. `NA` is null.
json_string <- function(x) {
  text <- encodeString(x, quote = "\"")
  other <- !is.na(x) & !grepl("^[ -~]*$", x)
  text[other] <- vapply(x[other], function(one) as.character(jsonlite::toJSON(one, auto_unbox = TRUE)), character(1L))
  text[is.na(x)] <- "null"
  text
}

#' The contract's record fields as JSON keys, quoted once per process.
record_keys_json <- json_string(record_fields)

#' Doubles as JSON text that reads back as the very same doubles.
#'
#' jsonlite writes at most 15 significant digits (even with `digits = NA`), which is not enough for
#' a bitwise comparison with Python's shortest-round-trip floats; `%.17g` always is. NaN and infinities
#' are written as Python's json writes and reads them (`NaN`, `Infinity`, `-Infinity`), so a failure
#' report can say which it was ("loss is NaN at step 3 (r)"); only `NA` (nothing recorded) is `null`.
exact_json_numbers <- function(x) {
  if (all(is.finite(x))) {
    return(sprintf("%.17g", x)) # the usual case, without four passes of ifelse()
  }
  ifelse(is.finite(x), sprintf("%.17g", x),
    ifelse(is.nan(x), "NaN", ifelse(is.na(x), "null", ifelse(x > 0, "Infinity", "-Infinity")))
  )
}

# ---- entry points -------------------------------------------------------------------------------

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

#' Shell mode: parse the flags, check the mode, get the spec from the harness, run, print the record.
#'
#' The mode is checked before Python or torch is touched. Any error prints one message and exits
#' with status 1, without R's traceback unless `--debug` (Python's twin gets it from exit_with_error()).
main_cli <- function(modes, run_workload) {
  options(cli.width = 10000L) # one message per line: the process is ours and ends here
  # Read before the flags are parsed, so that a parse error shows its traceback too.
  debug <- "--debug" %in% commandArgs(trailingOnly = TRUE)
  failed <- tryCatch(
    withCallingHandlers(
      {
        cli_args <- parse_cli_args(commandArgs(trailingOnly = TRUE))
        mode <- cli_args[["mode"]]
        check_mode(mode, modes)
        require_r_torch()
        spec <- prepare_run_spec(cli_args)
        record <- run_workload(spec, mode)
        cat(record_to_json(record), "\n", sep = "")
        FALSE
      },
      error = function(err) if (debug) print_traceback(sys.calls())
    ),
    error = function(err) {
      message("error: ", conditionMessage(err))
      TRUE
    }
  )
  if (failed) {
    quit(save = "no", status = 1L)
  }
  invisible(NULL)
}

#' The R calls that led to an error, outermost first, one line each (`--debug` in shell mode).
print_traceback <- function(calls) {
  message("Traceback (R calls, most recent last):")
  for (k in seq_along(calls)) {
    message(sprintf("%3d: %s", k, deparse(calls[[k]], nlines = 1L, width.cutoff = 200L)))
  }
}
