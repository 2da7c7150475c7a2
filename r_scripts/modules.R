#' The module sweep's R side (twin: py_scripts/modules.py): each sample of one PyTorch module_db entry built with R torch
#' from the arguments the mapping made of PyTorch's (harness/workload/modules.toml), given PyTorch's initial weights by
#' name, fed the same inputs and upstream gradients, run forward and backward in every mode, and written to safetensors
#' files under the names PyTorch gives each tensor, for the Python worker to compare.
#'
#' What R refuses (a constructor it lacks, an argument, a dtype) is answered in R's own words, never hidden: the sweep
#' counts it `unsupported`. The harness's R worker sources this file (harness/worker_side/r_handler.py) and calls
#' `amp_parity_modules_reply()`.

script <- "modules"

#' Each tensor of a forward's output with its path (`out`, `out.1.0`), the positions counted from 0 as Python counts
#' them; `NULL` is skipped, its place kept.
flatten <- function(value, path = "out") {
  if (inherits(value, "torch_tensor")) {
    return(stats::setNames(list(value), path))
  }
  if (is.list(value)) {
    parts <- lapply(seq_along(value), function(i) flatten(value[[i]], paste0(path, ".", i - 1L)))
    return(do.call(c, c(list(list()), parts)))
  }
  list()
}

#' A value back from the plain data the sweep sends: a tensor by its key in `tensors` (a float one cast to `dtype` in a
#' low-precision mode, made a fresh leaf; one holding class indices moved to R's 1-based count where it says `shift`),
#' a JSON array a vector, a dtype R torch's, a function by its name (R torch takes an activation by name).
#' `leaves`: an environment the input tensors are kept in, by key (their gradients are compared).
decode <- function(value, tensors, dtype = NULL, leaves = NULL) {
  if (is.null(value) || !is.list(value)) {
    return(value)
  }
  if (is.null(names(value))) { # a JSON array of numbers or booleans
    return(unlist(value))
  }
  if (!is.null(value$tensor)) {
    t <- tensors[[value$tensor]]$clone()
    if (isTRUE(value$shift == 1) && !t$is_floating_point()) { # class probabilities (a float target) are no indices
      # $ge() and $add() take the number as a scalar: R's `t >= 0L` makes 0L a tensor of shape (1), and a 0-d target
      # would come out of shape (1)
      t <- torch::torch_where(t$ge(0L), t$add(1L), t)
    }
    if (!is.null(dtype) && t$is_floating_point()) {
      t <- t$to(dtype = dtype)
    }
    t <- t$requires_grad_(isTRUE(value$grad))
    if (!is.null(leaves)) assign(value$tensor, t, envir = leaves)
    return(t)
  }
  if (!is.null(value$list)) {
    return(lapply(value$list, decode, tensors = tensors, dtype = dtype, leaves = leaves))
  }
  if (!is.null(value$dtype)) {
    return(get(paste0("torch_", value$dtype), envir = asNamespace("torch"))())
  }
  if (!is.null(value$float)) {
    return(c(inf = Inf, `-inf` = -Inf, nan = NaN)[[value$float]])
  }
  if (!is.null(value$callable)) {
    return(value$callable)
  }
  if (!is.null(value$module)) { # a module argument (a transformer encoder's layer), made by its own R constructor
    if (is.null(value$module$constructor)) {
      stop("R torch has no module to pass for PyTorch's ", value$module$class)
    }
    args <- lapply(value$module$args, decode, tensors = tensors)
    return(do.call(get(value$module$constructor, envir = asNamespace("torch")), args))
  }
  if (!is.null(value$dict)) {
    return(lapply(value$dict, decode, tensors = tensors, dtype = dtype, leaves = leaves))
  }
  stop("a value the sweep cannot pass to R: ", names(value)[[1]])
}

#' The module built after the sweep's seed, as an R torch user builds it; a module among its arguments is made after
#' the seed too (`args` as the sweep sent them, decoded here), as PyTorch's side makes it again.
build <- function(constructor, args, seed, tensors) {
  torch::torch_manual_seed(seed)
  do.call(constructor, lapply(args, decode, tensors = tensors))
}

#' One forward and backward of `module` in `mode`; the tensors compared, by PyTorch's names (`names`: PyTorch's name of
#' each parameter and buffer → R's).
run_mode <- function(module, sample, tensors, mode, seed, names, parameters, buffers) {
  weights <- if (is.null(mode$weights)) NULL else get(paste0("torch_", mode$weights), envir = asNamespace("torch"))()
  if (!is.null(weights)) {
    module$to(dtype = weights)
  }
  leaves <- new.env()
  args <- lapply(sample$forward$args, decode, tensors = tensors, dtype = weights, leaves = leaves)
  kwargs <- lapply(sample$forward$kwargs, decode, tensors = tensors, dtype = weights, leaves = leaves)
  torch::torch_manual_seed(seed) # a module that draws in its forward (fractional max pooling) draws what PyTorch's drew
  if (is.null(mode$autocast)) {
    output <- do.call(module, c(args, kwargs))
  } else {
    amp <- get(paste0("torch_", mode$autocast), envir = asNamespace("torch"))()
    output <- torch::with_autocast(device_type = "cpu", dtype = amp, do.call(module, c(args, kwargs)))
  }
  outputs <- flatten(output)
  kept <- lapply(outputs, function(t) t$detach()$clone())
  roots <- list()
  grads <- list()
  for (path in names(outputs)) {
    t <- outputs[[path]]
    upstream <- tensors[[paste0("upstream.", path)]]
    # An output PyTorch gives no gradient, or of another shape than PyTorch's, gets none: the comparison names it
    if (t$requires_grad && !is.null(upstream) && identical(t$shape, upstream$shape)) {
      roots[[length(roots) + 1L]] <- t
      grads[[length(grads) + 1L]] <- upstream$to(dtype = t$dtype)
    }
  }
  if (length(roots) > 0L) {
    torch::autograd_backward(roots, grads)
  }
  for (key in ls(leaves)) {
    g <- get(key, envir = leaves)$grad
    if (!torch::is_undefined_tensor(g)) kept[[paste0("grad.", key)]] <- g$detach()$clone()
  }
  own <- module$parameters
  for (name in parameters) { # one R's module lacks is left out: the comparison names it
    p <- own[[names[[name]]]]
    if (!is.null(p) && !torch::is_undefined_tensor(p$grad)) kept[[paste0("grad.", name)]] <- p$grad$detach()$clone()
  }
  state <- module$state_dict()
  for (name in buffers) {
    b <- state[[names[[name]]]]
    if (!is.null(b)) kept[[paste0("buffer.", name)]] <- b$detach()$clone()
  }
  kept
}

