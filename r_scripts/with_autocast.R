#' The `with_autocast` workload in R torch: the training loop without a gradient scaler.
#'
#' Twin of `py_scripts/with_autocast.py`: same function, names and order of operations (`docs/contract.md`). Its modes
#' (declared in harness/contract/modes.py, handed over in the run spec's `modes`) choose the precision either by
#' autocast (`default`: off; `autocast`: on) or by the weights' dtype, the AMP guide's other way to train
#' (`lowp_weights`: weights and inputs in the AMP dtype, no autocast, its `--fp16`; `lowp_weights_scaled`: with a static
#' loss scale, its `-s`). The model and the optimizer are the run spec's, and its loop feature's hooks (features.R) change the
#' loop where the feature's kind says (a scheduler, a frozen layer, param groups, a norm clip, a layer computed by a
#' custom autograd function). Sourcing this file defines `script`, `unscale_static()`, `train_step()` and
#' `run_workload()` and runs nothing. Every `trace_point()` names one intermediate for the
#' harness's trace (docs/tracing.md); it costs nothing unless the harness traces this call.
#' Shell: `Rscript r_scripts/with_autocast.R --preset tiny --mode autocast --optimizer adam --device cpu`.

if (!exists("make_record", mode = "function")) {
  # Run by hand or sourced on its own, nothing is loaded yet. R has no `__file__`, and r_file_path() lives in the very
  # file this line must find (_bootstrap.R), so the line repeats that function's expression verbatim (source()'s `ofile`,
  # else Rscript's `--file=`) and sources _bootstrap.R from beside this file into this file's environment. Under the
  # harness's bridge, the shared files are loaded already and this is skipped.
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

#' One iteration: forward and loss, the backward (of the loss times the static scale, then the gradients divided by it,
#' in the mode that scales statically), a feature's clip on the gradients as they are (bfloat16 where the weights are),
#' the step, `zero_grad()` and the scheduler's step.
train_step <- function(loop) {
  step <- loop$step
  net <- loop$net
  loss <- forward_loss(loop, step)$loss
  if (!is.null(loop$static_scale)) {
    scaled_loss <- loss * loop$static_scale
    trace_point(step, "loss.scaled", scaled_loss)
    scaled_loss$backward()
    trace_parameters(step, "grad.backward", net, grads = TRUE)
    unscale_static(net, loop$static_scale)
    trace_parameters(step, "grad.unscaled", net, grads = TRUE)
  } else {
    loss$backward()
    trace_parameters(step, "grad.backward", net, grads = TRUE)
  }
  clip <- hook(loop, "clip")
  if (!is.null(clip)) {
    clip(loop, step)
  }
  for (opt in loop$opts) {
    use_trace_names(opt) # R-only: the {param} names of this optimizer's parameters
    opt$step()
    trace_optimizer_state(step, opt, net, loop$spec)
  }
  trace_parameters(step, "param.stepped", net, grads = FALSE)
  for (opt in loop$opts) {
    hook(loop, "zero_grad")(loop, opt)
  }
  if (!is.null(loop$scheduler)) {
    step_scheduler(step, loop$spec, loop$opts[[1]], loop$scheduler, loss)
  }
  loop$losses[[length(loop$losses) + 1L]] <- loss$detach()
  loop$step <- hook(loop, "after_iteration")(loop, step) + 1L
  invisible(NULL)
}

#' Train the run spec's model for `spec` in `mode` with the spec's optimizer.
#'
#' @param spec the run spec, a list (`docs/contract.md`).
#' @param mode one of the modes the run spec declares.
#' @return the run record, a named list with the run spec's `record_fields`.
run_workload <- function(spec, mode) {
  workload_start <- clock()
  loop <- start_loop(spec, mode, with_scaler = FALSE)
  if (loop$properties$scaler == "static") {
    # A 0-dim float32 tensor, as the scaler keeps its scale: a scaled loss is float32 in both languages.
    loop$static_scale <- torch::torch_full(list(), spec$static_loss_scale, dtype = torch::torch_float32(), device = loop$device)
  }
  run_epochs(loop, train_step)
  finish_loop(loop, workload_start, script)
}

if (sys.nframe() == 0L) {
  main_cli(script, run_workload)
}
