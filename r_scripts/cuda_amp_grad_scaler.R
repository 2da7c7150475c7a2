#' The `cuda_amp_grad_scaler` workload in R torch: `with_autocast()` + `cuda_amp_grad_scaler()`.
#'
#' Twin of `py_scripts/cuda_amp_grad_scaler.py` (`docs/contract.md`). Mode `autocast_scaler_clip`
#' unscales the gradients and clips their norm before `step()`. The scale is recorded after every
#' `update()`; a step is *skipped* when that update lowered the scale (the backoff rule fired because
#' the gradients held inf/NaN). `overflow_steps` (0-based) puts an inf into one gradient at those
#' steps: after `backward()` (`overflow_point` `backward`, as a real fp16 overflow) or after an explicit
#' `unscale_()` (`unscale`), where only a scaler that checks the gradients again in `step()` can see it.
#' Each step's scale is kept on the device and copied to R after the loop: reading it inside the
#' loop would be a host sync per step on CUDA that `default` mode does not pay.
#' Every `trace_point()` names one intermediate for the harness's trace (docs/tracing.md); it costs
#' nothing unless the harness traces this call.
#'
#' R torch's scaler takes CUDA tensors only, in one place: `scale()` aborts on any other tensor
#' (R/autocast.R). Everything else it calls has CPU kernels in libtorch, so on CPU `make_grad_scaler()`
#' below lifts that one check, after checking that R torch's method is the one this lift was written
#' for; the record names what was lifted (`lifted_check`). `scaler_lift = FALSE` in the run spec
#' (`--no-scaler-lift`) turns the lift off: R torch's own error then makes the cell unsupported.
#' Shell: `Rscript r_scripts/cuda_amp_grad_scaler.R --preset tiny --mode autocast_scaler --device cpu`.

if (!exists("make_record", mode = "function")) {
  # Run by hand or sourced on its own, nothing is loaded yet. R has no `__file__`, and r_file_path() lives in the very
  # file this line must find (_bootstrap.R), so the line repeats that function's expression verbatim (source()'s `ofile`,
  # else Rscript's `--file=`) and sources _bootstrap.R from beside this file into this file's environment. Under the
  # harness's bridge, common.R is loaded already and this is skipped.
  source(file.path(dirname(dynGet("ofile", sub("^--file=", "", grep("^--file=", commandArgs(), value = TRUE)))), "_bootstrap.R"), local = TRUE)
}

modes <- c("autocast_scaler", "autocast_scaler_clip")

#' The spec's gradient scaler, and which check of the binding was lifted to get it (`NULL`: none).
#'
#' Unlike `torch.amp.GradScaler(device)`, R's `cuda_amp_grad_scaler()` has no device argument and its
#' `scale()` refuses any tensor that is not on CUDA. On CUDA, and where R torch's scaler takes a CPU
#' tensor itself, it is used as is. On CPU with `spec$scaler_lift`, `lift_cuda_only_check()` removes
#' that one check from this scaler (nothing else, and only after checking R torch's method).
make_grad_scaler <- function(spec) {
  scaler <- torch::cuda_amp_grad_scaler(
    init_scale = spec$init_scale, growth_factor = spec$growth_factor,
    backoff_factor = spec$backoff_factor, growth_interval = spec$growth_interval
  )
  if (spec$device == "cuda" || !isTRUE(spec$scaler_lift) || scaler_takes_cpu_tensors()) {
    return(list(scaler = scaler, lifted_check = NULL))
  }
  list(scaler = lift_cuda_only_check(scaler), lifted_check = lifted_check_name())
}

#' R-only: the statement of R torch's `amp_GradScaler$scale()` that refuses CPU tensors (R/autocast.R
#' at mlverse/torch e4de110, lines 174-175), as `deparse()` prints it. Python's scaler has none.
cuda_only_check <- paste0(
  "if (!outputs$is_cuda) cli_abort(\"{.var outputs} device must be {.val cuda}, ",
  "got {.val {outputs$device$type}}.\")"
)

#' R-only: R torch's `amp_GradScaler$scale()` as the lift expects it, as `deparse()` prints it (R/autocast.R
#' at mlverse/torch e4de110, lines 169-186). The lift removes `cuda_only_check` and nothing else, so it
#' refuses to touch a method that is not exactly this one.
expected_scale_method <- c(
  "function (outputs) ",
  "{",
  "    if (!self$.enabled) ",
  "        return(outputs)",
  "    if (inherits(outputs, \"torch_tensor\")) {",
  "        if (!outputs$is_cuda) ",
  "            cli_abort(\"{.var outputs} device must be {.val cuda}, got {.val {outputs$device$type}}.\")",
  "        if (is.null(self$.scale)) {",
  "            self$.lazy_init_scale_growth_tracker(outputs$device)",
  "        }",
  "        return(outputs * self$.scale$to(device = outputs$device, ",
  "            non_blocking = TRUE))",
  "    }",
  "    if (is.list(outputs)) ",
  "        lapply(outputs, self$.scale)",
  "    else cli_abort(\"{.var outputs} must be a tensor or a list of tensors, got {.cls {class(outputs)}}.\")",
  "}"
)

#' R-only: whether this R torch's scaler scales a CPU tensor itself (a later R torch may): then nothing is lifted.
scaler_takes_cpu_tensors <- function() {
  probe <- torch::cuda_amp_grad_scaler()
  tryCatch(
    {
      probe$scale(torch::torch_ones(1L))
      TRUE
    },
    error = function(err) FALSE
  )
}

