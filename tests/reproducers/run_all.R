# Runs many R reproducers (docs/bugs/<id>/reproducer.R) in this one R process, each in an environment of its own, and
# writes what each printed and the status it quit with as JSON: tests/integration/test_bug_reproducers.py's shared
# interpreter (one R start and one library(torch) for all of them, instead of one each).
# Usage: Rscript tests/reproducers/run_all.R OUT_JSON REPRODUCER.R...
# A reproducer ends with quit(status = 1) while its bug exists: its environment's own quit() stops it with that status
# instead of ending the process (R finds the environment's function before base's).
args <- commandArgs(trailingOnly = TRUE)
results <- list()
for (path in args[-1]) {
  env <- new.env(parent = globalenv())
  env$quit <- function(save = "default", status = 0, runLast = TRUE) {
    stop(structure(class = c("reproducer_quit", "error", "condition"), list(message = "quit", call = NULL, status = status)))
  }
  status <- NA_integer_
  printed <- utils::capture.output({
    status <- tryCatch(
      { sys.source(path, envir = env); 0L },
      reproducer_quit = function(condition) as.integer(condition$status),
      error = function(err) { cat("error:", conditionMessage(err), "\n"); 2L }
    )
  })
  results[[path]] <- list(status = status, stdout = paste(printed, collapse = "\n"))
}
writeLines(jsonlite::toJSON(results, auto_unbox = TRUE), args[[1]])
