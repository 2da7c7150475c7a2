#' A checkpoint in the contract's layout (docs/contract.md#checkpoint), written and read by each object's own
#' `state_dict()`: the `resume` loop feature's. The twin of `py_scripts/checkpoint.py`.

#' The checkpoint layout both languages write and read (docs/contract.md#checkpoint): a reader refuses any other.
checkpoint_layout <- "amp-parity-checkpoint/1"

#' Where a `resume` loop feature writes its checkpoint (`<prefix>.safetensors` and `<prefix>.json`): beside the final
#' weights, so the other language's run of the cell can load it (`resume_from`); a fresh temporary name in a call that
#' writes no weights (a timed round), removed once read back.
checkpoint_prefix <- function(spec) {
  if (!is.null(spec$weights_out)) {
    return(paste0(sub("\\.safetensors$", "", spec$weights_out), ".checkpoint"))
  }
  tempfile("amp-parity-checkpoint-")
}

#' The parameters' names in the order the optimizer numbers them in its `state_dict()` (group by group, 1-based).
optimizer_order <- function(opt, net) {
  unlist(get("groups", envir = trace_state), use.names = FALSE)
}

#' The training state after `step` iterations in the contract's layout (docs/contract.md#checkpoint), from each object's
#' own `state_dict()`: the parameters, the optimizer row's state entries (R torch numbers them 1-based, as strings, in
#' `opt$state_dict()$state`; the layout names them), each group's lr, the scheduler's last epoch, step count and last lr
#' (R torch's fields `.step_count` and `.last_lr`), and the scaler's scale and growth tracker.
#'
#' R torch's scaler has no `state_dict()` (R/autocast.R: its methods are `scale`, `unscale_`, `step`, `update`): an
#' enabled one cannot be saved, and the cell is refused in those words rather than resumed from its initial scale.
save_checkpoint <- function(spec, prefix, step, net, opt, scheduler, scaler) {
  if (isTRUE(scaler$.enabled)) {
    tryCatch(scaler$state_dict(), error = function(err) {
      abort_cli(c(
        "R torch {packageVersion('torch')}'s {.fn cuda_amp_grad_scaler} cannot be checkpointed: {.code scaler$state_dict()} fails with {.val {conditionMessage(err)}}.",
        i = "It has no {.fn state_dict} method (its methods: {.fn {sort(setdiff(ls(scaler), 'clone'))}}), so its scale and growth tracker cannot be saved, and a resumed run would restart them from {.arg init_scale}."
      ), class = "amp_parity_refused")
    })
    # Never resumed without the scale: a scaler that gained state_dict() needs its mapping into the layout written here.
    abort_cli("R torch's {.fn cuda_amp_grad_scaler} now has {.fn state_dict}: carry its scale and growth tracker in {.fn save_checkpoint} and {.fn load_checkpoint} (r_scripts/checkpoint.R).")
  }
  params <- named_parameters(net)
  tensors <- lapply(params, function(param) param$detach()$contiguous())
  names(tensors) <- paste0("model.", names(params))
  counts <- list()
  state <- opt$state_dict()
  order <- optimizer_order(opt, net)
  entries <- spec$optimizer$state
  for (index in names(state$state)) {
    for (e in seq_len(NROW(entries))) {
      value <- state$state[[index]][[entries$r[[e]]]]
      key <- sprintf("%s.%s", entries$name[[e]], order[[as.integer(index)]])
      if (!is.null(value) && isTRUE(entries$count[[e]])) {
        counts[[key]] <- as.numeric(value) # an R double (R code) or a one-element int64 tensor (ignite)
      } else if (!is.null(value)) {
        # R torch's optim_asgd keeps eta and mu as R doubles (PyTorch as one-element tensors): saved exactly, as float64
        if (is.numeric(value)) value <- torch::torch_tensor(value, dtype = torch::torch_float64())
        tensors[[paste0("optim.", key)]] <- value$detach()$contiguous()
      }
    }
  }
  scheduled <- if (is.null(scheduler)) NULL else scheduler$state_dict()
  meta <- list(
    layout = checkpoint_layout, step = as.integer(step), lr = I(vapply(state$param_groups, function(g) g$lr, 0)),
    count_names = I(as.character(names(counts))), count_values = I(as.integer(unlist(counts))),
    last_epoch = scheduled$last_epoch, scheduler_step_count = scheduled$.step_count,
    last_lr = if (is.null(scheduled)) NULL else I(as.numeric(scheduled$.last_lr)),
    scale = NULL, growth_tracker = NULL # an enabled scaler was refused above; a disabled one has no state
  )
  safetensors::safe_save_file(lapply(tensors, function(t) t$cpu()), paste0(prefix, ".safetensors"))
  writeLines(record_to_json(meta), paste0(prefix, ".json")) # 17 significant digits: the lr reads back as the same double
  invisible(NULL)
}

