#' The run spec's optimizer, built by one code path for every row. The twin of `py_scripts/optimizer.py`.

#' The run spec's optimizer (`optimizer`: its row of harness/workload/optimizers.py, under R torch's names).
#'
#' One code path for every optimizer: the R torch function the row names, called with the parameters and the row's
#' arguments (`do.call()`); the R-code family (`optim_adam`, ...) and the libtorch family (`optim_ignite_adam`, ...)
#' alike. JSON pairs (betas, etas, step sizes) arrive as numeric vectors, as R torch takes them. `layers`: only those
#' layers' parameters (0-based, the model's layers; `NULL`: all). `groups`: the `param_groups` row's factors (the loop
#' feature's hooks pass them; `NULL`: one group).
make_optimizer <- function(spec, net, layers = NULL, groups = NULL) {
  r <- spec$optimizer$r
  constructor <- getExportedValue("torch", r[["function"]])
  named <- named_parameters(net)
  # the parameters, which the trace reads at every step: all of them, whichever this optimizer gets (multi_optimizer)
  name_trace_parameters(named)
  if (!is.null(layers)) { # only those layers' parameters (0-based, as Python's twin counts)
    named <- layer_parameters(net, layers)
  }
  # what {param} points are named by: each param group's names, in the order the optimizer holds them (Python's twin
  # keys them by the tensor, which R cannot)
  assign("groups", list(names(named)), envir = trace_state)
  # in the contract's order, PyTorch's, which names the {param} points and orders them: `net$parameters` lists a module's
  # children's parameters before its own (the transformer's out_proj before in_proj_weight, docs/bugs/
  # multihead-attention-parameter-order); an optimizer's update of each does not depend on it
  params <- unname(named)
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
