#' The MLP (harness/contract/models.py, `mlp`): the AMP recipe's Linear+ReLU ... Linear. The twin of
#' `py_scripts/models/mlp.py`; its float64 reference is `harness/judge/models/mlp.py`. Sourced by model.R into an
#' environment of its own.

#' `num_layers` Linear layers, a ReLU after each but the last, on the spec's device (their values are the fixtures',
#' copied in by `make_model()`). R's `nn_linear()` has no `device` argument (R/nn-linear.R): each layer is moved with
#' `$to()` (in place, R/nn.R `.apply`), as Python builds it on the device.
build <- function(spec) {
  layers <- list()
  for (k in seq_len(spec$num_layers) - 1L) {
    out_features <- if (k == spec$num_layers - 1L) spec$out_size else spec$in_size
    linear <- torch::nn_linear(spec$in_size, out_features)
    linear$to(device = spec$device)
    layers <- c(layers, list(linear))
    if (k < spec$num_layers - 1L) {
      layers <- c(layers, list(torch::nn_relu()))
    }
  }
  do.call(torch::nn_sequential, layers)
}

#' Layer by layer, each module's output a trace point (`forward.layer0`, `forward.relu0`, ...); `unused`: a layer left
#' out this step, its Linear and its ReLU (-1: none); `custom`: `list(layer, fn)`, that layer computed by `fn(x, linear)`
#' in place of the Linear's own forward.
#'
#' What `nn_sequential()`'s forward does (each module on the previous output, R/nn.R), written out because
#' R torch has tensor hooks but no module forward hooks: both languages name their points here, in the
#' same order.
forward <- function(net, x, step, unused, custom) {
  linears <- Filter(function(module) inherits(module, "nn_linear"), net$children)
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
