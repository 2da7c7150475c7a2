#' A stand-in R script for the bridge tests: `run_workload()` kills its own process with SIGSEGV,
#' as a crash in native code (libtorch) would.
#'
#' tools exports no `SIGSEGV` constant (only SIGHUP, SIGINT, SIGKILL, SIGTERM, ...); it is signal 11
#' on Linux and macOS.

sigsegv <- 11L

run_workload <- function(spec, mode) {
  tools::pskill(Sys.getpid(), sigsegv)
  Sys.sleep(60)
  stop("crash.R: the process survived SIGSEGV")
}