#' Read a checkpoint in the contract's layout (either language's) into freshly built objects through their own
#' `load_state_dict()`, and return the iterations it was taken after. What was read back is traced at step `at`
#' (`resume.*` points), so a first difference names the state that came back wrong.
load_checkpoint <- function(spec, prefix, net, opt, scheduler, scaler, at) {
  meta <- jsonlite::fromJSON(paste0(prefix, ".json"), simplifyVector = TRUE)
  if (!identical(meta$layout, checkpoint_layout)) {
    abort_cli("{.path {prefix}.json} is not a checkpoint in layout {.val {checkpoint_layout}}: write it with this harness's scripts.")
  }
  tensors <- safetensors::safe_load_file(paste0(prefix, ".safetensors"), framework = "torch")
  params <- named_parameters(net)
  torch::with_no_grad({
    for (name in names(params)) params[[name]]$copy_(tensors[[paste0("model.", name)]])
  })
  ignite <- identical(spec$optimizer$family, "ignite")
  entries <- spec$optimizer$state
  state <- opt$state_dict() # the fresh optimizer's own groups: the checkpoint sets their lr and the state
  order <- optimizer_order(opt, net)
  for (index in seq_along(order)) {
    loaded <- list()
    for (e in seq_len(NROW(entries))) {
      key <- sprintf("%s.%s", entries$name[[e]], order[[index]])
      count <- match(key, meta$count_names)
      if (isTRUE(entries$count[[e]]) && !is.na(count)) {
        # R code keeps a step count as an R double (optim_adamw as a 0-d float32 tensor: the row's `r_tensor`),
        # libtorch's C++ (ignite) as a one-element int64 tensor
        value <- meta$count_values[[count]]
        loaded[[entries$r[[e]]]] <- if (ignite) {
          torch::torch_tensor(value, dtype = torch::torch_int64())
        } else if (isTRUE(entries$r_tensor[[e]])) {
          torch::torch_scalar_tensor(as.numeric(value), device = spec$device) # a double, as R torch starts it: float32
        } else {
          as.numeric(value)
        }
      } else if (!is.null(tensors[[paste0("optim.", key)]])) {
        value <- tensors[[paste0("optim.", key)]]$to(device = spec$device)
        # an entry compared in a declared dtype (asgd's eta and mu) is an R double in R code: back to one
        dtype <- entries$dtype[[e]]
        number <- !ignite && length(dtype) == 1L && !is.na(dtype) && nzchar(dtype)
        loaded[[entries$r[[e]]]] <- if (number) as.numeric(value$item()) else value
      }
    }
    if (length(loaded) > 0L && ignite) {
      # R-only: R torch's ignite load_state_dict() hands each parameter's states to C++ by position, in the order of its
      # private `.state_names`; a state the layout does not carry (Adam's max_exp_avg_sq without amsgrad) is the empty
      # tensor its own state_dict() reports.
      names_in_order <- opt$.__enclos_env__$private$.state_names
      loaded <- lapply(stats::setNames(names_in_order, names_in_order), function(n) if (is.null(loaded[[n]])) torch::torch_empty(0L) else loaded[[n]])
    }
    if (length(loaded) > 0L) state$state[[as.character(index)]] <- loaded
  }
  for (g in seq_along(state$param_groups)) {
    state$param_groups[[g]]$lr <- meta$lr[[g]]
  }
  opt$load_state_dict(state)
  if (!is.null(scheduler)) { # its own state_dict() with the checkpoint's values: the row's hyperparameters stay the run spec's
    scheduled <- scheduler$state_dict()
    scheduled$last_epoch <- as.numeric(meta$last_epoch) # R torch counts it in an R double
    scheduled$.step_count <- as.integer(meta$scheduler_step_count)
    scheduled$.last_lr <- as.numeric(meta$last_lr)
    scheduler$load_state_dict(scheduled)
  }
  if (is.null(spec$weights_out)) {
    unlink(paste0(prefix, c(".safetensors", ".json")))
  }
  trace_point(at, "resume.step", number_point(meta$step, "int64"))
  trace_parameters(at, "resume.param", net, grads = FALSE)
  trace_optimizer_state(at, opt, net, spec, stage = "resume.optim")
  if (!is.null(scheduler)) {
    trace_scheduler(at, spec, opt, scheduler, prefix = "resume.")
  }
  as.integer(meta$step)
}
