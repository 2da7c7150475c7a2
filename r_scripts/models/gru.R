#' The recurrent model (harness/contract/models.py, `gru`): a GRU over a sequence, its last hidden state into a Linear
#' head. The twin of `py_scripts/models/gru.py`; its float64 reference is `harness/judge/models/gru.py`.

#' The GRU (batch first) and the head, on the spec's device. R torch names the GRU's parameters from layer 1
#' (`weight_ih_l1`, PyTorch `weight_ih_l0`): `make_model()` copies them in their order, which is PyTorch's.
build <- function(spec) {
  dims <- spec$model$dims
  net <- torch::nn_module_dict(list(
    gru = torch::nn_gru(dims$FEATURES, dims$HIDDEN, batch_first = TRUE),
    head = torch::nn_linear(dims$HIDDEN, dims$OUTPUTS)
  ))
  net$to(device = spec$device)
  net
}

#' The GRU's outputs at every step (`forward.gru`), its last hidden state (`forward.hidden`), the head's output
#' (`forward.head`); `custom`: `list(1, fn)`, the head computed by `fn(hidden, head)`.
forward <- function(net, x, step, unused, custom) {
  if (unused != -1L || (!is.null(custom) && custom$layer != 1L)) {
    stop("the GRU model has no layer to leave out and can replace layer 1 (its head) only")
  }
  result <- net$gru(x)
  trace_point(step, "forward.gru", result[[1]])
  last <- result[[2]][1, , ]
  trace_point(step, "forward.hidden", last)
  out <- if (!is.null(custom)) custom$fn(last, net$head) else net$head(last)
  trace_point(step, "forward.head", out)
  out
}