#' R-only: PyTorch's initial weights copied into R's module, each by the name R gives it. A name R's module lacks is
#' left out here: the comparison names it (its gradient and initial value are missing on R's side), so a module that
#' holds fewer tensors than PyTorch's, or a name map that is wrong, is a difference where it begins, not a refusal.
load_weights <- function(module, names, tensors) {
  state <- module$state_dict()
  torch::with_no_grad({
    for (name in names(names)) {
      target <- state[[names[[name]]]]
      if (!is.null(target)) target$copy_(tensors[[paste0("init.", name)]])
    }
  })
  invisible(module)
}

#' R-only: PyTorch's name of each of R's names (the inverse of the mapping's), an R name it lacks kept as R's.
python_names <- function(r_names, names) {
  back <- stats::setNames(names(names), unlist(names))
  vapply(r_names, function(n) if (is.null(back[n]) || is.na(back[n])) n else back[[n]], "")
}

#' R-only: every sample of one entry, per sample R's answer in every mode (Python's `prepare_module` draws the samples
#' and runs them in the same call; R only runs what it is given).
run_module <- function(request) {
  lapply(request$samples, run_sample, request = request)
}

#' R-only: one sample: its initial weights after the seed (with the order of its parameters and its state_dict's names),
#' then each mode. An error in R's words is the sample's (or the mode's) `unsupported` reason.
run_sample <- function(sample, request) {
  base <- file.path(request$folder, sample$index)
  seed <- request$seed
  answer <- list(index = sample$index, modes = stats::setNames(list(), character(0))) # {} in JSON
  constructor <- tryCatch(get(sample$constructor, envir = asNamespace("torch"), inherits = FALSE),
                          error = function(e) e)
  if (inherits(constructor, "error")) {
    answer$unsupported <- one_line(constructor)
    return(answer)
  }
  tensors <- safetensors::safe_load_file(paste0(base, ".inputs.safetensors"), framework = "torch")
  args <- sample$args
  module <- tryCatch(build(constructor, args, seed, tensors), error = function(e) e)
  if (inherits(module, "error")) {
    answer$unsupported <- one_line(module)
    return(answer)
  }
  names <- sample$names
  state <- module$state_dict()
  init <- lapply(state, function(t) t$detach()$clone())
  names(init) <- python_names(names(state), names)
  safetensors::safe_save_file(init, paste0(base, ".init.r.safetensors"))
  answer$parameters <- unname(python_names(names(module$parameters), names))
  answer$state_dict <- unname(python_names(names(state), names))
  for (mode in request$modes) {
    answer$modes[[mode$name]] <- tryCatch({
      module <- load_weights(build(constructor, args, seed, tensors), names, tensors)
      kept <- run_mode(module, sample, tensors, mode, seed, names, unlist(sample$parameters), unlist(sample$buffers))
      safetensors::safe_save_file(kept, paste0(base, ".", mode$name, ".r.safetensors"))
      list(status = "ok")
    }, error = function(e) list(status = "unsupported", message = one_line(e)))
  }
  answer
}

#' An R error's message as one line: libtorch's text up to where it says where it raised it (its C++ frames left out).
one_line <- function(err) {
  text <- paste(conditionMessage(err), collapse = "\n")
  text <- sub("\\n?Exception raised from.*$", "", text)
  text <- gsub("<pointer: 0x[0-9a-f]+>", "<pointer>", text) # a tensor R prints by its address: the same line every run
  lines <- strsplit(trimws(text), "\n", fixed = TRUE)[[1]]
  lines <- trimws(lines[nzchar(trimws(lines))])
  paste(lines[seq_len(min(2L, length(lines)))], collapse = " ")
}

#' R-only: what the worker calls: the request as JSON in, `c("ok", answer as JSON)` or `c("error", message)` out (an
#' error here is the sweep's, not a sample's: a sample's errors are inside its answer).
amp_parity_modules_reply <- function(request_json) {
  tryCatch({
    request <- jsonlite::fromJSON(request_json, simplifyVector = FALSE)
    c("ok", as.character(jsonlite::toJSON(run_module(request), auto_unbox = TRUE, null = "null")))
  }, error = function(e) c("error", one_line(e)))
}
