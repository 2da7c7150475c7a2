#' The `with_autocast` workload in R torch: the training loop without a gradient scaler.
#'
#' Twin of `py_scripts/with_autocast.py`: same function, names and order of operations (`docs/contract.md`). Its modes
#' (declared in harness/contract/modes.py, handed over in the run spec's `modes`) choose the precision either by
#' autocast (`default`: off; `autocast`: on) or by the weights' dtype, the AMP guide's other way to train
#' (`lowp_weights`: weights and inputs in the AMP dtype, no autocast, its `--fp16`; `lowp_weights_scaled`: with a static
#' loss scale, its `-s`). The optimizer is the run spec's (`make_optimizer()`), its loop feature a scheduler
#' (`make_scheduler()`), a layer computed by a custom autograd function (`custom_layer()`), or none. Sourcing this file defines `script`,
#' `unscale_static()` and `run_workload()` and runs nothing. Every `trace_point()` names one intermediate for the
#' harness's trace (docs/tracing.md); it costs nothing unless the harness traces this call.
#' Shell: `Rscript r_scripts/with_autocast.R --preset tiny --mode autocast --optimizer adam --device cpu`.

if (!exists("make_record", mode = "function")) {
  # Run by hand or sourced on its own, nothing is loaded yet. R has no `__file__`, and r_file_path() lives in the very
  # file this line must find (_bootstrap.R), so the line repeats that function's expression verbatim (source()'s `ofile`,
  # else Rscript's `--file=`) and sources _bootstrap.R from beside this file into this file's environment. Under the
  # harness's bridge, common.R is loaded already and this is skipped.
  source(file.path(dirname(dynGet("ofile", sub("^--file=", "", grep("^--file=", commandArgs(), value = TRUE)))), "_bootstrap.R"), local = TRUE)
}

script <- "with_autocast"

#' Divide every gradient by the static loss scale, in place, before the step (the AMP guide's `-s`); a frozen
#' layer's parameters have none.
unscale_static <- function(net, scale) {
  torch::with_no_grad({
    for (param in named_parameters(net)) {
      if (!torch::is_undefined_tensor(param$grad)) {
        param$grad$div_(scale)
      }
    }
  })
  invisible(NULL)
}

#' Train the MLP for `spec` in `mode` with the spec's optimizer.
#'
#' @param spec the run spec, a list (`docs/contract.md`).
#' @param mode one of the modes the run spec declares.
#' @return the run record, a named list with the run spec's `record_fields`.
run_workload <- function(spec, mode) {
  workload_start <- clock()
  properties <- mode_properties(spec, mode)
  require_r_torch()
  torch::torch_set_num_threads(spec$threads)
  device <- spec$device
  fixtures <- load_fixtures(spec)
  data <- fixtures$data
  targets <- fixtures$targets
  amp_dtype <- torch_dtype(spec$amp_dtype)
  weights_dtype <- if (properties$weights == "amp") amp_dtype else torch::torch_float32()
  net <- make_model(spec, fixtures)
  net$to(dtype = weights_dtype) # in place (R/nn.R); Python's `.to()` returns the module too
  freeze_layer(spec, net) # the run spec's loop feature: a frozen layer, or none
  loss_fn <- torch::nn_mse_loss()
  # The optimizer's methods as the run spec patches them (reconciliation switches; trace points when traced): Python
  # swaps the functions in their modules around its loop instead (py_scripts/patches.py).
  opt <- patch_optimizer(make_optimizer(spec, net), spec)
  # The static scale is a 0-dim float32 tensor, as the scaler keeps its scale: a scaled loss is float32 in both languages.
  static_scale <- torch::torch_full(list(), spec$static_loss_scale, dtype = torch::torch_float32(), device = device)
  use_static_scale <- properties$scaler == "static"
  scheduler <- patch_scheduler(make_scheduler(spec, opt), spec) # the run spec's loop feature: a scheduler, or none (R-only: its methods patched)
  custom <- custom_layer(spec, properties) # the run spec's loop feature: a layer computed by a custom autograd function, or none
  clip_norm <- loop_feature(spec, "clip_norm") # the run spec's loop feature: a norm clip before the step, or none
  clip_grad_norm <- binding_function(spec, "nn_utils_clip_grad_norm_")

  losses <- list()
  output_dtype <- NULL
  loss_dtype <- NULL
  seconds_per_epoch <- numeric()
  gc_state <- pause_gc(spec) # R cannot switch its collector off: it returns the GC clock (common.R)
  reset_peak_memory(device)
  sync_device(device)
  epoch_start <- clock()
  step <- 0L
  for (epoch in seq_len(spec$epochs)) {
    for (i in seq_len(spec$num_batches)) {
      inputs <- data[i, , ]$to(dtype = weights_dtype) # float32: the tensor itself
      target <- targets[i, , ]$to(dtype = weights_dtype)
      trace_point(step, "batch.data", inputs)
      trace_point(step, "batch.targets", target)
      torch::with_autocast(device_type = device, dtype = amp_dtype, enabled = properties$autocast, {
        output <- forward(net, inputs, step, custom = custom)
        loss <- loss_fn(output, target)
      })
      trace_point(step, "loss", loss)
      if (is.null(output_dtype)) {
        output_dtype <- dtype_name(output$dtype, spec)
        loss_dtype <- dtype_name(loss$dtype, spec)
      }
      if (use_static_scale) {
        scaled_loss <- loss * static_scale
        trace_point(step, "loss.scaled", scaled_loss)
        scaled_loss$backward()
        trace_parameters(step, "grad.backward", net, grads = TRUE)
        unscale_static(net, static_scale)
        trace_parameters(step, "grad.unscaled", net, grads = TRUE)
      } else {
        loss$backward()
        trace_parameters(step, "grad.backward", net, grads = TRUE)
      }
      if (!is.null(clip_norm)) { # on the gradients as they are: bfloat16 where the weights are
        clip_grad_norm(net$parameters, max_norm = clip_norm$max_norm, norm_type = clip_norm_type(clip_norm))
        trace_parameters(step, "grad.clipped", net, grads = TRUE)
      }
      opt$step()
      trace_optimizer_state(step, opt, net, spec)
      trace_parameters(step, "param.stepped", net, grads = FALSE)
      opt$zero_grad()
      if (!is.null(scheduler)) {
        step_scheduler(step, spec, opt, scheduler, loss)
      }
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
    spec, workload_start, script = script, mode = mode, optimizer = spec$optimizer$name, device = device,
    amp_dtype = spec$amp_dtype, losses = loss_values, final_loss = loss_values[[length(loss_values)]], loss_scale = NULL,
    skipped = NULL, skipped_steps = NULL, injected_steps = integer(), output_dtype = output_dtype, loss_dtype = loss_dtype,
    weights_path = spec$weights_out, seconds_total = sum(seconds_per_epoch), seconds_per_epoch = seconds_per_epoch,
    gc_seconds = gc_seconds, peak_memory_bytes = peak_memory_bytes(device), threads = torch::torch_get_num_threads(),
    device_name = device_name(device), lifted_check = NULL, switches = applied_switches(spec)
  )
}

if (sys.nframe() == 0L) {
  main_cli(script, run_workload)
}
