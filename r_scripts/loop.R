#' The training loop's frame both scripts share: its state, what it builds, the timed epochs, a step's forward and loss,
#' and the record it ends with. The twin of `py_scripts/loop.py`.
#'
#' A script's `run_workload()` starts a loop (`start_loop()`), runs its epochs with its own `train_step()`
#' (`run_epochs()`) and returns `finish_loop()`'s record. What a loop feature changes is asked of its hooks (`hook()`,
#' features.R) at each point; what a mode changes is read from its properties. The loop's state is an environment
#' (Python's twin keeps it in a dataclass), which `train_step()` and the hooks read and change.

#' The loop of `mode`: its properties, the fixtures, the dtypes, the clip functions as the run spec patches them, and
#' everything `build_loop()` builds; `with_scaler`: the script scales with a `cuda_amp_grad_scaler()` (enabled only where
#' the mode's scaler is `dynamic`).
start_loop <- function(spec, mode, with_scaler) {
  loop <- new.env(parent = emptyenv())
  loop$spec <- spec
  loop$mode <- mode
  loop$properties <- mode_properties(spec, mode)
  require_r_torch()
  torch::torch_set_num_threads(spec$threads)
  # Python's set_determinism() turns on PyTorch's deterministic algorithms on CUDA; R torch 0.17.0.9000 exports no such
  # function (nothing named *determin*), so R's CUDA backward kernels run as libtorch picks them.
  loop$device <- spec$device
  loop$fixtures <- load_fixtures(spec)
  loop$amp_dtype <- torch_dtype(spec$amp_dtype)
  loop$weights_dtype <- if (loop$properties$weights == "amp") loop$amp_dtype else torch::torch_float32()
  loop$loss_fn <- torch::nn_mse_loss()
  loop$use_scaler <- loop$properties$scaler == "dynamic"
  loop$with_scaler <- with_scaler
  # R-only: the binding's clip functions as the run spec patches them; Python swaps them in their modules around its
  # loop instead (py_scripts/patches.py)
  loop$clip_grad_norm <- binding_function(spec, "nn_utils_clip_grad_norm_")
  loop$clip_grad_value <- binding_function(spec, "nn_utils_clip_grad_value_")
  loop$lifted_check <- NULL
  loop$static_scale <- NULL
  loop$step <- 0L
  loop$losses <- list()
  loop$scales <- list()
  loop$injected_steps <- integer()
  loop$seconds_per_epoch <- numeric()
  build_loop(loop)
  loop
}

#' The model in the mode's weights dtype, then what the feature's hooks build on it (a frozen layer, the optimizers, a
#' scheduler), and the scaler (`enabled = FALSE` outside the dynamic modes: its calls pass through). The optimizers', the
#' scheduler's and the scaler's methods as the run spec patches them (reconciliation switches; trace points when traced):
#' Python swaps the functions in their modules around its loop instead (py_scripts/patches.py).
build_loop <- function(loop) {
  spec <- loop$spec
  loop$net <- make_model(spec, loop$fixtures)
  loop$net$to(dtype = loop$weights_dtype) # in place (R/nn.R); Python's `.to()` returns the module too
  hook(loop, "prepare")(loop)
  loop$opts <- lapply(hook(loop, "optimizers")(loop), patch_optimizer, spec = spec)
  loop$scheduler <- patch_scheduler(hook(loop, "scheduler")(loop), spec)
  if (loop$with_scaler) {
    made <- make_grad_scaler(spec, enabled = loop$use_scaler) # R returns a list where Python returns a tuple
    loop$scaler <- patch_scaler(made$scaler, spec)
    loop$lifted_check <- made$lifted_check
  }
  invisible(NULL)
}

