#' The workload's pieces shared by the R scripts: the twin of `py_scripts/common.py`.
#'
#' The same names in the same order as common.py (tests/unit/scripts/test_r_scripts.py checks it); a helper that R
#' needs and Python has built in is marked "R-only" where it is defined. The contract both halves follow
#' is `docs/contract.md`. Sourcing this file defines functions only: it loads neither torch nor anything
#' else, so the bridge and argument handling work where R torch is not installed. Functions that need
#' torch call it with `torch::` prefixes, so nothing is attached to the search path either.
#'
#' The other R files by job: shell.R (a script run by hand: flags, the spec from the harness, `main_cli()`),
#' _bridge.R (the harness's rpy2 entry point, `amp_parity_call()`), _bootstrap.R (what a script sources to load
#' this file and shell.R when it runs by hand). Every R torch call below is one in mlverse/torch's own
#' sources; the file is named where the API differs from PyTorch's.

#' R-only: which clock `clock()` reads, the best installed, checked once without loading bench (Python
#' has one clock, `time.perf_counter`).
#'
#' Base R's only sub-second clock is `proc.time()`'s elapsed time, in milliseconds: a 15 ms loop
#' would read as 15 or 16. Debian's r-cran-bench (installed by .ci/setup) has `bench::hires_time()`:
#' nanoseconds, but from `CLOCK_REALTIME` on Linux (bench's src/nanotime.c), so it is not monotonic:
#' an NTP step during a loop would show in that loop's time (NTP normally slews, which does not).
#' No Debian R package exports a monotonic clock (r-cran-clock and r-cran-nanotime are wall-clock time;
#' microbenchmark, which reads `CLOCK_MONOTONIC`, is not packaged in Debian; it is preferred where it
#' is installed). The double bench returns (~1.8e9 s) resolves 0.24 us.
clock_source <- if (nzchar(system.file(package = "microbenchmark"))) {
  "microbenchmark"
} else if (nzchar(system.file(package = "bench"))) {
  "bench"
} else {
  "proc.time"
}

#' The clock as each record names it (`clock`): the function and what it reads.
clock_name <- c(
  microbenchmark = "microbenchmark::get_nanotime (CLOCK_MONOTONIC)",
  bench = "bench::hires_time (CLOCK_REALTIME)",
  proc.time = "proc.time (elapsed, 1 ms steps)"
)[[clock_source]]

#' R-only: signal an error with a cli-formatted message (Python raises its exceptions).
#'
#' `cli::cli_abort()` needs rlang, which every R torch install has (torch imports it); where rlang is
#' missing (a machine without torch, checking arguments only) the same text is raised with `stop()`. `class`: the condition's
#' own class (`amp_parity_refused`: the script refuses the cell, which the harness reports unsupported).
abort_cli <- function(message, ..., class = NULL, .envir = parent.frame()) {
  if (requireNamespace("rlang", quietly = TRUE)) {
    cli::cli_abort(message, ..., class = c(class, "amp_parity_error"), call = NULL, .envir = .envir)
  }
  stop(errorCondition(cli::format_message(message, .envir = .envir), class = c(class, "amp_parity_error")))
}

#' R-only: stop with the install instructions unless R torch and its libtorch are installed (Python's
#' scripts import torch, and the import is the check).
require_r_torch <- function() {
  fix <- c(i = "Install it with {.code install.packages(\"torch\"); torch::install_torch()}.")
  if (!requireNamespace("torch", quietly = TRUE)) {
    abort_cli(c("The R package {.pkg torch} is not installed.", fix))
  }
  if (!torch::torch_is_installed()) {
    abort_cli(c("The R package {.pkg torch} is installed, but libtorch is not.", fix))
  }
  invisible(TRUE)
}

#' What `mode` does (autocast, the weights' dtype, the loss scaler, clipping), from the modes the run spec declares
#' for this script (docs/contract.md); a missing mode or one the script does not run is refused, naming the ones it does.
mode_properties <- function(spec, mode) {
  modes <- names(spec$modes)
  if (is.null(mode) || length(mode) != 1L || is.na(mode)) {
    abort_cli(c(
      "{.var mode} is required: one of {.or {.val {modes}}}.",
      i = "Pass it as {.code --mode {modes[[1]]}}."
    ))
  }
  if (!mode %in% modes) {
    abort_cli("{.var mode} must be one of {.or {.val {modes}}}, but got {.val {mode}}.")
  }
  spec$modes[[mode]]
}

#' The torch dtype for a contract dtype name (`bfloat16`, `float16`, ...): R torch's own of that name (`torch_bfloat16()`).
torch_dtype <- function(name) {
  constructor <- if (is.character(name) && length(name) == 1L) get0(paste0("torch_", name), envir = asNamespace("torch"), mode = "function")
  dtype <- if (!is.null(constructor)) tryCatch(constructor(), error = function(err) NULL)
  if (!inherits(dtype, "torch_dtype")) {
    abort_cli("{.var dtype} must name a dtype of torch, but got {.val {name}}.")
  }
  dtype
}

#' The contract's name for a torch dtype, one of the run spec's `dtypes` (harness/contract/dtypes.py).
#'
#' `as.character()` on an R torch dtype gives libtorch's scalar-type name (R/dtype.R:
#' `as.character.torch_dtype` → `cpp_dtype_to_string`): "Float", "Half", "BFloat16", "Double"; the run spec's `dtypes`
#' names each dtype's `libtorch` name.
dtype_name <- function(dtype, spec) {
  libtorch_name <- as.character(dtype)
  for (name in names(spec$dtypes)) {
    if (identical(spec$dtypes[[name]]$libtorch, libtorch_name)) {
      return(name)
    }
  }
  abort_cli("Unexpected dtype {.val {libtorch_name}}: expected one of {.or {.val {names(spec$dtypes)}}}.")
}

#' The last fixture file loaded (`_fixture_cache` in common.py), on its device, with its key (path, mtime, size, device).
fixture_cache <- new.env(parent = emptyenv())

