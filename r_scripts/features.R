#' The loop features' hooks: for each kind of harness/workload/features.py, what it does at the training loop's points,
#' in one place. The twin of `py_scripts/features.py`; the float64 reference of each kind is
#' `harness/judge/loop_kinds.py`.
#'
#' The training loop (loop.R and the scripts' `train_step()`) asks `hook()` for the function at each of its points
#' (`plain_loop` names them, with what the plain loop does there), and gets the run spec's feature's where its kind has
#' one (`feature_hooks`). A new kind is a set of hooks here and in Python, and its reference
#' (tests/unit/scripts/test_feature_hooks.py fails while one is missing); a new row of a known kind needs none. The loop's
#' state is an environment (`loop`, start_loop() in loop.R), which a hook reads and changes.

#' The arguments of the run spec's loop feature (`feature`: its row of harness/workload/features.py) when it is of
#' `kind`, else `NULL` (the plain loop, or another feature).
loop_feature <- function(spec, kind) {
  feature <- spec$feature
  if (!is.null(feature) && identical(feature$kind, kind)) feature$args else NULL
}

#' The function at the loop's `point`: the run spec's feature kind's (`feature_hooks`), else the plain loop's
#' (`plain_loop`; `NULL` where the plain loop does nothing there).
hook <- function(loop, point) {
  feature <- loop$spec$feature
  found <- if (is.null(feature)) NULL else feature_hooks[[feature$kind]][[point]]
  if (is.null(found)) plain_loop[[point]] else found
}

#' The plain loop's optimizers: the run spec's one over every parameter.
one_optimizer <- function(loop) {
  list(make_optimizer(loop$spec, loop$net))
}

#' The plain loop's backward: the loss scaled by the scaler (its calls pass through where it is disabled), traced, and
#' its backward.
scaled_backward <- function(loop, loss, loss1, step) {
  scaled_loss <- loop$scaler$scale(loss)
  trace_point(step, "loss.scaled", scaled_loss)
  scaled_loss$backward()
  invisible(NULL)
}

# scheduler (and resume, whose row may checkpoint one): built once per optimizer, stepped after every update

#' The run spec's learning-rate scheduler (a `scheduler` feature, or a `resume` one that checkpoints a scheduler: the R
#' torch function the row names, called with the optimizer and the row's arguments), or `NULL`. Python's twin builds
#' `torch.optim.lr_scheduler.<class>` alike.
make_scheduler <- function(spec, opt) {
  if (is.null(spec$feature) || !nzchar(spec$feature$r[["function"]])) {
    return(NULL)
  }
  r <- spec$feature$r
  args <- r$args
  if (!is.null(spec$feature$lr_lambda)) { # the row's declared factor, not code
    args$lr_lambda <- epoch_factor(spec$feature$lr_lambda)
  }
  do.call(binding_function(spec, r[["function"]]), c(list(opt), args)) # R-only: binding_function(), as the run spec patches it
}

#' A row's declared `lr_lambda` (harness/workload/features.py, `LR_LAMBDA_ARGS`): a linear warmup then an inverse-time
#' decay, in the order of operations Python's twin uses.
epoch_factor <- function(declared) {
  warmup <- declared$warmup
  decay <- declared$decay
  function(epoch) min(1, (epoch + 1) / warmup) / (1 + decay * epoch)
}

#' The scheduler's step after the iteration's `update()` (skipped iterations included), fed the iteration's loss where
#' the row says (`lr_reduce_on_plateau`'s `step(metrics)`), then its trace.
step_scheduler <- function(step, spec, opt, scheduler, loss) {
  if (isTRUE(spec$feature$on_loss)) {
    scheduler$step(loss$detach())
  } else {
    scheduler$step()
  }
  trace_scheduler(step, spec, opt, scheduler)
}

#' The run spec's optimizer with the `param_groups` row's two groups where the row asks for them (a `param_groups` row,
#' or a scheduler's that reads per-group values: `groups`), else one group.
grouped_optimizers <- function(loop) {
  list(make_optimizer(loop$spec, loop$net, groups = loop$spec$feature$param_groups))
}

#' The row's scheduler over the first optimizer.
the_scheduler <- function(loop) {
  make_scheduler(loop$spec, loop$opts[[1]])
}

# accumulate: every micro-batches per optimizer step, each loss divided by every

#' Micro-batches per optimizer step: the row's `every`.
micro_batches <- function(loop) {
  as.integer(loop$spec$feature$args$every)
}

#' The plain backward of the loss divided by `every`.
accumulated_backward <- function(loop, loss, loss1, step) {
  scaled_backward(loop, loss / loop$spec$feature$args$every, loss1, step)
}

# clip_value, clip_norm: after unscale_() (the scaler script) or on the gradients as they are (with_autocast)

