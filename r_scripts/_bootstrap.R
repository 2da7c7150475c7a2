#' The R scripts' one bootstrap: loads common.R and shell.R from beside this file.
#'
#' A script run by hand (`Rscript r_scripts/with_autocast.R ...`) or sourced on its own sources this
#' file into the environment it is evaluated in, so its `run_workload()` and `main_cli()` find the
#' shared code there. The harness's bridge (_bridge.R) loads common.R before it sources a script, and
#' the script then skips this file. It defines nothing of its own.
# Run on its own (`Rscript r_scripts/_bootstrap.R`), there is nothing to source it from: say so in one line.
if (sys.nframe() == 0L) {
  message("error: r_scripts/_bootstrap.R is sourced by the scripts to load their shared code; it runs nothing on its own. Run a script: Rscript r_scripts/with_autocast.R --help")
  quit(save = "no", status = 1L)
}

local({
  # This file is the innermost `source()` in progress: `source()` keeps its path in a local `ofile`.
  here <- dirname(Filter(is.character, lapply(rev(sys.frames()), function(frame) frame$ofile))[[1]])
  for (part in c("common.R", "shell.R")) {
    source(file.path(here, part), local = parent.env(environment()))
  }
})
