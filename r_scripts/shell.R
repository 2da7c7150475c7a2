#' The R scripts' shell mode, a script run by hand: the twin of `py_scripts/shell.py`.
#'
#' `Rscript r_scripts/with_autocast.R --preset tiny --mode autocast` parses its flags here, checks the
#' mode, gets the run spec from the harness (`python -m harness prepare`: spec validation and fixtures
#' live in Python only), runs and prints the record. Python's `main_cli()` calls the same harness code
#' in-process (`harness.prepare.parse_shell_args()`, `prepare_shell_run_spec()`), so every helper here
#' but `main_cli()` is R-only. Loaded by _bootstrap.R, after common.R, whose functions it uses.

#' `x`, or `y` where `x` is `NULL` (base R has this only from 4.4.0).
`%||%` <- function(x, y) if (is.null(x)) y else x

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

#' The folder holding this file (`r_scripts/`), fixed when shell.R is sourced.
amp_parity_r_dir <- dirname(sourced_file() %||% file.path(getwd(), "r_scripts", "shell.R"))

#' Shell flags that take no value: `--debug` (R's traceback on error), `--overwrite` (replace an
#' existing `--weights-out` file) and `--no-scaler-lift`, as in the Python scripts' shell mode.
cli_switches <- c("debug", "overwrite", "no-scaler-lift")

#' Shell flags as a named list: `--batch-size 32` (or `--batch-size=32`) → `list("batch-size" = "32")`.
#'
#' Every `--name value` pair is kept as given: the spec flags are validated by the harness
#' (`python -m harness prepare`), not here. A switch (`cli_switches`) is kept as `TRUE`. A repeated
#' flag keeps its last value, as argparse does.
parse_shell_args <- function(args) {
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

#' The run spec for shell mode, from the harness: spec validation and fixtures live in Python only.
#'
#' Runs `python -m harness prepare <flags>` from the checkout's root (the folder above r_scripts/),
#' with `python` from `AMP_PARITY_PYTHON` (default `python3`). It prints the run spec as one JSON
#' object, or one line `error: ...` and a non-zero status, which becomes this function's error.
prepare_shell_run_spec <- function(cli_args) {
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
        cli_args <- parse_shell_args(commandArgs(trailingOnly = TRUE))
        mode <- cli_args[["mode"]]
        check_mode(mode, modes)
        require_r_torch()
        spec <- prepare_shell_run_spec(cli_args)
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