#' `nn_utils_clip_grad_value_()` (as the run spec patches it: `loop$clip_grad_value`) with the row's `clip_value`, traced.
clip_by_value <- function(loop, step) {
  loop$clip_grad_value(loop$net$parameters, clip_value = loop$spec$feature$args$clip_value)
  trace_parameters(step, "grad.clipped", loop$net, grads = TRUE)
}

#' A `clip_norm` row's `norm_type` for `nn_utils_clip_grad_norm_()`: `Inf` where `inf_norm` is 1 (the run spec's JSON
#' has no infinity, so the row carries a flag), else 2.
clip_norm_type <- function(clip_norm) {
  if (clip_norm$inf_norm == 1) Inf else 2
}

#' `nn_utils_clip_grad_norm_()` (as the run spec patches it: `loop$clip_grad_norm`) with the row's `max_norm` and norm
#' type, traced.
clip_by_norm <- function(loop, step) {
  clip_norm <- loop$spec$feature$args
  loop$clip_grad_norm(loop$net$parameters, max_norm = clip_norm$max_norm, norm_type = clip_norm_type(clip_norm))
  trace_parameters(step, "grad.clipped", loop$net, grads = TRUE)
}

# frozen: one layer's parameters without requires_grad, still handed to the optimizer

#' The row's layer (0-based, as Python's twin counts) gets `requires_grad` false (its parameters are still handed to the
#' optimizer, which then sees them without a gradient at every step).
freeze_layer <- function(loop) {
  for (param in layer_parameters(loop$net, loop$spec$feature$args$layer)) {
    param$requires_grad_(FALSE)
  }
  invisible(NULL)
}

# sometimes_used: a layer left out of some steps' forward; zero_grad()'s set_to_none as the row says

#' The layer left out of the forward at `step` (0-based), or -1 (every layer used): the row's layer, on the steps that
#' are not a multiple of its `every`; as `list(unused, custom)`.
forward_unused <- function(loop, step) {
  used <- loop$spec$feature$args
  list(unused = if (step %% used$every != 0L) as.integer(used$layer) else -1L, custom = NULL)
}

#' `opt$zero_grad()` as the loop feature says: a `sometimes_used` row's `set_to_none` (1 TRUE, 0 FALSE, -1 no
#' argument: the binding's default, FALSE for R torch's R-code optimizers; its ignite optimizers' `zero_grad()` takes no
#' argument); otherwise with no argument, as the plain loop always did.
zero_grad <- function(loop, opt) {
  used <- loop_feature(loop$spec, "sometimes_used")
  if (is.null(used) || used$set_to_none < 0) {
    opt$zero_grad()
  } else {
    opt$zero_grad(set_to_none = as.logical(used$set_to_none))
  }
}

#' The plain loop's `zero_grad()`, with no argument.
plain_zero_grad <- function(loop, opt) {
  opt$zero_grad()
}

# multi_optimizer: two losses, two optimizers split by layer, one scaler; one update with an explicit new scale

#' Two of the row's optimizer: the first over the model's layers before the last `head_layers`, the second over those.
two_optimizers <- function(loop) {
  layers <- loop$spec$model$layers
  split <- layers - loop$spec$feature$args$head_layers
  list(make_optimizer(loop$spec, loop$net, seq_len(split) - 1L), make_optimizer(loop$spec, loop$net, seq(split, layers - 1L)))
}

#' The second loss, under autocast as the first: an output penalty, the MSE against zero, times its weight.
second_loss <- function(loop, output) {
  loop$spec$feature$args$second_loss_weight * loop$loss_fn(output, torch::torch_zeros_like(output))
}

#' Each scaled loss's backward (each scaled, or both in one `scale()` of a list); the first keeps the graph the second
#' goes through.
two_backward <- function(loop, loss, loss1, step) {
  scaler <- loop$scaler
  scaled <- if (isTRUE(loop$spec$feature$args$scale_list == 1)) scaler$scale(list(loss, loss1)) else list(scaler$scale(loss), scaler$scale(loss1))
  trace_point(step, "loss.scaled", scaled[[1]])
  trace_point(step, "loss1.scaled", scaled[[2]])
  scaled[[1]]$backward(retain_graph = TRUE)
  scaled[[2]]$backward()
  invisible(NULL)
}

#' The scaler's `update()`; at the row's `new_scale_step`, with its `new_scale`.
explicit_update <- function(loop, step) {
  multi <- loop$spec$feature$args
  if (step == multi$new_scale_step) {
    loop$scaler$update(multi$new_scale) # R's scaler takes an R number or a tensor
  } else {
    loop$scaler$update()
  }
}

#' The plain loop's `update()`.
plain_update <- function(loop, step) {
  loop$scaler$update()
}

# penalty: the AMP examples' gradient penalty

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

#' The plain backward of the loss plus the row's `weight` times the gradient norm, added under autocast.
penalized_backward <- function(loop, loss, loss1, step) {
  torch::with_autocast(device_type = loop$device, dtype = loop$amp_dtype, enabled = loop$properties$autocast, {
    total <- loss + loop$spec$feature$args$weight * gradient_norm(loop$scaler, loss, loop$net, step)
  })
  scaled_backward(loop, total, loss1, step)
}

