#' Reports what the R side of this machine can run, as one JSON object on stdout.
#'
#' Run by the harness with `Rscript r_scripts/_probe.R` (in its own process, never in one that has
#' loaded Python torch), or sourced by its R worker. It needs only base R and jsonlite; each step that fails is reported, not
#' raised, so `python -m harness doctor` can say precisely what is missing.
probe_r_side <- function() {
  info <- list(
    r_version = R.version.string,
    jsonlite = TRUE,
    cli = requireNamespace("cli", quietly = TRUE),
    safetensors = requireNamespace("safetensors", quietly = TRUE),
    # bench::hires_time() is the R scripts' clock (timing.R's clock_name); without it, proc.time()'s 1 ms
    bench = nzchar(system.file(package = "bench")),
    torch_installed = requireNamespace("torch", quietly = TRUE),
    torch_version = NULL,
    libtorch_version = NULL,
    libtorch_installed = FALSE,
    libtorch_loads = FALSE,
    libtorch_error = NULL,
    cuda_available = FALSE
  )
  if (info$torch_installed) {
    info$torch_version <- as.character(utils::packageVersion("torch"))
    # The libtorch version R torch is built for: the unexported string `torch_version` in R/install.R
    # (the same read as libtorch_version() in record.R).
    libtorch <- get0("torch_version", envir = asNamespace("torch"), inherits = FALSE)
    if (is.character(libtorch) && length(libtorch) == 1L) info$libtorch_version <- libtorch
    info$libtorch_installed <- isTRUE(torch::torch_is_installed())
    if (info$libtorch_installed) {
      # torch_is_installed() only looks for the library files; a tensor proves libtorch loads.
      loaded <- tryCatch({
        torch::torch_tensor(1)
        TRUE
      }, error = function(e) conditionMessage(e))
      info$libtorch_loads <- isTRUE(loaded)
      if (!isTRUE(loaded)) info$libtorch_error <- loaded
      if (info$libtorch_loads) info$cuda_available <- isTRUE(torch::cuda_is_available())
    }
  }
  info
}

# Run by Rscript, it prints its answer; sourced (the harness's R worker, harness/worker_side/r_handler.py, asks the same
# questions of the R it embeds when it starts, so a run needs no second R to start), it only defines probe_r_side().
if (sys.nframe() == 0L) {
  cat(jsonlite::toJSON(probe_r_side(), auto_unbox = TRUE, null = "null"), "\n")
}
