#' The `cuda_amp_grad_scaler` workload in R torch: `with_autocast()` + `cuda_amp_grad_scaler()`.
#'
#' Twin of `py_scripts/cuda_amp_grad_scaler.py` (`docs/contract.md`). Mode `autocast_scaler_clip`
#' unscales the gradients and clips their norm before `step()`. The scale is recorded after every
#' `update()`; a step is *skipped* when that update lowered the scale (the backoff rule fired because
#' the gradients held inf/NaN). `overflow_steps` (0-based) puts an inf into one gradient at those
#' steps, after `backward()` and before `unscale_()`/`step()`, so the skip-and-backoff path runs.
#' Each step's scale is kept on the device and copied to R after the loop: reading it inside the
#' loop would be a host sync per step on CUDA that `default` mode does not pay. R torch's scaler
#' takes CUDA tensors only (`scale()` in R/autocast.R aborts otherwise): on CPU its own error
#' propagates and the harness reports the cell unsupported.
#' Shell: `Rscript r_scripts/cuda_amp_grad_scaler.R --preset tiny --mode autocast_scaler --device cuda`.

if (!exists("make_record", mode = "function")) {
  # Run by hand or sourced on its own: r_scripts/_bootstrap.R loads the shared code (common.R, shell.R)
  # into this file's environment; the harness's bridge has loaded it already. This file is Rscript's
  # `--file=`, or the innermost `source()` in progress (which keeps the path in a local `ofile`).
  local({
    this_file <- c(
      rev(Filter(is.character, lapply(sys.frames(), function(frame) frame$ofile))),
      sub("^--file=", "", grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE))
    )[[1]]
    source(file.path(dirname(this_file), "_bootstrap.R"), local = parent.env(environment()))
  })
}

modes <- c("autocast_scaler", "autocast_scaler_clip")

#' Put an inf into one gradient element (the first layer's first weight), as an fp16 overflow would.
#'
#' @param net the model from `make_model()`.
inject_overflow <- function(net) {
  torch::with_no_grad({
    grad <- linear_layers(net)[[1]]$weight$grad
    grad[1, 1] <- Inf # `[<-.torch_tensor` writes into the tensor in place (tensor_slice_put_)
  })
  invisible(NULL)
}

#' Train the MLP for `spec` under autocast with gradient scaling (and clipping in `*_clip`).
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
  use_clip <- mode == "autocast_scaler_clip"
  amp_dtype <- torch_dtype(spec$amp_dtype)
  # Unlike torch.amp.GradScaler(device), R's scaler has no device argument: it is CUDA-only.
  scaler <- torch::cuda_amp_grad_scaler(
    init_scale = spec$init_scale, growth_factor = spec$growth_factor,
    backoff_factor = spec$backoff_factor, growth_interval = spec$growth_interval
  )

  # jsonlite gives `[]` as an empty list and `[3, 7]` as an integer vector.
  overflow_steps <- as.integer(unlist(spec$overflow_steps))
  losses <- list()
  scales <- list()
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
      torch::with_autocast(device_type = device, dtype = amp_dtype, {
        output <- net(data[i, , ])
        loss <- loss_fn(output, targets[i, , ])
      })
      if (is.null(output_dtype)) {
        output_dtype <- dtype_name(output$dtype)
        loss_dtype <- dtype_name(loss$dtype)
      }
      scaler$scale(loss)$backward()
      if (step %in% overflow_steps) {
        inject_overflow(net)
      }
      if (use_clip) {
        scaler$unscale_(opt)
        torch::nn_utils_clip_grad_norm_(net$parameters, max_norm = spec$clip_max_norm)
      }
      scaler$step(opt)
      scaler$update()
      opt$zero_grad()
      losses[[length(losses) + 1L]] <- loss$detach()
      # R's scaler has no get_scale(): the scale is its public field `.scale`, a 0-dim float32
      # tensor created by the first scale() and updated in place by update() (R/autocast.R);
      # a clone keeps this step's value on the device, as Python's _get_scale_async() clone does.
      scales[[length(scales) + 1L]] <- scaler$.scale$detach()$clone()
      step <- step + 1L
    }
    sync_device(device)
    epoch_end <- clock()
    seconds_per_epoch <- c(seconds_per_epoch, epoch_end - epoch_start)
    epoch_start <- epoch_end
  }
  gc_seconds <- resume_gc(gc_state)

  loss_values <- as.numeric(torch::torch_stack(losses)$float()$cpu())
  loss_scale <- as.numeric(torch::torch_stack(scales)$cpu())
  previous_scale <- c(spec$init_scale, loss_scale[-length(loss_scale)])
  skipped <- loss_scale < previous_scale
  save_final_weights(net, spec$weights_out)
  make_record(
    script = "cuda_amp_grad_scaler", mode = mode, device = device, amp_dtype = spec$amp_dtype,
    losses = loss_values, final_loss = loss_values[[length(loss_values)]], loss_scale = loss_scale,
    skipped = skipped, skipped_steps = sum(skipped), output_dtype = output_dtype,
    loss_dtype = loss_dtype, weights_path = spec$weights_out, seconds_total = sum(seconds_per_epoch),
    seconds_per_epoch = seconds_per_epoch, workload_start = workload_start,
    gc_seconds = gc_seconds, peak_memory_bytes = peak_memory_bytes(device),
    threads = torch::torch_get_num_threads(), device_name = device_name(device)
  )
}

if (sys.nframe() == 0L) {
  main_cli(modes, run_workload)
}
