#' The `cuda_amp_grad_scaler` workload in R torch: `with_autocast()` + `cuda_amp_grad_scaler()`.
#'
#' Twin of `py_scripts/cuda_amp_grad_scaler.py` (`docs/contract.md`). Its modes (harness/contract/modes.py, handed
#' over in the run spec's `modes`): `default` builds the scaler and autocast with `enabled = FALSE` (the AMP recipe's
#' `use_amp=False`, so ×default compares within this script); `autocast_scaler` scales; `autocast_scaler_clip` also
#' unscales the gradients and clips their norm before `step()`. The optimizer is the run spec's. The scale is recorded
#' after every `update()`; a step is *skipped* when that update lowered the scale (the backoff rule fired because the
#' gradients held inf/NaN). `overflow_steps` (0-based) puts an inf into one gradient at those steps, in the modes with a
#' scaler: after `backward()` (`overflow_point` `backward`, as a real fp16 overflow) or after an explicit `unscale_()`
#' (`unscale`), where only a scaler that checks the gradients again in `step()` can see it; the record's
#' `injected_steps` says where it did. The run spec's loop feature (harness/workload/features.py) adds a learning-rate
#' scheduler stepped after every `update()` (skipped steps included), gradient accumulation (the scaler steps and updates
#' every `every` micro-batches, each loss divided by `every`; the scale is recorded at every micro-batch, and an injection
#' after `unscale_()` happens only on a micro-batch that steps), clipping by value after `unscale_()`, a layer unused on
#' some steps with `zero_grad()`'s `set_to_none` as the row says, two losses and two optimizers under the one scaler (each
#' loss scaled, or both in one `scale()` of a list; one `update()`, once with an explicit new scale), a gradient penalty
#' (`gradient_norm()`), or a layer computed by a custom autograd function. Each step's scale is kept on the device and
#' copied to R after the loop: reading
#' it inside the loop would be a host sync per step on CUDA that `default` mode does not pay.
#' Every `trace_point()` names one intermediate for the harness's trace (docs/tracing.md); it costs nothing unless the
#' harness traces this call.
#'
#' R torch's scaler takes CUDA tensors only, in one place: `scale()` aborts on any other tensor (R/autocast.R). On CPU
#' `make_grad_scaler()` (common.R, shared by every script that scales) lifts that one check, after checking that R
#' torch's method is the one the lift was written for; the record names what was lifted (`lifted_check`).
#' `scaler_lift = FALSE` in the run spec (`--no-scaler-lift`) turns the lift off: R torch's own error then makes the cell
#' unsupported.
#' Shell: `Rscript r_scripts/cuda_amp_grad_scaler.R --preset tiny --mode autocast_scaler --optimizer adam --device cpu`.

if (!exists("make_record", mode = "function")) {
  # Run by hand or sourced on its own, nothing is loaded yet. R has no `__file__`, and r_file_path() lives in the very
  # file this line must find (_bootstrap.R), so the line repeats that function's expression verbatim (source()'s `ofile`,
  # else Rscript's `--file=`) and sources _bootstrap.R from beside this file into this file's environment. Under the
  # harness's bridge, common.R is loaded already and this is skipped.
  source(file.path(dirname(dynGet("ofile", sub("^--file=", "", grep("^--file=", commandArgs(), value = TRUE)))), "_bootstrap.R"), local = TRUE)
}

script <- "cuda_amp_grad_scaler"

#' The norm of the loss's gradients as PyTorch's AMP examples compute it for a gradient penalty: the gradients of the
#' scaled loss with `create_graph` (`autograd_grad()`, so the penalty's own backward goes through them), unscaled by hand
#' (times 1 / the scale), the norm of them all. The caller adds it under autocast.
#'
#' R's scaler has no `get_scale()`: its scale is the public field `.scale` (R/autocast.R), NULL while the scaler is
#' disabled, where Python's `get_scale()` gives 1.0.
gradient_norm <- function(scaler, loss, net, step) {
  scaled_grads <- torch::autograd_grad(scaler$scale(loss), net$parameters, create_graph = TRUE)
  inv_scale <- 1 / (if (is.null(scaler$.scale)) 1 else scaler$.scale$item())
  grads <- lapply(scaled_grads, function(grad) grad * inv_scale)
  norm <- torch::torch_stack(lapply(grads, function(grad) grad$pow(2)$sum()))$sum()$sqrt()
  trace_point(step, "penalty.grad_norm", norm)
  norm
}