#' R-only: `scaler` with its `scale()` replaced by R torch's own method minus `cuda_only_check`.
#'
#' The method's source must be `expected_scale_method`, line for line; otherwise nothing is lifted and
#' the error names the first line that differs (the harness reports the cell unsupported with it). The
#' replacement keeps the method's environment (`self`, R torch's namespace), so it runs R torch's code.
lift_cuda_only_check <- function(scaler) {
  method <- scaler$scale
  source_lines <- deparse(method)
  if (!identical(source_lines, expected_scale_method)) {
    at <- which(c(source_lines, "")[seq_along(expected_scale_method)] != expected_scale_method)[1]
    if (is.na(at)) at <- length(expected_scale_method) + 1L
    abort_cli(c(
      "Not lifting the CUDA-only check of R torch {packageVersion('torch')}'s {.fn cuda_amp_grad_scaler}: its {.fn scale} method differs from the one the lift was written for (line {at}: {.val {c(source_lines, '<end>')[at]}}).",
      i = "Run this cell on CUDA, or update {.var expected_scale_method} in r_scripts/cuda_amp_grad_scaler.R."
    ))
  }
  lifted <- method
  body(lifted) <- drop_statement(body(method), cuda_only_check)
  unlockBinding("scale", scaler) # R6 locks method bindings; this one scaler's method is replaced, R torch's class is not
  assign("scale", lifted, envir = scaler)
  lockBinding("scale", scaler)
  scaler
}

#' R-only: `code` with the one statement whose `deparse()` is `statement` removed, wherever it is nested.
drop_statement <- function(code, statement) {
  if (!is.call(code)) {
    return(code)
  }
  if (identical(code[[1]], as.name("{"))) {
    keep <- vapply(as.list(code)[-1L], function(part) paste(deparse(part), collapse = " ") != statement, NA)
    code <- as.call(c(as.list(code)[1L], as.list(code)[-1L][keep]))
  }
  for (k in seq_along(code)[-1L]) {
    if (!is.null(code[[k]])) code[[k]] <- drop_statement(code[[k]], statement)
  }
  code
}

#' R-only: the record's `lifted_check` for a lifted scaler: what was lifted, from which R torch.
lifted_check_name <- function() {
  sprintf("cuda_amp_grad_scaler()$scale(): CUDA-only check lifted on CPU (R torch %s, method source verified)", packageVersion("torch"))
}

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

#' The clip coefficient as `nn_utils_clip_grad_norm_()` computes it from the norm it returns (for the trace only).
#'
#' The same expression as R/nn-utils-clip-grad.R (`max_norm / (total_norm + 1e-6)`), evaluated by this
#' language's operators: a number over a tensor is `/.torch_tensor`, which makes the number a tensor
#' and divides (R/operators.R), where Python multiplies by a reciprocal.
clip_coef <- function(max_norm, total_norm) {
  max_norm / (total_norm + 1e-6)
}

#' What the scaler's inf check found for `opt` this step (0: the step ran).
#'
#' R's scaler keeps it per optimizer until `update()` (`.per_optimizer_states`, keyed by the optimizer's
#' address, R/autocast.R); `step()` sets it from its second check of the gradients (`.check_inf_per_device`).
found_inf <- function(scaler, opt) {
  found <- scaler$.per_optimizer_states[[rlang::obj_address(opt)]]$found_inf
  if (!inherits(found, "torch_tensor")) found <- torch::torch_tensor(found)
  found$to(dtype = torch::torch_float32())$reshape(list())
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
  made <- make_grad_scaler(spec) # R returns a list where Python returns a tuple
  scaler <- made$scaler
  lifted_check <- made$lifted_check

  # jsonlite gives `[]` as an empty list and `[3, 7]` as an integer vector.
  overflow_steps <- as.integer(unlist(spec$overflow_steps))
  inject_after_unscale <- identical(spec$overflow_point, "unscale")
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
      trace_point(step, "batch.data", data[i, , ])
      trace_point(step, "batch.targets", targets[i, , ])
      torch::with_autocast(device_type = device, dtype = amp_dtype, {
        output <- forward(net, data[i, , ], step)
        loss <- loss_fn(output, targets[i, , ])
      })
      trace_point(step, "loss", loss)
      if (is.null(output_dtype)) {
        output_dtype <- dtype_name(output$dtype)
        loss_dtype <- dtype_name(loss$dtype)
      }
      scaled_loss <- scaler$scale(loss)
      trace_point(step, "loss.scaled", scaled_loss)
      scaled_loss$backward()
      trace_parameters(step, "grad.backward", net, grads = TRUE)
      inject <- step %in% overflow_steps
      if (inject && !inject_after_unscale) {
        inject_overflow(net)
      }
      if (use_clip || (inject && inject_after_unscale)) {
        scaler$unscale_(opt)
        trace_parameters(step, "grad.unscaled", net, grads = TRUE)
        if (inject && inject_after_unscale) {
          inject_overflow(net)
        }
      }
      if (use_clip) {
        total_norm <- torch::nn_utils_clip_grad_norm_(net$parameters, max_norm = spec$clip_max_norm)
        trace_point(step, "clip.total_norm", total_norm)
        trace_point(step, "clip.coef", clip_coef(spec$clip_max_norm, total_norm))
        trace_parameters(step, "grad.clipped", net, grads = TRUE)
      }
      scaler$step(opt)
      trace_point(step, "scaler.found_inf", found_inf(scaler, opt))
      trace_parameters(step, "param.stepped", net, grads = FALSE)
      scaler$update()
      trace_point(step, "scaler.scale", scaler$.scale)
      trace_point(step, "scaler.growth_tracker", scaler$.growth_tracker)
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
    threads = torch::torch_get_num_threads(), device_name = device_name(device), lifted_check = lifted_check
  )
}

if (sys.nframe() == 0L) {
  main_cli(modes, run_workload)
}
