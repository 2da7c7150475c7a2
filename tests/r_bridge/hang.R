#' A stand-in R script for the bridge tests: `run_workload()` never returns (within any timeout).

run_workload <- function(spec, mode) {
  Sys.sleep(3600)
}