#' The fixture tensors on the spec's device (the same file Python loads with `load_file`).
#'
#' The last file loaded stays in memory for the next call in this process: the harness times
#' repeated calls, and a timed round must measure training, not reading a gigabyte from disk (at
#' `recipe`). A rewritten file (new mtime or size) is read again. The tensors are never written to.
#' safetensors' `safe_load_file(path, ..., framework)` returns CPU tensors unless told otherwise;
#' they are moved with `$to(device =)`.
load_fixtures <- function(spec) {
  info <- file.info(spec$fixture_path)
  key <- paste(spec$fixture_path, format(as.numeric(info$mtime), digits = 17), info$size, spec$device)
  if (!identical(fixture_cache$key, key)) {
    fixture_cache$tensors <- NULL # one file at a time: a recipe fixture is a gigabyte
    fixtures <- safetensors::safe_load_file(spec$fixture_path, framework = "torch")
    fixture_cache$tensors <- lapply(fixtures, function(x) x$to(device = spec$device))
    fixture_cache$key <- key
  }
  fixture_cache$tensors
}

#' The recipe's MLP (Linear+ReLU … Linear) with weights copied from the fixtures.
#'
#' R's `nn_linear()` has no `device` argument (R/nn-linear.R): each layer is moved with `$to()`
#' (in place, R/nn.R `.apply`) before its weights are copied, as Python builds it on the device.
make_model <- function(spec, fixtures) {
  layers <- list()
  for (k in seq_len(spec$num_layers) - 1L) {
    out_features <- if (k == spec$num_layers - 1L) spec$out_size else spec$in_size
    linear <- torch::nn_linear(spec$in_size, out_features)
    linear$to(device = spec$device)
    torch::with_no_grad({
      linear$weight$copy_(fixtures[[sprintf("layer%d.weight", k)]])
      linear$bias$copy_(fixtures[[sprintf("layer%d.bias", k)]])
    })
    layers <- c(layers, list(linear))
    if (k < spec$num_layers - 1L) {
      layers <- c(layers, list(torch::nn_relu()))
    }
  }
  do.call(torch::nn_sequential, layers)
}

#' The Linear layers in order (every other module is a ReLU).
linear_layers <- function(net) {
  Filter(function(module) inherits(module, "nn_linear"), net$children)
}

#' Every parameter with the name the fixtures, the final weights and the trace give it (`layer0.weight`, ...), in
#' the order the optimizer steps them (`net$parameters`'), as a named list.
named_parameters <- function(net) {
  params <- list()
  linears <- linear_layers(net)
  for (k in seq_along(linears) - 1L) {
    for (kind in c("weight", "bias")) {
      params[[sprintf("layer%d.%s", k, kind)]] <- linears[[k + 1L]][[kind]]
    }
  }
  params
}

#' The run spec's optimizer (`optimizer`: its row of harness/workload/optimizers.py, under R torch's names).
#'
#' One code path for every optimizer: the R torch function the row names, called with the parameters and the row's
#' arguments (`do.call()`); the R-code family (`optim_adam`, ...) and the libtorch family (`optim_ignite_adam`, ...)
#' alike. JSON pairs (betas, etas, step sizes) arrive as numeric vectors, as R torch takes them.
make_optimizer <- function(spec, net, layers = NULL) {
  r <- spec$optimizer$r
  constructor <- getExportedValue("torch", r[["function"]])
  named <- named_parameters(net)
  # the parameters, which the trace reads at every step: all of them, whichever this optimizer gets (multi_optimizer)
  assign("params", named, envir = trace_state)
  if (!is.null(layers)) { # only those Linear layers' parameters (0-based, as Python's twin counts)
    named <- named[sub("[.].*$", "", names(named)) %in% sprintf("layer%d", layers)]
  }
  # what {param} points are named by: each param group's names, in the order the optimizer holds them (Python's twin
  # keys them by the tensor, which R cannot)
  assign("groups", list(names(named)), envir = trace_state)
  params <- if (is.null(layers)) net$parameters else unname(named)
  groups <- spec$feature$param_groups
  if (!is.null(groups)) { # weights in the first group, biases in a second with their own lr (and weight decay)
    weights <- endsWith(names(named), ".weight")
    biases <- list(params = unname(named[!weights]), lr = r$args$lr * groups$bias_lr_factor)
    if (!is.null(r$args$weight_decay)) {
      biases$weight_decay <- groups$bias_weight_decay
    }
    params <- list(list(params = unname(named[weights])), biases)
    assign("groups", list(names(named)[weights], names(named)[!weights]), envir = trace_state)
  }
  opt <- do.call(constructor, c(list(params), r$args))
  attr(opt, "trace_groups") <- get("groups", envir = trace_state) # R-only: for use_trace_names() with two optimizers
  opt
}

#' R-only: name `{param}` points and ignite's state by `opt`'s parameters from now on (the loop calls it before each
#' optimizer's step where it has two: `multi_optimizer`); Python's twin keys them by the tensor.
use_trace_names <- function(opt) {
  assign("groups", attr(opt, "trace_groups"), envir = trace_state)
  invisible(NULL)
}

#' The loop's optimizers: the run spec's one over every parameter, or under a `multi_optimizer` feature two of the
#' row's optimizer, the first over the layers before the last `head_layers`, the second over those.
make_optimizers <- function(spec, net) {
  multi <- loop_feature(spec, "multi_optimizer")
  if (is.null(multi)) {
    return(list(make_optimizer(spec, net)))
  }
  split <- spec$num_layers - multi$head_layers
  list(make_optimizer(spec, net, seq_len(split) - 1L), make_optimizer(spec, net, seq(split, spec$num_layers - 1L)))
}

#' The arguments of the run spec's loop feature (`feature`: its row of harness/workload/features.py) when it is of
#' `kind` (`scheduler`, `accumulate`, `clip_value`), else `NULL` (the plain loop, or another feature).
loop_feature <- function(spec, kind) {
  feature <- spec$feature
  if (!is.null(feature) && identical(feature$kind, kind)) feature$args else NULL
}

#' A `clip_norm` row's `norm_type` for `nn_utils_clip_grad_norm_()`: `Inf` where `inf_norm` is 1 (the run spec's JSON
#' has no infinity, so the row carries a flag), else 2.
clip_norm_type <- function(clip_norm) {
  if (clip_norm$inf_norm == 1) Inf else 2
}

#' A `frozen` loop feature: the row's layer (0-based, as Python's twin counts) gets `requires_grad` false (its
#' parameters are still handed to the optimizer, which then sees them without a gradient at every step).
freeze_layer <- function(spec, net) {
  frozen <- loop_feature(spec, "frozen")
  if (!is.null(frozen)) {
    for (param in linear_layers(net)[[frozen$layer + 1L]]$parameters) {
      param$requires_grad_(FALSE)
    }
  }
  invisible(NULL)
}

