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
#' loss scaled, or both in one `scale()` of a list; one `update()`, once with an explicit new scale), a gradient penalty,
#' a layer computed by a custom autograd function, or a checkpoint and resume: each kind's hooks are features.R's. Each step's scale is kept on the device and
#' copied to R after the loop: reading
#' it inside the loop would be a host sync per step on CUDA that `default` mode does not pay.
#' Every `trace_point()` names one intermediate for the harness's trace (docs/tracing.md); it costs nothing unless the
#' harness traces this call.
#'
#' R torch's scaler takes CUDA tensors only, in one place: `scale()` aborts on any other tensor (R/autocast.R). On CPU
#' `make_grad_scaler()` (scaler.R, shared by every script that scales) lifts that one check, after checking that R
#' torch's method is the one the lift was written for; the record names what was lifted (`lifted_check`).
#' `scaler_lift = FALSE` in the run spec (`--no-scaler-lift`) turns the lift off: R torch's own error then makes the cell
#' unsupported.
#' Shell: `Rscript r_scripts/cuda_amp_grad_scaler.R --preset tiny --mode autocast_scaler --optimizer adam --device cpu`.

if (!exists("make_record", mode = "function")) {
  # Run by hand or sourced on its own, nothing is loaded yet. R has no `__file__`, and r_file_path() lives in the very
  # file this line must find (_bootstrap.R), so the line repeats that function's expression verbatim (source()'s `ofile`,
  # else Rscript's `--file=`) and sources _bootstrap.R from beside this file into this file's environment. Under the
  # harness's bridge, the shared files are loaded already and this is skipped.
  source(file.path(dirname(dynGet("ofile", sub("^--file=", "", grep("^--file=", commandArgs(), value = TRUE)))), "_bootstrap.R"), local = TRUE)
}

script <- "cuda_amp_grad_scaler"

#' This iteration's loss, and with a dynamic scaler its scale, kept on the device until the loop ends.
#'
#' R's scaler has no get_scale(): the scale is its public field `.scale`, a 0-dim float32 tensor created by the first
#' scale() and updated in place by update() (R/autocast.R); a clone keeps this step's value on the device, as Python's
#' _get_scale_async() clone does.
keep_scale <- function(loop) {
  if (loop$use_scaler) {
    loop$scales[[length(loop$scales) + 1L]] <- loop$scaler$.scale$detach()$clone()
  }
  invisible(NULL)
}

#' Before the step: `unscale_()` where anything clips or an inf goes in after it, the mode's norm clip and the feature's
#' clip.
unscale_and_clip <- function(loop, step, inject, after_unscale) {
  clip <- hook(loop, "clip")
  use_clip <- isTRUE(loop$properties$clip)
  if (use_clip || !is.null(clip) || (inject && after_unscale)) {
    for (opt in loop$opts) {
      loop$scaler$unscale_(opt)
    }
    trace_parameters(step, "grad.unscaled", loop$net, grads = TRUE)
    if (inject && after_unscale) {
      inject_overflow(loop$net)
    }
  }
  if (use_clip) {
    loop$clip_grad_norm(loop$net$parameters, max_norm = loop$spec$clip_max_norm)
    trace_parameters(step, "grad.clipped", loop$net, grads = TRUE)
  }
  if (!is.null(clip)) {
    clip(loop, step)
  }
  invisible(NULL)
}

#' Each optimizer's `scaler$step()` (each one's inf check traced: where two are, only one may have found the inf), then
#' the scaler's `update()` as the feature's hook says, its scale and growth tracker traced.
step_and_update <- function(loop, step) {
  scaler <- loop$scaler
  net <- loop$net
  for (k in seq_along(loop$opts)) {
    opt <- loop$opts[[k]]
    use_trace_names(opt) # R-only: the {param} names of this optimizer's parameters
    scaler$step(opt)
    if (loop$use_scaler) {
      suffix <- if (length(loop$opts) > 1L) sprintf(".opt%d", k - 1L) else ""
      trace_point(step, paste0("scaler.found_inf", suffix), found_inf(scaler, opt))
    }
    trace_optimizer_state(step, opt, net, loop$spec)
  }
  trace_parameters(step, "param.stepped", net, grads = FALSE)
  hook(loop, "update")(loop, step)
  if (loop$use_scaler) {
    trace_point(step, "scaler.scale", scaler$.scale)
    trace_point(step, "scaler.growth_tracker", scaler$.growth_tracker)
  }
  invisible(NULL)
}

#' One iteration (a micro-batch under accumulation): forward and loss, the scaled backward as the feature's hook does it,
#' an injected inf where the run spec says, and on an iteration that steps: unscale and clip, the steps, the update,
#' `zero_grad()`, the scheduler's step, and the feature's hook after the iteration (a checkpoint and resume).
train_step <- function(loop) {
  step <- loop$step
  losses <- forward_loss(loop, step)
  hook(loop, "backward")(loop, losses$loss, losses$loss1, step)
  trace_parameters(step, "grad.backward", loop$net, grads = TRUE)
  steps_now <- (step + 1L) %% hook(loop, "micro_batches")(loop) == 0L # under accumulation, the last micro-batch steps
  after_unscale <- identical(loop$spec$overflow_point, "unscale")
  # jsonlite gives `[]` as an empty list and `[3, 7]` as an integer vector.
  inject <- loop$use_scaler && step %in% as.integer(unlist(loop$spec$overflow_steps)) && (steps_now || !after_unscale)
  if (inject) {
    loop$injected_steps <- c(loop$injected_steps, step)
  }
  if (inject && !after_unscale) {
    inject_overflow(loop$net)
  }
  if (!steps_now) {
    loop$losses[[length(loop$losses) + 1L]] <- losses$loss$detach()
    keep_scale(loop)
    loop$step <- step + 1L
    return(invisible(NULL))
  }
  unscale_and_clip(loop, step, inject, after_unscale)
  step_and_update(loop, step)
  for (opt in loop$opts) {
    hook(loop, "zero_grad")(loop, opt) # set_to_none as the loop feature says (sometimes_used), else the default
  }
  if (!is.null(loop$scheduler)) {
    step_scheduler(step, loop$spec, loop$opts[[1]], loop$scheduler, losses$loss)
  }
  loop$losses[[length(loop$losses) + 1L]] <- losses$loss$detach()
  keep_scale(loop)
  loop$step <- hook(loop, "after_iteration")(loop, step) + 1L
  invisible(NULL)
}

#' Train the run spec's model for `spec` in `mode`: under autocast with gradient scaling (and clipping in `*_clip`), or
#' with both disabled (`default`), with the spec's optimizer.
#'
#' @param spec the run spec, a list (`docs/contract.md`).
#' @param mode one of the modes the run spec declares.
#' @return the run record, a named list with the run spec's `record_fields`.
run_workload <- function(spec, mode) {
  workload_start <- clock()
  loop <- start_loop(spec, mode, with_scaler = TRUE)
  run_epochs(loop, train_step)
  finish_loop(loop, workload_start, script)
}

if (sys.nframe() == 0L) {
  main_cli(script, run_workload)
}