#' Train the MLP for `spec` in `mode`: under autocast with gradient scaling (and clipping in `*_clip`), or with both
#' disabled (`default`), with the spec's optimizer.
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
  net <- make_model(spec, fixtures)
  freeze_layer(spec, net) # the run spec's loop feature: a frozen layer, or none
  loss_fn <- torch::nn_mse_loss()
  # The binding's functions and the optimizer's methods as the run spec patches them (reconciliation switches; trace
  # points when traced): Python swaps them in their modules around its loop instead (py_scripts/patches.py).
  opts <- lapply(make_optimizers(spec, net), patch_optimizer, spec = spec) # one, or two under the loop feature multi_optimizer
  clip_grad_norm <- binding_function(spec, "nn_utils_clip_grad_norm_")
  clip_grad_value <- binding_function(spec, "nn_utils_clip_grad_value_")
  use_scaler <- properties$scaler == "dynamic"
  use_clip <- isTRUE(properties$clip)
  amp_dtype <- torch_dtype(spec$amp_dtype)
  made <- make_grad_scaler(spec, enabled = use_scaler) # R returns a list where Python returns a tuple
  scaler <- patch_scaler(made$scaler, spec) # R-only: the scaler's methods as the run spec patches them
  lifted_check <- made$lifted_check
  scheduler <- patch_scheduler(make_scheduler(spec, opts[[1]]), spec) # R-only: the scheduler's methods as the run spec patches them
  accumulate <- loop_feature(spec, "accumulate")
  every <- if (is.null(accumulate)) 1L else accumulate$every
  clip_value <- loop_feature(spec, "clip_value")
  clip_norm <- loop_feature(spec, "clip_norm")
  multi <- loop_feature(spec, "multi_optimizer")
  penalty <- loop_feature(spec, "penalty")
  custom <- custom_layer(spec, properties) # a layer computed by a custom autograd function, or none
  resume <- loop_feature(spec, "resume")

  # jsonlite gives `[]` as an empty list and `[3, 7]` as an integer vector.
  overflow_steps <- if (use_scaler) as.integer(unlist(spec$overflow_steps)) else integer()
  injected_steps <- integer()
  inject_after_unscale <- identical(spec$overflow_point, "unscale")
  losses <- list()
  scales <- list()
  output_dtype <- NULL
  loss_dtype <- NULL
  seconds_per_epoch <- numeric()
  gc_state <- pause_gc(spec) # R cannot switch its collector off: it returns the GC clock (common.R)
  reset_peak_memory(device)
  sync_device(device)
  epoch_start <- clock()
  step <- 0L
  for (epoch in seq_len(spec$epochs)) {
    for (b in seq_len(spec$num_batches)) {
      i <- step %% spec$num_batches + 1L # the batch follows the step, which a resumed run takes from its checkpoint
      trace_point(step, "batch.data", data[i, , ])
      trace_point(step, "batch.targets", targets[i, , ])
      torch::with_autocast(device_type = device, dtype = amp_dtype, enabled = properties$autocast, {
        output <- forward(net, data[i, , ], step, unused_layer(spec, step), custom)
        loss <- loss_fn(output, targets[i, , ])
        if (!is.null(multi)) { # the second loss: an output penalty, the MSE against zero
          loss1 <- multi$second_loss_weight * loss_fn(output, torch::torch_zeros_like(output))
        }
      })
      trace_point(step, "loss", loss)
      if (is.null(output_dtype)) {
        output_dtype <- dtype_name(output$dtype, spec)
        loss_dtype <- dtype_name(loss$dtype, spec)
      }
      if (!is.null(multi)) { # each scaled loss's backward; the first keeps the graph the second goes through
        scaled <- if (isTRUE(multi$scale_list == 1)) scaler$scale(list(loss, loss1)) else list(scaler$scale(loss), scaler$scale(loss1))
        trace_point(step, "loss.scaled", scaled[[1]])
        trace_point(step, "loss1.scaled", scaled[[2]])
        scaled[[1]]$backward(retain_graph = TRUE)
        scaled[[2]]$backward()
      } else {
        total <- loss
        if (!is.null(penalty)) { # the AMP examples' gradient penalty, added to the loss under autocast
          torch::with_autocast(device_type = device, dtype = amp_dtype, enabled = properties$autocast, {
            total <- loss + penalty$weight * gradient_norm(scaler, loss, net, step)
          })
        }
        scaled_loss <- scaler$scale(if (is.null(accumulate)) total else total / every)
        trace_point(step, "loss.scaled", scaled_loss)
        scaled_loss$backward()
      }
      trace_parameters(step, "grad.backward", net, grads = TRUE)
      steps_now <- (step + 1L) %% every == 0L # under accumulation, only the last micro-batch of each group steps
      inject <- step %in% overflow_steps && (steps_now || !inject_after_unscale)
      if (inject) {
        injected_steps <- c(injected_steps, step)
      }
      if (inject && !inject_after_unscale) {
        inject_overflow(net)
      }
      if (!steps_now) {
        losses[[length(losses) + 1L]] <- loss$detach()
        if (use_scaler) {
          scales[[length(scales) + 1L]] <- scaler$.scale$detach()$clone()
        }
        step <- step + 1L
        next
      }
      if (use_clip || !is.null(clip_value) || !is.null(clip_norm) || (inject && inject_after_unscale)) {
        for (opt in opts) {
          scaler$unscale_(opt)
        }
        trace_parameters(step, "grad.unscaled", net, grads = TRUE)
        if (inject && inject_after_unscale) {
          inject_overflow(net)
        }
      }
      if (use_clip) {
        clip_grad_norm(net$parameters, max_norm = spec$clip_max_norm)
        trace_parameters(step, "grad.clipped", net, grads = TRUE)
      }
      if (!is.null(clip_value)) {
        clip_grad_value(net$parameters, clip_value = clip_value$clip_value)
        trace_parameters(step, "grad.clipped", net, grads = TRUE)
      }
      if (!is.null(clip_norm)) {
        clip_grad_norm(net$parameters, max_norm = clip_norm$max_norm, norm_type = clip_norm_type(clip_norm))
        trace_parameters(step, "grad.clipped", net, grads = TRUE)
      }
      for (k in seq_along(opts)) {
        opt <- opts[[k]]
        use_trace_names(opt) # R-only: the {param} names of this optimizer's parameters
        scaler$step(opt)
        if (use_scaler) { # each optimizer's own: where two are, only one may have found the inf
          trace_point(step, paste0("scaler.found_inf", if (is.null(multi)) "" else sprintf(".opt%d", k - 1L)), found_inf(scaler, opt))
        }
        trace_optimizer_state(step, opt, net, spec)
      }
      trace_parameters(step, "param.stepped", net, grads = FALSE)
      if (!is.null(multi) && step == multi$new_scale_step) {
        scaler$update(multi$new_scale) # R's scaler takes an R number or a tensor
      } else {
        scaler$update()
      }
      if (use_scaler) {
        trace_point(step, "scaler.scale", scaler$.scale)
        trace_point(step, "scaler.growth_tracker", scaler$.growth_tracker)
      }
      for (opt in opts) {
        zero_grad(spec, opt) # set_to_none as the loop feature says (sometimes_used), else the default
      }
      if (!is.null(scheduler)) {
        step_scheduler(step, spec, opts[[1]], scheduler, loss)
      }
      losses[[length(losses) + 1L]] <- loss$detach()
      if (use_scaler) {
        # R's scaler has no get_scale(): the scale is its public field `.scale`, a 0-dim float32
        # tensor created by the first scale() and updated in place by update() (R/autocast.R);
        # a clone keeps this step's value on the device, as Python's _get_scale_async() clone does.
        scales[[length(scales) + 1L]] <- scaler$.scale$detach()$clone()
      }
      if (!is.null(resume) && step + 1L == resume$at_step) {
        # Checkpoint, then build everything afresh and train on from the checkpoint (the other language's where the run
        # spec hands one over: resume_from).
        prefix <- checkpoint_prefix(spec)
        save_checkpoint(spec, prefix, step + 1L, net, opts[[1]], scheduler, scaler) # resume runs one optimizer
        net <- make_model(spec, fixtures)
        freeze_layer(spec, net)
        opts <- lapply(make_optimizers(spec, net), patch_optimizer, spec = spec)
        scheduler <- patch_scheduler(make_scheduler(spec, opts[[1]]), spec)
        made <- make_grad_scaler(spec, enabled = use_scaler)
        scaler <- patch_scaler(made$scaler, spec)
        lifted_check <- made$lifted_check
        step <- load_checkpoint(spec, if (is.null(spec$resume_from)) prefix else spec$resume_from, net, opts[[1]], scheduler, scaler, step) - 1L
      }
      step <- step + 1L
    }
    sync_device(device)
    epoch_end <- clock()
    seconds_per_epoch <- c(seconds_per_epoch, epoch_end - epoch_start)
    epoch_start <- epoch_end
  }
  gc_seconds <- resume_gc(gc_state)

  loss_values <- as.numeric(torch::torch_stack(losses)$float()$cpu())
  loss_scale <- NULL # a disabled scaler has no scale (default mode)
  skipped <- NULL
  skipped_steps <- NULL
  if (use_scaler) {
    loss_scale <- as.numeric(torch::torch_stack(scales)$cpu())
    previous_scale <- c(spec$init_scale, loss_scale[-length(loss_scale)])
    skipped <- loss_scale < previous_scale
    skipped_steps <- sum(skipped)
  }
  save_final_weights(net, spec$weights_out)
  make_record(
    spec, workload_start, script = script, mode = mode, optimizer = spec$optimizer$name, device = device,
    amp_dtype = spec$amp_dtype, losses = loss_values, final_loss = loss_values[[length(loss_values)]],
    loss_scale = loss_scale, skipped = skipped, skipped_steps = skipped_steps, injected_steps = injected_steps,
    output_dtype = output_dtype, loss_dtype = loss_dtype, weights_path = spec$weights_out,
    seconds_total = sum(seconds_per_epoch), seconds_per_epoch = seconds_per_epoch, gc_seconds = gc_seconds,
    peak_memory_bytes = peak_memory_bytes(device), threads = torch::torch_get_num_threads(),
    device_name = device_name(device), lifted_check = lifted_check, switches = applied_switches(spec)
  )
}

if (sys.nframe() == 0L) {
  main_cli(script, run_workload)
}