#' The layer a `sometimes_used` loop feature leaves out of the forward pass at `step` (0-based), or -1 (every layer
#' used): the row's layer, on the steps that are not a multiple of its `every`.
unused_layer <- function(spec, step) {
  used <- loop_feature(spec, "sometimes_used")
  if (!is.null(used) && step %% used$every != 0L) as.integer(used$layer) else -1L
}

#' `opt$zero_grad()` as the loop feature says: a `sometimes_used` row's `set_to_none` (1 TRUE, 0 FALSE, -1 no
#' argument: the binding's default, FALSE for R torch's R-code optimizers; its ignite optimizers' `zero_grad()` takes no
#' argument); otherwise with no argument, as the plain loop always did.
zero_grad <- function(spec, opt) {
  used <- loop_feature(spec, "sometimes_used")
  if (is.null(used) || used$set_to_none < 0) {
    opt$zero_grad()
  } else {
    opt$zero_grad(set_to_none = as.logical(used$set_to_none))
  }
}

#' A Linear layer's forward and backward as a custom autograd function (`torch_addmm()`; the gradients by hand), made AMP
#' aware as PyTorch's AMP examples' last section says of `custom_fwd`/`custom_bwd`.
#'
#' R torch has neither decorator, nor a public getter of the autocast state: the forward saves the state it runs in
#' (`state`: the device type, the AMP dtype and whether autocast is on, which the caller knows) and the backward runs
#' its ops under `with_autocast()` with it, what `custom_bwd` does (torch/amp/autocast_mode.py).
#' R-only: built when a loop uses it (`custom_layer()`), not when this file is sourced: `autograd_function()` loads
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

#' A `custom_function` loop feature's layer and the function that computes it (`amp_linear`), for `forward()`, as
#' `list(layer, fn)`; `NULL` otherwise. `properties`: the mode's, whose autocast the forward runs under (R-only: the
#' state `amp_linear` saves, where Python's `custom_fwd` reads it).
custom_layer <- function(spec, properties) {
  custom <- loop_feature(spec, "custom_function")
  if (is.null(custom)) {
    return(NULL)
  }
  state <- list(device = spec$device, dtype = torch_dtype(spec$amp_dtype), enabled = isTRUE(properties$autocast))
  fn <- amp_linear()
  list(layer = as.integer(custom$layer), fn = function(x, linear) fn(x, linear$weight, linear$bias, state))
}

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

#' After the scheduler's step: its `last_epoch`, the state the row names (`scheduler.<name>`, a float64 scalar) and each
#' param group's lr, the one the next optimizer step uses (`optim.lr.group<i>`, 0-based as Python's twin counts), and the
#' momentum or beta1 a row's scheduler cycles (`optim.momentum.group<i>`): float64 scalars, as both bindings keep them
#' as doubles. `prefix` `resume.`: as a checkpoint's load read them back.
trace_scheduler <- function(step, spec, opt, scheduler, prefix = "") {
  if (!traced(paste0(prefix, "scheduler."), step) && !traced(paste0(prefix, "optim."))) {
    return(invisible(NULL))
  }
  trace_point(step, paste0(prefix, "scheduler.last_epoch"), number_point(scheduler$last_epoch, "int64"))
  for (name in unlist(spec$feature$traced)) {
    trace_point(step, paste0(prefix, "scheduler.", name), number_point(scheduler[[name]]))
  }
  groups <- opt$param_groups
  for (i in seq_along(groups)) {
    trace_point(step, sprintf("%soptim.lr.group%d", prefix, i - 1L), number_point(groups[[i]]$lr))
    if (isTRUE(spec$feature$cycles_momentum)) { # beta1 where the group has betas, as lr_one_cycle decides
      momentum <- if (!is.null(groups[[i]]$betas)) groups[[i]]$betas[[1]] else groups[[i]]$momentum
      trace_point(step, sprintf("%soptim.momentum.group%d", prefix, i - 1L), number_point(momentum))
    }
  }
  invisible(NULL)
}

#' The spec's gradient scaler (`enabled = FALSE`: one whose calls pass through), and which check of the binding was
#' lifted to get it (`NULL`: none), as a list (Python returns a tuple).
#'
#' Unlike `torch.amp.GradScaler(device)`, R's `cuda_amp_grad_scaler()` has no device argument and its `scale()` refuses
#' any tensor that is not on CUDA (R/autocast.R). On CUDA, disabled, or where R torch's scaler takes a CPU tensor itself,
#' it is used as is. On CPU with `spec$scaler_lift`, `lift_cuda_only_check()` removes that one check from this scaler
#' (nothing else, and only after checking R torch's method). Shared by every script that scales (the lift is not
#' copied into each).
make_grad_scaler <- function(spec, enabled) {
  scaler <- torch::cuda_amp_grad_scaler(
    init_scale = spec$init_scale, growth_factor = spec$growth_factor,
    backoff_factor = spec$backoff_factor, growth_interval = spec$growth_interval, enabled = enabled
  )
  if (!enabled || spec$device == "cuda" || !isTRUE(spec$scaler_lift) || scaler_takes_cpu_tensors()) {
    return(list(scaler = scaler, lifted_check = NULL))
  }
  list(scaler = lift_cuda_only_check(scaler), lifted_check = lifted_check_name())
}

#' R-only: the statement of R torch's `amp_GradScaler$scale()` that refuses CPU tensors (R/autocast.R at mlverse/torch
#' e4de110, lines 174-175), as `deparse()` prints it. Python's scaler has none.
cuda_only_check <- paste0(
  "if (!outputs$is_cuda) cli_abort(\"{.var outputs} device must be {.val cuda}, ",
  "got {.val {outputs$device$type}}.\")"
)