# custom_function: one layer computed by a custom autograd function made AMP aware

#' A Linear layer's forward and backward as a custom autograd function (`torch_addmm()`; the gradients by hand), made AMP
#' aware as PyTorch's AMP examples' last section says of `custom_fwd`/`custom_bwd`.
#'
#' R torch has neither decorator, nor a public getter of the autocast state: the forward saves the state it runs in
#' (`state`: the device type, the AMP dtype and whether autocast is on, which the caller knows) and the backward runs
#' its ops under `with_autocast()` with it, what `custom_bwd` does (torch/amp/autocast_mode.py).
#' Built when a loop uses it (`forward_custom()`), not when this file is sourced: `autograd_function()` loads
#' libtorch, which a script must not do before `require_r_torch()` can say in one line that it cannot.
amp_linear <- function() {
  torch::autograd_function(
    forward = function(ctx, x, weight, bias, state) {
      ctx$save_for_backward(x = x, weight = weight, state = state)
      torch::torch_addmm(bias, x, weight$t())
    },
    backward = function(ctx, grad) {
      saved <- ctx$saved_variables
      state <- saved$state
      torch::with_autocast(device_type = state$device, dtype = state$dtype, enabled = state$enabled, {
        list(x = grad$mm(saved$weight), weight = grad$t()$mm(saved$x), bias = grad$sum(1L))
      })
    }
  )
}

#' The row's layer and the function that computes it (`amp_linear()`), for the model's forward, as
#' `list(unused, custom)`; the function is made once per loop (R-only: it saves the mode's autocast state, where
#' Python's `custom_fwd` reads it).
forward_custom <- function(loop, step) {
  if (is.null(loop$custom)) {
    state <- list(device = loop$device, dtype = loop$amp_dtype, enabled = isTRUE(loop$properties$autocast))
    fn <- amp_linear()
    loop$custom <- list(layer = as.integer(loop$spec$feature$args$layer), fn = function(x, linear) fn(x, linear$weight, linear$bias, state))
  }
  list(unused = -1L, custom = loop$custom)
}

# resume: checkpoint, build everything afresh, load the checkpoint, train on

#' After the row's `at_step` iterations: checkpoint, then build everything afresh and train on from the checkpoint (the
#' other language's where the run spec hands one over: `resume_from`). Returns the step to go on from.
resume_from_checkpoint <- function(loop, step) {
  if (step + 1L != loop$spec$feature$args$at_step) {
    return(step)
  }
  prefix <- checkpoint_prefix(loop$spec)
  save_checkpoint(loop$spec, prefix, step + 1L, loop$net, loop$opts[[1]], loop$scheduler, loop$scaler) # resume runs one optimizer
  build_loop(loop)
  from <- if (is.null(loop$spec$resume_from)) prefix else loop$spec$resume_from
  load_checkpoint(loop$spec, from, loop$net, loop$opts[[1]], loop$scheduler, loop$scaler, step) - 1L
}

#' The plain loop goes on from the step it is at.
go_on <- function(loop, step) {
  step
}

#' The plain loop does nothing here.
nothing <- function(loop) {
  invisible(NULL)
}

#' The training loop's points and what the plain loop does at each (PLAIN_LOOP in features.py says what each point is);
#' `second_loss` and `clip` are `NULL`: the plain loop does nothing there.
plain_loop <- list(
  prepare = nothing, optimizers = one_optimizer, scheduler = function(loop) NULL,
  forward = function(loop, step) list(unused = -1L, custom = NULL), second_loss = NULL, backward = scaled_backward,
  micro_batches = function(loop) 1L, clip = NULL, update = plain_update, zero_grad = plain_zero_grad, after_iteration = go_on
)

#' Each kind's hooks, by the point it acts at (`plain_loop`): every kind of harness/workload/features.py's `KINDS`, as in
#' Python's `FEATURE_HOOKS` and the reference's `REFERENCE_HOOKS`.
feature_hooks <- list(
  scheduler = list(optimizers = grouped_optimizers, scheduler = the_scheduler),
  accumulate = list(micro_batches = micro_batches, backward = accumulated_backward),
  clip_value = list(clip = clip_by_value),
  clip_norm = list(clip = clip_by_norm),
  frozen = list(prepare = freeze_layer),
  param_groups = list(optimizers = grouped_optimizers),
  sometimes_used = list(forward = forward_unused, zero_grad = zero_grad),
  multi_optimizer = list(optimizers = two_optimizers, second_loss = second_loss, backward = two_backward, update = explicit_update),
  penalty = list(backward = penalized_backward),
  custom_function = list(forward = forward_custom),
  resume = list(scheduler = the_scheduler, after_iteration = resume_from_checkpoint)
)
