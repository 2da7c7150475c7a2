#' The run spec's gradient scaler, and what the scaler modes do to it: an injected overflow, what its inf check found.
#' The twin of `py_scripts/scaler.py`; R-only here, the lift of R torch's CUDA-only check on CPU (PyTorch's scaler takes
#' CPU tensors itself).

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
      i = "Run this cell on CUDA, or update {.var expected_scale_method} in r_scripts/scaler.R."
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

#' Put an inf into one gradient element (the first element of the first parameter that has a gradient: a frozen
#' layer's have none), as an fp16 overflow would.
inject_overflow <- function(net) {
  torch::with_no_grad({
    # the first parameter that has a gradient, as Python's twin (a frozen layer's is undefined)
    param <- Find(function(p) !torch::is_undefined_tensor(p$grad), named_parameters(net))
    grad <- param$grad
    # `[<-.torch_tensor` writes into the tensor in place (tensor_slice_put_), at index 1 of every dimension
    do.call(`[<-`, c(list(grad), as.list(rep(1L, grad$dim())), list(value = Inf)))
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