#' The timed loop: `train_step()` once per batch of every epoch, each epoch's seconds, and the seconds R spent
#' collecting (R cannot switch its collector off: `pause_gc()` returns the GC clock).
run_epochs <- function(loop, train_step) {
  spec <- loop$spec
  gc_state <- pause_gc(spec)
  reset_peak_memory(loop$device)
  sync_device(loop$device)
  restore <- patch_namespace(spec) # R torch's functions its modules call, as the run spec patches them (Python: binding_patches)
  on.exit(restore(), add = TRUE)
  restore_modules <- patch_modules(loop$net, spec) # and the bindings its modules inherit
  on.exit(restore_modules(), add = TRUE)
  epoch_start <- clock()
  for (epoch in seq_len(spec$epochs)) {
    for (b in seq_len(spec$num_batches)) {
      train_step(loop)
    }
    sync_device(loop$device)
    epoch_end <- clock()
    loop$seconds_per_epoch <- c(loop$seconds_per_epoch, epoch_end - epoch_start)
    epoch_start <- epoch_end
  }
  restore_modules()
  restore()
  loop$gc_seconds <- resume_gc(gc_state)
  invisible(NULL)
}

#' The step's batch (it follows the step, which a resumed run takes from its checkpoint) in the weights' dtype, the
#' model's forward and the loss under the mode's autocast (and a feature's second loss beside it), traced; as
#' `list(loss, loss1)`.
forward_loss <- function(loop, step) {
  i <- step %% loop$spec$num_batches + 1L
  # A copy of its own ($clone()): a GEMM's result depends on where its input lies (MKL's small-matrix kernels round
  # otherwise at an address not 16-byte aligned), and the two bindings' safetensors loaders place the file's tensors
  # differently; a fresh tensor lies where libtorch's allocator puts it (64-byte aligned) in both.
  inputs <- loop$fixtures$data[i, , ]$to(dtype = loop$weights_dtype)$clone()
  target <- loop$fixtures$targets[i, , ]$to(dtype = loop$weights_dtype)$clone()
  trace_point(step, "batch.data", inputs)
  trace_point(step, "batch.targets", target)
  options <- hook(loop, "forward")(loop, step)
  second <- hook(loop, "second_loss")
  loss1 <- NULL
  torch::with_autocast(device_type = loop$device, dtype = loop$amp_dtype, enabled = loop$properties$autocast, {
    output <- forward(loop$net, inputs, step, options$unused, options$custom)
    loss <- model_loss(output, target, loop$loss_fn)
    if (!is.null(second)) {
      loss1 <- second(loop, output)
    }
  })
  trace_point(step, "loss", loss)
  if (is.null(loop$output_dtype)) {
    loop$output_dtype <- dtype_name(output$dtype, loop$spec)
    loop$loss_dtype <- dtype_name(loss$dtype, loop$spec)
  }
  list(loss = loss, loss1 = loss1)
}

#' The run record: the losses, and with a dynamic scaler the scale after every iteration and the steps it skipped (an
#' update that lowered the scale: the backoff rule fired because the gradients held inf/NaN); the final weights written
#' where the run spec says.
finish_loop <- function(loop, workload_start, script) {
  spec <- loop$spec
  device <- loop$device
  loss_values <- as.numeric(torch::torch_stack(loop$losses)$float()$cpu())
  loss_scale <- NULL # a disabled scaler has no scale (default mode)
  skipped <- NULL
  skipped_steps <- NULL
  if (loop$use_scaler) {
    loss_scale <- as.numeric(torch::torch_stack(loop$scales)$cpu())
    previous_scale <- c(spec$init_scale, loss_scale[-length(loss_scale)])
    skipped <- loss_scale < previous_scale
    skipped_steps <- sum(skipped)
  }
  save_final_weights(loop$net, spec$weights_out)
  make_record(
    spec, workload_start, script = script, mode = loop$mode, optimizer = spec$optimizer$name, device = device,
    amp_dtype = spec$amp_dtype, losses = loss_values, final_loss = loss_values[[length(loss_values)]],
    loss_scale = loss_scale, skipped = skipped, skipped_steps = skipped_steps, injected_steps = loop$injected_steps,
    output_dtype = loop$output_dtype, loss_dtype = loop$loss_dtype, weights_path = spec$weights_out,
    seconds_total = sum(loop$seconds_per_epoch), seconds_per_epoch = loop$seconds_per_epoch, gc_seconds = loop$gc_seconds,
    peak_memory_bytes = peak_memory_bytes(device), threads = torch::torch_get_num_threads(),
    device_name = device_name(device), lifted_check = loop$lifted_check, switches = applied_switches(spec)
  )
}
