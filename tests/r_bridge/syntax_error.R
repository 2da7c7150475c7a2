#' A stand-in R script for the bridge tests: this file does not parse (an unclosed call).

run_workload <- function(spec, mode) {
  list(mode = mode
}
