#' A stand-in R script for the bridge tests: `run_workload()` fails with a known R error message.

run_workload <- function(spec, mode) {
  stop("deliberate failure in r_error.R")
}
