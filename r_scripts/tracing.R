#' The trace: named intermediates of a traced call, sent to the harness's recorder. The twin of `py_scripts/tracing.py`.
#'
#' Every point costs nothing unless the harness traces the call (docs/tracing.md): the bridge installs a sink with
#' `set_trace_sink()`, and may cut the trace to the names it still needs (`cut_trace()`).

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

#' Name the `{param}` points inside the optimizer's step by these parameters (`named`, the model's, whichever an
#' optimizer gets) from now on; `make_optimizer()` calls it. The trace reads them at every step (`traced_parameters()`).
name_trace_parameters <- function(named) {
  assign("params", named, envir = trace_state)
  invisible(NULL)
}

#' R-only: name `{param}` points and ignite's state by `opt`'s parameters from now on (the loop calls it before each
#' optimizer's step where it has two: `multi_optimizer`); Python's twin keys them by the tensor.
use_trace_names <- function(opt) {
  assign("groups", attr(opt, "trace_groups"), envir = trace_state)
  invisible(NULL)
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