#' R-only: R torch's `amp_GradScaler$scale()` as the lift expects it, as `deparse()` prints it (R/autocast.R at
#' mlverse/torch e4de110, lines 169-186). The lift removes `cuda_only_check` and nothing else, so it refuses to touch a
#' method that is not exactly this one.
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
#'
#' Asked once per process (the answer is the loaded R torch's): asking costs an R torch error that cli formats, about
#' 15 ms, a tenth of a `tiny` scaler call, paid by every scaler call until issue 38.
scaler_takes_cpu_tensors <- function() {
  known <- get0("takes_cpu_tensors", envir = scaler_facts, inherits = FALSE)
  if (!is.null(known)) {
    return(known)
  }
  probe <- torch::cuda_amp_grad_scaler()
  answer <- tryCatch(
    {
      probe$scale(torch::torch_ones(1L))
      TRUE
    },
    error = function(err) FALSE
  )
  assign("takes_cpu_tensors", answer, envir = scaler_facts)
  answer
}

#' R-only: what `scaler_takes_cpu_tensors()` found, kept for the process.
scaler_facts <- new.env(parent = emptyenv())

#' R-only: `scaler` with its `scale()` replaced by R torch's own method minus `cuda_only_check`.
#'
#' The method's source must be `expected_scale_method`, line for line; otherwise nothing is lifted and the error names
#' the first line that differs (the harness reports the cell unsupported with it). The replacement keeps the method's
#' environment (`self`, R torch's namespace), so it runs R torch's code.
lift_cuda_only_check <- function(scaler) {
  method <- scaler$scale
  source_lines <- deparse(method)
  if (!identical(source_lines, expected_scale_method)) {
    at <- which(c(source_lines, "")[seq_along(expected_scale_method)] != expected_scale_method)[1]
    if (is.na(at)) at <- length(expected_scale_method) + 1L
    abort_cli(c(
      "Not lifting the CUDA-only check of R torch {packageVersion('torch')}'s {.fn cuda_amp_grad_scaler}: its {.fn scale} method differs from the one the lift was written for (line {at}: {.val {c(source_lines, '<end>')[at]}}).",
      i = "Run this cell on CUDA, or update {.var expected_scale_method} in r_scripts/common.R."
    ), class = "amp_parity_refused")
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

#' Put an inf into one gradient element (the first weight of the first layer that has a gradient: a frozen layer's
#' has none), as an fp16 overflow would.
inject_overflow <- function(net) {
  torch::with_no_grad({
    # the first layer that has a gradient, as Python's twin (a frozen layer's is undefined)
    layer <- Find(function(l) !torch::is_undefined_tensor(l$weight$grad), linear_layers(net))
    grad <- layer$weight$grad
    grad[1, 1] <- Inf # `[<-.torch_tensor` writes into the tensor in place (tensor_slice_put_)
  })
  invisible(NULL)
}

#' What the scaler's inf check found for `opt` this step (0: the step ran).
#'
#' R's scaler keeps it per optimizer until `update()` (`.per_optimizer_states`, keyed by the optimizer's address,
#' R/autocast.R); `step()` sets it from its second check of the gradients (`.check_inf_per_device`).
found_inf <- function(scaler, opt) {
  found <- scaler$.per_optimizer_states[[rlang::obj_address(opt)]]$found_inf
  if (!inherits(found, "torch_tensor")) found <- torch::torch_tensor(found)
  found$to(dtype = torch::torch_float32())$reshape(list())
}

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
optimizer_order <- function(opt) {
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
    abort_cli("R torch's {.fn cuda_amp_grad_scaler} now has {.fn state_dict}: carry its scale and growth tracker in {.fn save_checkpoint} and {.fn load_checkpoint} (r_scripts/common.R).")
  }
  params <- named_parameters(net)
  tensors <- lapply(params, function(param) param$detach()$contiguous())
  names(tensors) <- paste0("model.", names(params))
  counts <- list()
  state <- opt$state_dict()
  order <- optimizer_order(opt)
  entries <- spec$optimizer$state
  for (index in names(state$state)) {
    for (e in seq_len(NROW(entries))) {
      value <- state$state[[index]][[entries$r[[e]]]]
      key <- sprintf("%s.%s", entries$name[[e]], order[[as.integer(index)]])
      if (!is.null(value) && isTRUE(entries$count[[e]])) {
        counts[[key]] <- as.numeric(value) # an R double (R code) or a one-element int64 tensor (ignite)
      } else if (!is.null(value)) {
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
  order <- optimizer_order(opt)
  for (index in seq_along(order)) {
    loaded <- list()
    for (e in seq_len(NROW(entries))) {
      key <- sprintf("%s.%s", entries$name[[e]], order[[index]])
      count <- match(key, meta$count_names)
      if (isTRUE(entries$count[[e]]) && !is.na(count)) {
        # R code keeps a step count as an R double, libtorch's C++ (ignite) as a one-element int64 tensor
        value <- meta$count_values[[count]]
        loaded[[entries$r[[e]]]] <- if (ignite) torch::torch_tensor(value, dtype = torch::torch_int64()) else as.numeric(value)
      } else if (!is.null(tensors[[paste0("optim.", key)]])) {
        loaded[[entries$r[[e]]]] <- tensors[[paste0("optim.", key)]]$to(device = spec$device)
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

#' The model's forward, layer by layer, each module's output a trace point (`forward.layer0`, `forward.relu0`, ...);
#' `unused`: a layer (0-based) left out this step, its Linear and its ReLU (loop feature `sometimes_used`; -1: none);
#' `custom`: a layer computed by a function of the input and that layer (loop feature `custom_function`) in place of the
#' Linear's own forward, as `list(layer, fn)`.
#'
#' What `nn_sequential()`'s forward does (each module on the previous output, R/nn.R), written out because
#' R torch has tensor hooks but no module forward hooks: both languages name their points here, in the
#' same order.
forward <- function(net, x, step, unused = -1L, custom = NULL) {
  linears <- linear_layers(net)
  for (k in seq_along(linears) - 1L) {
    if (k == unused) next
    x <- if (!is.null(custom) && custom$layer == k) custom$fn(x, linears[[k + 1L]]) else linears[[k + 1L]](x)
    trace_point(step, sprintf("forward.layer%d", k), x)
    if (k < length(linears) - 1L) { # every Linear but the last is followed by its ReLU
      x <- net$children[[2L * k + 2L]](x)
      trace_point(step, sprintf("forward.relu%d", k), x)
    }
  }
  x
}

#' Where trace points go: `sink` is unset in every call but a traced one, for which the harness's bridge
#' installs its recorder (`amp_parity_trace_call()` in _bridge.R) with `set_trace_sink()`; `step`: the step of the last
#' point, which a point inside a binding's function is recorded at; `params`: the parameters' names in the order the
#' optimizer visits them (`{param}` points).
trace_state <- new.env(parent = emptyenv())

#' Send every `trace_point()` to `sink(step, name, tensor)` from now on (`NULL`: back to no-ops).
set_trace_sink <- function(sink) {
  assign("sink", sink, envir = trace_state)
  assign("step", 0L, envir = trace_state)
  assign("params", NULL, envir = trace_state) # the next make_optimizer()'s, never a call before's
  assign("keep_only", NULL, envir = trace_state)
  invisible(NULL)
}

#' From now on, trace only the points named in `names`: the harness cut the trace, because this run parted from the run
#' it is compared with at the step just ended (_bridge.R; docs/tracing.md). The rest would only cost: the points before
#' the cut say where the two part, and the cell's reconciled run is compared everywhere.
cut_trace <- function(names) {
  assign("keep_only", names, envir = trace_state)
  invisible(NULL)
}

#' Whether a point whose name begins with `prefix` may be traced now: a sink is installed, and the trace is not cut, or
#' a name it keeps begins so. The functions that gather several points ask it first, with the prefix their names share,
#' so a cut trace skips the gathering too; `trace_point()` keeps exactly the names the cut keeps. `step`, where given, is
#' the current step from now on, traced or not, as `trace_point()` sets it (a point inside the binding's functions is
#' recorded at it).
traced <- function(prefix, step = NULL) {
  if (is.null(get0("sink", envir = trace_state, inherits = FALSE))) {
    return(FALSE)
  }
  if (!is.null(step)) {
    assign("step", step, envir = trace_state)
  }
  keep <- get0("keep_only", envir = trace_state, inherits = FALSE)
  is.null(keep) || any(startsWith(keep, prefix))
}

#' Whether this call is traced (a sink is installed): the points inside the binding's functions are patched in then.
tracing <- function() {
  !is.null(get0("sink", envir = trace_state, inherits = FALSE))
}

#' One named intermediate of `step` for the trace (docs/tracing.md); returns at once when not tracing.
#'
#' The scripts call it once per point, in computation order, with the same names in both languages, so
#' the harness can name the first tensor where two runs part. `value` is evaluated only when tracing (R's
#' arguments are lazy), so a point the training step does not compute itself costs a timed call nothing
#' (Python's twin takes a function for those).
trace_point <- function(step, name, value) {
  sink <- get0("sink", envir = trace_state, inherits = FALSE)
  if (is.null(sink)) {
    return(invisible(NULL))
  }
  assign("step", step, envir = trace_state) # kept or not: the points inside the binding's functions are at this step
  keep <- get0("keep_only", envir = trace_state, inherits = FALSE)
  if (!is.null(keep) && !(name %in% keep)) {
    return(invisible(NULL)) # cut (cut_trace()): `value` is never evaluated
  }
  sink(step, name, value)
}

#' A trace point inside one of the binding's functions (a *point* patch, harness/workload/patches.toml): the value the
#' function computed and then uses, at the current step; `{param}` in `name` is the `index`-th parameter (1-based, as R's
#' loops count; Python's twin takes the tensor itself, since PyTorch's loops do not all count). An R number (a bias correction, a step size) is recorded as a float64 scalar, as Python's twin records a
#' Python float.
amp_parity_point <- function(name, value, index = NULL) {
  if (!traced(if (is.null(index)) name else sub("\\{param\\}.*$", "", name))) { # a {param} name: the part before it
    return(invisible(NULL))
  }
  if (!is.null(index)) {
    # the index counts within the param group the optimizer's loop is in (its `g`, where its loop has one)
    group <- get0("g", envir = parent.frame(), inherits = FALSE, ifnotfound = 1L)
    name <- sub("{param}", get("groups", envir = trace_state)[[group]][[index]], name, fixed = TRUE)
  }
  if (!inherits(value, "torch_tensor")) {
    value <- number_point(value)
  }
  trace_point(get("step", envir = trace_state), name, value)
}

#' R-only (Python's twin records a Python float or int as it is): an R number as a trace point's value, float64 (as
#' Python's twin records a Python float) or `"int64"` (a count, which PyTorch keeps in a tensor or an int): the sink
#' writes its 8 bytes itself. A 0-d tensor of it (what this was
#' until issue 38) costs R torch a tensor, a clone and a buffer, about 0.1 ms, at a fifth of an R trace's points; the
#' bytes, dtype and shape are the same (tests/integration/test_r_worker.py holds them equal).
number_point <- function(value, dtype = "float64") {
  value <- as.numeric(value)
  if (length(value) != 1L || !(dtype %in% c("float64", "int64"))) {
    abort_cli("A trace point's number must be one float64 or int64 value, got {length(value)} value{?s} as {.val {dtype}}.")
  }
  if (dtype == "int64" && !(is.finite(value) && value == trunc(value) && abs(value) < 2^53)) {
    abort_cli("A trace point's int64 count must be a whole number below 2^53, got {.val {value}}.")
  }
  structure(list(value = value, dtype = dtype), class = "amp_parity_number")
}

#' R-only: the little-endian bytes of a `number_point()`: a double's own 8 bytes, or an int64's two 32-bit halves (two's complement).
number_bytes <- function(number) {
  if (number$dtype == "float64") {
    return(writeBin(number$value, raw(), size = 8L, endian = "little"))
  }
  high <- floor(number$value / 2^32)
  low <- number$value - high * 2^32 # 0 <= low < 2^32
  if (high < 0) high <- high + 2^32 # the upper half in two's complement (|high| < 2^21: exact)
  as.raw(c(low %/% 256^(0:3) %% 256, high %/% 256^(0:3) %% 256))
}

#' R-only: `named_parameters(net)` as the optimizer of this call was given them (make_optimizer() keeps them for the
#' trace), else read anew. The trace reads them four to six times a step, and reading them is R torch's module code
#' (about 0.1 ms a time, issue 38); Python's twin reads its module's parameters in microseconds.
traced_parameters <- function(net) {
  params <- get0("params", envir = trace_state, inherits = FALSE)
  if (is.null(params)) named_parameters(net) else params
}

#' Every parameter (`grads = FALSE`) or its gradient (`grads = TRUE`) as a point `<stage>.layer0.weight`, ...
#'
#' Named like the fixtures and the final weights; skipped at once when not tracing, or when the trace is cut.
trace_parameters <- function(step, stage, net, grads) {
  if (!traced(paste0(stage, "."), step)) {
    return(invisible(NULL))
  }
  params <- traced_parameters(net)
  for (name in names(params)) {
    value <- if (grads) params[[name]]$grad else params[[name]]
    if (grads && torch::is_undefined_tensor(value)) next # a frozen layer's: no gradient point
    trace_point(step, sprintf("%s.%s", stage, name), value)
  }
  invisible(NULL)
}

#' The optimizer's state after its step, as points `<stage>.<entry>.<parameter>` (`optim.exp_avg.layer0.weight`, ...;
#' `resume.optim`: as a checkpoint's load read it back).
#'
#' The entries are the run spec's optimizer row's (`state`, a data frame as jsonlite reads it), each read under R torch's
#' key: the R-code optimizers keep a list per parameter (`opt$state$get(param)`), the libtorch ones report theirs through
#' `opt$state_dict()` (by the parameter's position); these are the tensors the step updated and used, parameter by
#' parameter in the order the step visits them. A step counter (`count`) is recorded as the whole number it holds (an
#' R double here, a float32 tensor in PyTorch); any other R number as a float64 scalar; an entry with a `dtype` in that
#' dtype (the one every kernel that uses it rounds it to). Skipped at once when not tracing, or when the trace is cut.
trace_optimizer_state <- function(step, opt, net, spec, stage = "optim") {
  if (!traced(paste0(stage, "."), step)) {
    return(invisible(NULL))
  }
  entries <- spec$optimizer$state
  params <- traced_parameters(net)
  states <- if (identical(spec$optimizer$family, "ignite")) opt$state_dict()$state else NULL
  for (k in seq_along(params)) {
    position <- match(names(params)[[k]], unlist(get("groups", envir = trace_state))) # ignite's: by the optimizer's order
    state <- if (is.null(states)) opt$state$get(params[[k]]) else states[[as.character(position)]]
    for (e in seq_len(NROW(entries))) {
      value <- state[[entries$r[[e]]]]
      if (is.null(value)) next
      dtype <- if (is.null(entries$dtype)) NA else entries$dtype[[e]] # jsonlite drops a column null in every row
      if (isTRUE(entries$count[[e]]) && is.na(dtype)) {
        value <- number_point(value, "int64") # an R double (R code) or a one-element int64 tensor (ignite): as.numeric() reads both
      } else if (isTRUE(entries$count[[e]])) {
        value <- torch::torch_scalar_tensor(as.numeric(value), dtype = torch::torch_int64())
      } else if (!inherits(value, "torch_tensor")) {
        # an R number: float64, or a 0-d tensor where the entry names the dtype its kernels round it to
        value <- if (is.na(dtype)) number_point(value) else torch::torch_scalar_tensor(value, dtype = torch::torch_float64())
      }
      if (!is.na(dtype)) {
        value <- value$to(dtype = torch_dtype(dtype))
      }
      trace_point(step, sprintf("%s.%s.%s", stage, entries$name[[e]], names(params)[[k]]), value)
    }
  }
  invisible(NULL)
}

#' Wait for queued device work, so a clock read measures finished work (no-op on CPU).
sync_device <- function(device) {
  if (device == "cuda") {
    torch::cuda_synchronize()
  }
  invisible(NULL)
}

#' A clock in seconds, the best one installed (`clock_name`); the twin of common.py's monotonic one.
clock <- switch(clock_source,
  microbenchmark = function() microbenchmark::get_nanotime() / 1e9,
  bench = function() as.numeric(bench::hires_time()),
  function() proc.time()[["elapsed"]]
)

#' Collect R's garbage now, before the timed loop; returns R's GC clock (seconds).
#'
#' R cannot switch its collector off as Python's `gc.disable()` does, so the loop may still collect;
#' `gc.time()` (which also switches GC timing on) counts the elapsed seconds R spent collecting, and
#' `resume_gc()` reports those inside the loop rather than hiding them. `spec$collect_before_loop`
#' says how much: `full` frees the previous call's tensors that R had promoted to an older generation
#' (a young collection leaves them held, and the loop then allocates afresh and pays page faults in
#' some rounds: harness.run.prepare.collect_before_loop has the numbers); `young` (at tiny) costs
#' ~2 ms where a full collection costs ~45 ms with R torch loaded.
pause_gc <- function(spec) {
  if (identical(spec$collect_before_loop, "full")) {
    collect_ahead()
  } else {
    gc(verbose = FALSE, full = FALSE)
  }
  gc.time()[[3]]
}

#' R-only (Python's collector is off in the loop): where R's collection counters last escalated (`escalated_at`: R's
#' running count of that level 1 or 2 collection; NULL until one is seen) and how many full collections
#' `collect_ahead()` made since (`full_since`: R does not count them). Kept across calls in this process, as R's own
#' counters are.
gc_counters <- new.env(parent = emptyenv())

#' R-only (Python's `pause_gc()` switches its collector off): collect fully, then make sure the loop's own collections
#' cannot escalate.
#'
#' R escalates its collections by counters (`collect_counts` in R's memory.c): every 21st counted collection (an
#' allocation's, or `gc(full = FALSE)`) collects the middle generation too (level 1), and every sixth of those every
#' generation (level 2, 0.09-0.1 s with R torch's objects alive in a bench loop). A full `gc()` neither counts nor resets
#' them, so the full collection before the loop left them running, and now and then one of the loop's own collections was
#' the full one: R's scaler and clip cells, 1-2 level-0 collections a bench loop, had such a round in each protocol of
#' two `tox -e bench` runs (docs/timing.md). So, where fewer than `gc_loop_room` counted collections are left before the
#' next escalation, young collections are made here until it happens, outside the timed loop: afterwards 20 counted
#' collections are left. How many are left is read from R's own report of each collection (`verbose = TRUE`, kept from
#' the console): "Garbage collection N = ... (level L)". A collection this function cannot see (another package's
#' `gc()`) only makes it escalate sooner than needed.
collect_ahead <- function() {
  report <- character()
  con <- textConnection("report", "w", local = TRUE)
  sink(con, type = "message")
  on.exit({
    sink(type = "message")
    close(con)
  }, add = TRUE)
  collected <- function(full) {
    invisible(gc(verbose = TRUE, full = full))
    said <- gc_reported(report)
    said[[length(said)]]
  }
  full <- collected(TRUE)
  anchor <- gc_counters$escalated_at
  counted <- if (is.null(anchor) || is.na(full$count)) Inf else full$count - anchor - gc_counters$full_since - 1
  gc_counters$full_since <- (if (is.null(gc_counters$full_since)) 0 else gc_counters$full_since) + 1
  if (counted + gc_loop_room < gc_counter_period) {
    return(invisible(NULL))
  }
  for (i in seq_len(gc_counter_period)) {
    young <- collected(FALSE)
    if (!is.na(young$level) && young$level >= 1L) {
      gc_counters$escalated_at <- young$count
      gc_counters$full_since <- 0
      break
    }
  }
  invisible(NULL)
}

#' R-only: the collections R reported in `report` (lines of its `gc(verbose = TRUE)` output), in order, each as its
#' running count and level ("Garbage collection 23 = 20+1+2 (level 1)"); one NA pair where it reported none.
gc_reported <- function(report) {
  text <- paste(report, collapse = " ")
  said <- regmatches(text, gregexpr("Garbage collection [0-9]+ = [0-9+ ]+\\(level [0-9]\\)", text))[[1]]
  if (length(said) == 0L) {
    return(list(list(count = NA_real_, level = NA_integer_)))
  }
  lapply(said, function(one) {
    list(count = as.numeric(sub("^Garbage collection ([0-9]+) = .*$", "\\1", one)),
         level = as.integer(sub("^.*\\(level ([0-9])\\)$", "\\1", one)))
  })
}

#' R-only: R's escalation period, its LEVEL_0_FREQ (20) level-0 collections, then one at level 1 or 2.
gc_counter_period <- 21
#' R-only: counted collections kept free for the loop: R's bench loops make 0-2 (its clip cell, the most), a traced
#' record call more (it is never timed); 5 leaves room for the loop's allocations to vary.
gc_loop_room <- 5

#' The seconds R spent collecting garbage since `pause_gc()` returned `gc_state` (its GC clock).
resume_gc <- function(gc_state) {
  gc.time()[[3]] - gc_state
}

#' Start the device's peak-memory counter afresh, where the frontend can.
#'
#' R torch cannot: R/cuda.R has `cuda_memory_stats()` and `cuda_empty_cache()` but no
#' `reset_peak_memory_stats()`. On CUDA the peak is therefore the worker process's high-water mark
#' since it started, which can include an earlier run in the same worker. A no-op, kept so the
#' scripts read like their Python twins.
reset_peak_memory <- function(device) {
  invisible(NULL)
}

#' Peak bytes allocated by tensors on CUDA; `NULL` (JSON null) on CPU.
#'
#' `cuda_memory_stats()` (R/cuda.R) nests its entries: `allocated_bytes$all$peak` is libtorch's
#' "allocated_bytes.all.peak", what `torch.cuda.max_memory_allocated()` reads.
peak_memory_bytes <- function(device) {
  if (device != "cuda") {
    return(NULL)
  }
  torch::cuda_memory_stats()$allocated_bytes$all$peak
}

#' The trained weights, named like the fixtures, as a CPU float32 safetensors file; nothing when `path` is `NULL`.
#'
#' float32 whatever the weights' dtype: a bfloat16 or float16 weight (the lowp_weights modes) is exactly a float32, and
#' NumPy, which judges the weights, has no bfloat16. The harness passes no path in timed rounds after the first call:
#' their weights equal the first's.
save_final_weights <- function(net, path) {
  if (is.null(path)) {
    return(invisible(NULL))
  }
  tensors <- lapply(named_parameters(net), function(param) param$detach()$to(device = "cpu", dtype = torch::torch_float32())$contiguous())
  dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
  # writeBin() only warns when the disk is full, and leaves a truncated file that passes for weights.
  withCallingHandlers(
    safetensors::safe_save_file(tensors, path),
    warning = function(w) {
      unlink(path)
      abort_cli("Could not write the final weights to {.path {path}}: {conditionMessage(w)}.")
    }
  )
  invisible(path)
}

#' The run record with exactly the run spec's `record_fields` (harness/contract/record.py, the one list both languages
#' read); a missing or extra field is a script bug. A field of a list kind (`list of ...`) is marked `I()` (as is), so
#' `record_to_json()` keeps it a JSON array with one element or none (Python's JSON knows a list).
#'
#' `schema_version` (the run spec's `record_schema_version`), `frontend`, `torch_version`, `libtorch_version`,
#' `language_version` and `clock` are filled in unless given. A `NULL` field is kept (it becomes JSON null).
#' `seconds_workload` is stamped last, from `workload_start` (the first line of `run_workload`), so building the record
#' is the script's own cost: what the harness calls its bridge starts after it.
make_record <- function(spec, workload_start, ...) {
  fields <- list(...)
  static <- c(static_fields(), list(schema_version = spec$record_schema_version))
  for (name in setdiff(names(static), names(fields))) {
    fields[name] <- list(static[[name]])
  }
  fields$seconds_workload <- clock() - workload_start
  record_fields <- names(spec$record_fields)
  missing <- setdiff(record_fields, names(fields))
  extra <- setdiff(names(fields), record_fields)
  if (length(missing) > 0L || length(extra) > 0L || anyDuplicated(names(fields)) > 0L) {
    abort_cli(c(
      "The run record's fields differ from the contract.",
      x = "Missing: {.val {missing}}; extra or repeated: {.val {c(extra, names(fields)[duplicated(names(fields))])}}."
    ))
  }
  record <- fields[record_fields]
  for (name in record_fields[startsWith(unlist(spec$record_fields, use.names = FALSE), "list of ")]) {
    if (!is.null(record[[name]])) record[[name]] <- I(record[[name]])
  }
  record
}

#' The record fields that are the same for every call of a process, looked up once: the version strings
#' (`packageVersion()` alone costs most of a millisecond, which a timed round would pay after its clock).
static_fields <- local({
  cached <- NULL
  function() {
    if (is.null(cached)) {
      cached <<- list(
        frontend = "r",
        torch_version = as.character(utils::packageVersion("torch")),
        libtorch_version = libtorch_version(), language_version = R.version.string, clock = clock_name
      )
    }
    cached
  }
})

#' R-only: the libtorch version R torch runs on, or `NULL` where the installed torch does not say.
#'
#' R torch keeps it as the internal string `torch_version` in R/install.R (e.g. "2.8.0"): the
#' libtorch that `install_torch()` downloads and lantern is built against. It is not exported, so
#' it is read from the namespace. A `TORCH_URL` install of another libtorch is not reflected.
libtorch_version <- function() {
  version <- get0("torch_version", envir = asNamespace("torch"), inherits = FALSE)
  if (is.character(version) && length(version) == 1L) version else NULL
}

#' `cpu` or the CUDA device's name.
#'
#' R torch has no device-name call (R/cuda.R: capability, count, memory stats only), so the name
#' comes from `nvidia-smi` for the current device (honouring `CUDA_VISIBLE_DEVICES`); `"cuda"` if
#' that fails.
device_name <- function(device) {
  if (device != "cuda") {
    return("cpu")
  }
  index <- torch::cuda_current_device()
  visible <- trimws(strsplit(Sys.getenv("CUDA_VISIBLE_DEVICES"), ",", fixed = TRUE)[[1]])
  id <- if (length(visible) > index) visible[[index + 1L]] else as.character(index)
  name <- tryCatch(
    suppressWarnings(system2(
      "nvidia-smi", c("--query-gpu=name", "--format=csv,noheader", paste0("--id=", shQuote(id))),
      stdout = TRUE, stderr = FALSE
    )),
    error = function(err) character()
  )
  if (length(name) == 1L && is.null(attr(name, "status")) && nzchar(trimws(name))) trimws(name) else "cuda"
}

#' The record as one line of JSON (the shell summary and what the bridge returns).
#'
#' Fields marked `I()` (as is: the list kinds, `make_record()`) stay arrays with one element or none; `NULL` and `NA`
#' become null; NaN and infinities are written
#' as Python's json does (`NaN`, `Infinity`), which jsonlite cannot. Doubles are written with 17
#' significant digits (`exact_json_numbers()`), so Python reads back the very same doubles. Written with
#' vectorised base R rather than `jsonlite::toJSON()` on the whole list, whose method dispatch per field
#' every timed round would pay as bridge overhead (Python's twin is `json.dumps`): the scalar strings and
#' doubles are each written in one call (a call costs tens of microseconds, whatever its length), and a
#' record with the contract's fields reuses their quoted keys (`record_keys_json`).
record_to_json <- function(record) {
  if (!is.list(record) || is.null(names(record))) {
    abort_cli("{.fn run_workload} must return a named list (the run record), not {.cls {class(record)}}.")
  }
  keys <- names(record)
  is_array <- vapply(record, inherits, NA, what = "AsIs", USE.NAMES = FALSE)
  is_scalar <- lengths(record) == 1L & !is_array
  is_string <- is_scalar & vapply(record, is.character, NA, USE.NAMES = FALSE)
  is_number <- is_scalar & vapply(record, is.double, NA, USE.NAMES = FALSE)
  is_null <- vapply(record, is.null, NA, USE.NAMES = FALSE)
  values <- character(length(record))
  values[is_string] <- json_string(unlist(record[is_string], use.names = FALSE))
  values[is_number] <- exact_json_numbers(unlist(record[is_number], use.names = FALSE))
  values[is_null] <- "null"
  for (k in which(!(is_string | is_number | is_null))) {
    values[[k]] <- json_value(record[[k]], is_array = is_array[[k]])
  }
  keys_json <- record_keys_json(keys)
  paste0("{", paste0(keys_json, ":", values, collapse = ","), "}")
}

#' R-only (Python has `json.dumps`): one field's value as JSON text: a number, string or logical, or an
#' array of them; `NULL` is null.
json_value <- function(value, is_array) {
  if (is.null(value)) {
    return("null")
  }
  value <- unlist(value, use.names = FALSE) # a list of numbers (the losses as collected) is a vector
  text <- if (is.double(value)) {
    exact_json_numbers(value)
  } else if (is.logical(value)) {
    ifelse(is.na(value), "null", ifelse(value, "true", "false"))
  } else if (is.integer(value)) {
    ifelse(is.na(value), "null", as.character(value))
  } else {
    json_string(as.character(value))
  }
  if (is_array || length(text) != 1L) paste0("[", paste(text, collapse = ","), "]") else text
}

#' R-only: strings as JSON text (vectorised: a record's keys in one call). Printable ASCII (every name, dtype,
#' version and ordinary path) is quoted by base R's `encodeString()`, which escapes `"` and `\\` exactly
#' as JSON does; any other string goes through jsonlite, which also escapes control characters and keeps
#' UTF-8. `NA` is null.
json_string <- function(x) {
  text <- encodeString(x, quote = "\"")
  other <- !is.na(x) & !grepl("^[ -~]*$", x)
  text[other] <- vapply(x[other], function(one) as.character(jsonlite::toJSON(one, auto_unbox = TRUE)), character(1L))
  text[is.na(x)] <- "null"
  text
}

#' R-only: a record's keys as JSON strings, quoted once per process for each list of keys (a record's keys are the same
#' call after call).
record_keys_json <- local({
  last_keys <- NULL
  last_json <- NULL
  function(keys) {
    if (!identical(keys, last_keys)) {
      last_json <<- json_string(keys)
      last_keys <<- keys
    }
    last_json
  }
})

#' R-only: doubles as JSON text that reads back as the very same doubles.
#'
#' jsonlite writes at most 15 significant digits (even with `digits = NA`), which is not enough for
#' a bitwise comparison with Python's shortest-round-trip floats; `%.17g` always is. NaN and infinities
#' are written as Python's json writes and reads them (`NaN`, `Infinity`, `-Infinity`), so a failure
#' report can say which it was ("loss is NaN at step 3 (r)"); only `NA` (nothing recorded) is `null`.
exact_json_numbers <- function(x) {
  if (all(is.finite(x))) {
    return(sprintf("%.17g", x)) # the usual case, without four passes of ifelse()
  }
  ifelse(is.finite(x), sprintf("%.17g", x),
    ifelse(is.nan(x), "NaN", ifelse(is.na(x), "null", ifelse(x > 0, "Infinity", "-Infinity")))
  )
}
