#' What a script reads from its run spec: the mode's properties, dtypes by their contract names and the fixture tensors.
#' The twin of `py_scripts/run_spec.py`.
#'
#' The R scripts' shared code is split by job, each file the twin of the Python module of its stem (the same names in
#' the same order, tests/unit/scripts/test_r_scripts.py checks it; a helper that R needs and Python has built in is
#' marked "R-only" where it is defined): this one, model.R, optimizer.R, scaler.R, features.R, checkpoint.R, loop.R,
#' tracing.R, timing.R, record.R, patches.R and shell.R; each model's forward is a file of models/. _bridge.R (the
#' harness's rpy2 entry point) and _bootstrap.R (what a script run by hand sources) load them, in the order their
#' `shared_files` names. The contract both halves follow is `docs/contract.md`. Sourcing these files defines functions
#' only: they load neither torch nor anything else, so the bridge and argument handling work where R torch is not
#' installed. Functions that need torch call it with `torch::` prefixes, so nothing is attached to the search path
#' either. Every R torch call is one in mlverse/torch's own sources; the file is named where the API differs from
#' PyTorch's.

#' R-only: signal an error with a cli-formatted message (Python raises its exceptions).
#'
#' `cli::cli_abort()` needs rlang, which every R torch install has (torch imports it); where rlang is
#' missing (a machine without torch, checking arguments only) the same text is raised with `stop()`. `class`: the condition's
#' own class (`amp_parity_refused`: the script refuses the cell, which the harness reports unsupported).
abort_cli <- function(message, ..., class = NULL, .envir = parent.frame()) {
  if (requireNamespace("rlang", quietly = TRUE)) {
    cli::cli_abort(message, ..., class = c(class, "amp_parity_error"), call = NULL, .envir = .envir)
  }
  stop(errorCondition(cli::format_message(message, .envir = .envir), class = c(class, "amp_parity_error")))
}

#' R-only: stop with the install instructions unless R torch and its libtorch are installed (Python's
#' scripts import torch, and the import is the check).
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

#' What `mode` does (autocast, the weights' dtype, the loss scaler, clipping), from the modes the run spec declares
#' for this script (docs/contract.md); a missing mode or one the script does not run is refused, naming the ones it does.
mode_properties <- function(spec, mode) {
  modes <- names(spec$modes)
  if (is.null(mode) || length(mode) != 1L || is.na(mode)) {
    abort_cli(c(
      "{.var mode} is required: one of {.or {.val {modes}}}.",
      i = "Pass it as {.code --mode {modes[[1]]}}."
    ))
  }
  if (!mode %in% modes) {
    abort_cli("{.var mode} must be one of {.or {.val {modes}}}, but got {.val {mode}}.")
  }
  spec$modes[[mode]]
}

#' The torch dtype for a contract dtype name (`bfloat16`, `float16`, ...): R torch's own of that name (`torch_bfloat16()`).
torch_dtype <- function(name) {
  constructor <- if (is.character(name) && length(name) == 1L) get0(paste0("torch_", name), envir = asNamespace("torch"), mode = "function")
  dtype <- if (!is.null(constructor)) tryCatch(constructor(), error = function(err) NULL)
  if (!inherits(dtype, "torch_dtype")) {
    abort_cli("{.var dtype} must name a dtype of torch, but got {.val {name}}.")
  }
  dtype
}

#' The contract's name for a torch dtype, one of the run spec's `dtypes` (harness/contract/dtypes.py).
#'
#' `as.character()` on an R torch dtype gives libtorch's scalar-type name (R/dtype.R:
#' `as.character.torch_dtype` → `cpp_dtype_to_string`): "Float", "Half", "BFloat16", "Double"; the run spec's `dtypes`
#' names each dtype's `libtorch` name.
dtype_name <- function(dtype, spec) {
  libtorch_name <- as.character(dtype)
  for (name in names(spec$dtypes)) {
    if (identical(spec$dtypes[[name]]$libtorch, libtorch_name)) {
      return(name)
    }
  }
  abort_cli("Unexpected dtype {.val {libtorch_name}}: expected one of {.or {.val {names(spec$dtypes)}}}.")
}

#' The last fixture file loaded (`_fixture_cache` in run_spec.py), on its device, with its key (path, mtime, size, device).
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
