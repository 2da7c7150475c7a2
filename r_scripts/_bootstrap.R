#' The R scripts' one bootstrap: defines `r_file_path()` and loads the shared files and shell.R from beside this file.
#'
#' A script run by hand (`Rscript r_scripts/with_autocast.R ...`) or sourced on its own sources this
#' file into the environment it is evaluated in, so its `run_workload()` and `main_cli()` find the
#' shared code there. The harness's bridge (_bridge.R) loads the shared files before it sources a script, and
#' the script then skips this file. `r_file_path()` is all it defines of its own.
# Run on its own (`Rscript r_scripts/_bootstrap.R`), there is nothing to source it from: say so in one line.
if (sys.nframe() == 0L) {
  message("error: r_scripts/_bootstrap.R is sourced by the scripts to load their shared code; it runs nothing on its own. Run a script: Rscript r_scripts/with_autocast.R --help")
  quit(save = "no", status = 4L) # harness.errors.ExitCode.USAGE_ERROR: run the wrong file
}

#' The R file being run: the innermost `source()` in progress, else the file `Rscript` runs; `NULL` if neither.
#'
#' R has no `__file__`. `source()` keeps the path it was given in a local variable `ofile` (base R's
#' source.R, for `chdir = TRUE`), and `dynGet()` reads the innermost frame that has one; `Rscript f.R`
#' runs `R --file=f.R`, so with no `source()` in progress the path is in `commandArgs()`. A source in
#' progress wins over `--file=`: a file that `Rscript` runs may source another. This is the one place the
#' R files find themselves: the harness hands the bridge its folder, shell.R calls this function, and a
#' script run cold (nothing loaded yet) repeats the `dynGet()` expression below verbatim in its first
#' line to find this file (tests/unit/scripts/test_r_scripts.py keeps the copies identical and counts them).
#'
#' @return the file's normalized path, or `NULL` (code run by `Rscript -e`, or a `source()` of a connection).
r_file_path <- function() {
  path <- dynGet("ofile", sub("^--file=", "", grep("^--file=", commandArgs(), value = TRUE)))
  if (is.character(path) && length(path) > 0L) normalizePath(path[[1]]) else NULL
}

# The shared files by job, in the order they load (_bridge.R loads the same but shell.R, byte-compiled: the two lists are
# held equal by tests/unit/scripts/test_r_scripts.py), then the shell mode.
local({
  here <- dirname(r_file_path())
  for (part in c("run_spec.R", "model.R", "tracing.R", "timing.R", "record.R", "optimizer.R", "scaler.R", "features.R", "checkpoint.R",
    "loop.R", "patches.R", "shell.R")) {
    source(file.path(here, part), local = parent.env(environment()))
  }
})
