#' The R scripts' shell mode, a script run by hand: the twin of `py_scripts/shell.py`.
#'
#' `Rscript r_scripts/with_autocast.R --preset tiny --mode autocast` hands its flags to the harness
#' (`python -m harness prepare --shell-of ...`), which parses them with the Python scripts' own parser,
#' checks the mode, validates the spec and draws the fixtures (all of which live in Python only); it then
#' runs and prints the record. Python's `main_cli()` calls the same harness code in-process
#' (`harness.run.prepare.parse_shell_args()`, `check_shell_mode()`, `prepare_shell_run_spec()`), so every
#' helper here but `main_cli()` is R-only.
#' Loaded by _bootstrap.R, after the shared files, whose functions it uses, and it finds files with the bootstrap's `r_file_path()`.

#' `x`, or `y` where `x` is `NULL` (base R has this only from 4.4.0).
`%||%` <- function(x, y) if (is.null(x)) y else x

#' The folder holding this file (`r_scripts/`), fixed when shell.R is sourced (`r_file_path()` is _bootstrap.R's).
amp_parity_r_dir <- dirname(r_file_path() %||% file.path(getwd(), "r_scripts", "shell.R"))

#' The exit statuses of the harness's `ExitCode` (harness/errors.py) that an R script ends with on its own errors, until
#' the harness hands them over (`prepare` returns them with the spec): used only when the harness could not be asked
#' (no Python could run it). tests/unit/scripts/test_r_scripts.py holds them equal to the enum's.
shell_exit_status <- list(usage_error = 4L, internal_error = 3L)

#' The script's mode and run spec, from the harness: its flags are parsed by the Python scripts' parser.
#'
#' Runs `python -m harness prepare --shell-of <script>.R -- <args>` from the
#' checkout's root (the folder above r_scripts/), with `python` from `AMP_PARITY_PYTHON` (default
#' `python3`): one parser for both languages, so the flags, `--help` and every refusal read the same
#' (`harness.run.prepare.prepare_shell_run`). It prints the help (status 0: printed here, and `NULL` is
#' returned), or `{"mode", "debug", "spec", "exit_status"}` as one JSON object, or one line `error: ...` and a
#' non-zero status, which becomes this function's error (class `amp_parity_relayed`, carrying that status: the script
#' exits with it, so a usage error and a bug of the harness keep their statuses through the relay).
prepare_shell_run <- function(args, script) {
  python <- Sys.getenv("AMP_PARITY_PYTHON", "python3")
  old_wd <- setwd(dirname(amp_parity_r_dir))
  on.exit(setwd(old_wd), add = TRUE)
  old_library_path <- Sys.getenv("LD_LIBRARY_PATH")
  Sys.setenv(LD_LIBRARY_PATH = python_library_path())
  on.exit(Sys.setenv(LD_LIBRARY_PATH = old_library_path), add = TRUE)
  # system2() quotes the command but passes the arguments to the shell as they are.
  python_fix <- c(i = "Set {.envvar AMP_PARITY_PYTHON} to a Python that can import the harness.")
  command <- c("-m", "harness", "prepare", "--shell-of", paste0(script, ".R"), "--", args)
  output <- tryCatch(
    suppressWarnings(system2(python, shQuote(command), stdout = TRUE, stderr = TRUE)),
    error = function(err) abort_cli(c("Could not run {.code {python}}: {conditionMessage(err)}.", python_fix))
  )
  status <- attr(output, "status") %||% 0L
  is_json <- startsWith(output, "{")
  if (status == 0L && !any(is_json) && any(startsWith(output, "usage: "))) {
    writeLines(output) # --help (or -h): the whole help, as the Python script prints it
    return(NULL)
  }
  if (status != 0L || !any(is_json)) {
    # Every error of the harness, argparse's included, is one line `error: ...`; under --debug the
    # Python traceback above it is shown too.
    if ("--debug" %in% args) {
      for (line in output) message(line)
    }
    error_line <- grep("^error: ", output, value = TRUE)
    if (length(error_line) > 0L) { # main_cli() prefixes its own "error: "
      stop(errorCondition(sub("^error: ", "", error_line[[length(error_line)]]), class = c("amp_parity_relayed", "amp_parity_error"),
                          status = as.integer(status)))
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

#' Shell mode: the flags, mode and spec from the harness (one parser for both languages), then run and print the record.
#'
#' `--help` prints the Python script's help, named for this script, and exits 0. Any error prints one
#' line, without R's traceback unless `--debug` (Python's twin gets it from exit_with_error()), and exits with the
#' harness's status for it: the harness's own (relayed from `prepare`), a usage error for the scripts' own refusals
#' (`abort_cli()`: class `amp_parity_error`), an internal error for anything else.
main_cli <- function(script, run_workload) {
  options(cli.width = 10000L) # one message per line: the process is ours and ends here
  args <- commandArgs(trailingOnly = TRUE)
  # Read before the flags are parsed, so that a parse error shows its traceback too.
  debug <- "--debug" %in% args
  # torch's own load check runs a child R whose report we cannot catch (a broken libtorch printed a
  # dozen lines): the load itself fails just the same, as one error, with torch's warning folded in.
  Sys.setenv(TORCH_VERIFY_LOAD = "FALSE")
  warned <- character()
  statuses <- shell_exit_status
  failed <- tryCatch(
    withCallingHandlers(
      {
        prepared <- prepare_shell_run(args, script)
        if (!is.null(prepared)) {
          statuses <- prepared$exit_status %||% statuses
          require_r_torch()
          record <- run_workload(prepared$spec, prepared$mode)
          cat(record_to_json(record), "\n", sep = "")
        }
        FALSE
      },
      warning = function(w) {
        warned <<- c(warned, one_line(conditionMessage(w)))
        invokeRestart("muffleWarning")
      },
      error = function(err) if (debug) print_traceback(sys.calls())
    ),
    error = function(err) {
      why <- if (length(warned) > 0L) paste0(" (warned before: ", paste(warned, collapse = "; "), ")") else ""
      message("error: ", one_line(conditionMessage(err)), why)
      warned <<- character()
      if (inherits(err, "amp_parity_relayed")) err$status
      else if (inherits(err, "amp_parity_error")) statuses$usage_error
      else statuses$internal_error
    }
  )
  for (text in warned) message("warning: ", text) # one line each, as the Python scripts print theirs
  if (!isFALSE(failed)) {
    quit(save = "no", status = as.integer(failed))
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

#' A condition message on one line: cli puts each bullet (a fix, a detail) on a line of its own.
#'
#' Each line loses its bullet (`ℹ`, `✖`, `!`, ...), and the lines are joined with spaces.
one_line <- function(text) {
  lines <- trimws(strsplit(cli::ansi_strip(text), "\n", fixed = TRUE)[[1]])
  if (length(lines) == 0L) {
    return("")
  }
  bullets <- c(unlist(cli::symbol[c("info", "cross", "tick", "bullet", "warning", "arrow_right")]), "!", "*", "i", "x", "v", ">")
  bare <- vapply(lines, function(line) {
    words <- strsplit(line, " ", fixed = TRUE)[[1]]
    if (length(words) > 1L && words[[1]] %in% bullets) paste(words[-1], collapse = " ") else line
  }, character(1), USE.NAMES = FALSE)
  paste(bare[nzchar(bare)], collapse = " ")
}
