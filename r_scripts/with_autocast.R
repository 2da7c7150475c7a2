#' The `with_autocast` workload in R torch: default precision vs `with_autocast()` (no scaler).
#'
#' Twin of `py_scripts/with_autocast.py`: same function, names and order of operations
#' (`docs/contract.md`). Sourcing this file defines `modes` and `run_workload()` and runs nothing.
#' Every `trace_point()` names one intermediate for the harness's trace (docs/tracing.md); it costs
#' nothing unless the harness traces this call.
#' Shell: `Rscript r_scripts/with_autocast.R --preset tiny --mode autocast --device cpu`.

if (!exists("make_record", mode = "function")) {
  # Run by hand or sourced on its own, nothing is loaded yet. R has no `__file__`, and r_file_path() lives in the very
  # file this line must find (_bootstrap.R), so the line repeats that function's expression verbatim (source()'s `ofile`,
  # else Rscript's `--file=`) and sources _bootstrap.R from beside this file into this file's environment. Under the
  # harness's bridge, common.R is loaded already and this is skipped.
  source(file.path(dirname(dynGet("ofile", sub("^--file=", "", grep("^--file=", commandArgs(), value = TRUE)))), "_bootstrap.R"), local = TRUE)
}

modes <- c("default", "autocast")

#' Train the MLP for `spec` with autocast off (`default`) or on (`autocast`).
#'
#' @param spec the run spec, a list (`docs/contract.md`).
#' @param mode one of `modes`.
#' @return the run record, a named list with `record_fields`.
run_workload <- function(spec, mode) {
  workload_start <- clock()
  check_mode(mode, modes)
  require_r_torch()
  torch::torch_set_num_threads(spec$threads)
  device <- spec$device
  fixtures <- load_fixtures(spec)
  data <- fixtures$data
  targets <- fixtures$targets
  net <- make_model(spec, fixtures)
  loss_fn <- torch::nn_mse_loss()
  opt <- torch::optim_sgd(net$parameters, lr = spec$lr)
  use_autocast <- mode == "autocast"
  amp_dtype <- torch_dtype(spec$amp_dtype)

  losses <- list()
  output_dtype <- NULL
  loss_dtype <- NULL
  seconds_per_epoch <- numeric()
  gc_state <- pause_gc() # R cannot switch its collector off: it returns the GC clock (common.R)
  reset_peak_memory(device)
  sync_device(device)
  epoch_start <- clock()
  step <- 0L
  for (epoch in seq_len(spec$epochs)) {
    for (i in seq_len(spec$num_batches)) {
      trace_point(step, "batch.data", data[i, , ])
      trace_point(step, "batch.targets", targets[i, , ])
      # `with_autocast()` evaluates the block in this function's frame (R/autocast.R), so
      # `output` and `loss` are assigned here, as inside Python's `with torch.autocast(...)`.
      torch::with_autocast(device_type = device, dtype = amp_dtype, enabled = use_autocast, {
        output <- forward(net, data[i, , ], step)
        loss <- loss_fn(output, targets[i, , ])
      })
      trace_point(step, "loss", loss)
      if (is.null(output_dtype)) {
        output_dtype <- dtype_name(output$dtype)
        loss_dtype <- dtype_name(loss$dtype)
      }
      loss$backward()
      trace_parameters(step, "grad.backward", net, grads = TRUE)
      opt$step()
      trace_parameters(step, "param.stepped", net, grads = FALSE)
      # R torch's zero_grad() zeroes the gradients in place (set_to_none = FALSE, R/optim.R) where
      # PyTorch sets them to None; the next backward() gives the same gradients either way.
      opt$zero_grad()
      losses[[length(losses) + 1L]] <- loss$detach()
      step <- step + 1L
    }
    sync_device(device)
    epoch_end <- clock()
    seconds_per_epoch <- c(seconds_per_epoch, epoch_end - epoch_start)
    epoch_start <- epoch_end
  }
  gc_seconds <- resume_gc(gc_state)

  loss_values <- as.numeric(torch::torch_stack(losses)$float()$cpu())
  save_final_weights(net, spec$weights_out)
  make_record(
    script = "with_autocast", mode = mode, device = device, amp_dtype = spec$amp_dtype,
    losses = loss_values, final_loss = loss_values[[length(loss_values)]], loss_scale = NULL,
    skipped = NULL, skipped_steps = NULL, output_dtype = output_dtype, loss_dtype = loss_dtype,
    weights_path = spec$weights_out, seconds_total = sum(seconds_per_epoch),
    seconds_per_epoch = seconds_per_epoch, workload_start = workload_start,
    gc_seconds = gc_seconds, peak_memory_bytes = peak_memory_bytes(device),
    threads = torch::torch_get_num_threads(), device_name = device_name(device), lifted_check = NULL
  )
}

if (sys.nframe() == 0L) {
  main_cli(modes, run_workload)
}
