# Runs every R reproducer named on the command line in this one R session (library(torch) loaded once), as Rscript would
# run each: a reproducer's quit(status = N) ends it with N, an uncaught error with 1 (Rscript's status for an error).
# Usage: Rscript tests/reproducers/run_all.R OUT_DIR docs/bugs/<id>/reproducer.R ...
# Writes OUT_DIR/<id>.out (what it printed) and OUT_DIR/<id>.status (its exit status) for each.
args <- commandArgs(trailingOnly = TRUE)
out_dir <- args[[1]]
suppressPackageStartupMessages(library(torch))
for (path in args[-1]) {
  id <- basename(dirname(path))
  env <- new.env(parent = globalenv())
  # quit() and q() end this reproducer only: they signal, the loop goes on to the next one
  env$quit <- env$q <- function(save = "default", status = 0, runLast = TRUE) {
    stop(structure(class = c("reproducer_quit", "condition"), list(status = status, message = "quit", call = NULL)))
  }
  status <- 0L
  printed <- capture.output({
    status <- tryCatch({
      sys.source(path, envir = env, keep.source = FALSE)
      0L
    }, reproducer_quit = function(done) as.integer(done$status), error = function(e) {
      cat("Error:", conditionMessage(e), "\n")
      1L
    })
  })
  writeLines(printed, file.path(out_dir, paste0(id, ".out")))
  writeLines(as.character(status), file.path(out_dir, paste0(id, ".status")))
}
