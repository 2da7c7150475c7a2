#' A stand-in R script for the bridge tests: echoes its spec and mode back as a run record.
#'
#' Needs no torch: the record is built directly from `spec` and `mode`, with `epochs * num_batches`
#' steps (3 when the spec does not say), so a one-step spec tests one-element arrays. It also writes
#' one line with `message()` (R's stderr) and one with `cat()` (R's stdout), to test console routing. Its list fields are
#' marked `I()`, as `make_record()` marks the run spec's `list of` kinds, so one element stays a JSON array.

run_workload <- function(spec, mode) {
  given <- function(name, default) if (is.null(spec[[name]])) default else spec[[name]]
  message("echo.R: message() line")
  cat("echo.R: cat() line\n")
  steps <- as.integer(given("epochs", 1L) * given("num_batches", 3L))
  losses <- 1 / seq_len(steps)
  scaler_mode <- startsWith(mode, "autocast_scaler")
  loss_scale <- if (scaler_mode) rep(given("init_scale", 65536), steps) else NULL
  skipped <- if (scaler_mode) rep(FALSE, steps) else NULL
  list(
    schema_version = 2L,
    frontend = "r",
    script = "echo",
    mode = mode,
    device = given("device", "cpu"),
    amp_dtype = given("amp_dtype", "bfloat16"),
    losses = I(losses),
    final_loss = losses[[steps]],
    loss_scale = if (is.null(loss_scale)) NULL else I(loss_scale),
    skipped = if (is.null(skipped)) NULL else I(skipped),
    skipped_steps = if (scaler_mode) sum(skipped) else NULL,
    output_dtype = "float32",
    loss_dtype = "float32",
    weights_path = given("weights_out", ""),
    seconds_total = 0.5,
    seconds_per_epoch = I(rep(0.5 / given("epochs", 1L), given("epochs", 1L))),
    seconds_workload = 0.6,
    gc_seconds = 0,
    peak_memory_bytes = NULL,
    torch_version = "none",
    libtorch_version = NULL,
    language_version = R.version.string,
    threads = as.integer(given("threads", 1L)),
    device_name = given("device", "cpu")
  )
}
