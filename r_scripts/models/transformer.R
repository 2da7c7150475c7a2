#' The transformer text classifier (harness/contract/models.py, `transformer`): token and position embeddings (padding
#' index 0, as PyTorch counts), one `nn_transformer_encoder_layer()` with a key-padding mask, masked mean pooling, a
#' Linear head, and `nn_cross_entropy_loss()` on class indices plus on class probabilities (with `label_smoothing` in the
#' `transformer_smoothing` row, which runs these files). The twin of
#' `py_scripts/models/transformer.py`; its float64 reference is `harness/judge/models/transformer.py`.

#' The four modules, named as the contract names their parameters, on the spec's device. Dropout 0 (a dropout mask is
#' each binding's own RNG). R counts tokens from 1, so the padding token, PyTorch's 0, is R's 1: `padding_idx = 1`, as
#' an R user writes it (R/nn-sparse.R, `nn_embedding`, zeroes row 1 at init).
build <- function(spec) {
  dims <- spec$model$dims
  width <- dims$WIDTH
  net <- torch::nn_module_dict(list(
    embed = torch::nn_embedding(dims$VOCAB, width, padding_idx = 1L),
    position = torch::nn_embedding(dims$SEQ, width),
    encoder = torch::nn_transformer_encoder_layer(width, dims$HEADS, dims$FEEDFORWARD, dropout = 0, batch_first = TRUE),
    head = torch::nn_linear(width, dims$CLASSES)
  ))
  net$to(device = spec$device)
  net
}

#' Each module's output a trace point (`forward.embed`, `forward.position`, `forward.encoder`, `forward.pool`,
#' `forward.head`); `unused`: 1 leaves the encoder layer out this step; `custom`: `list(2, fn)`, the head computed by
#' `fn(pooled, head)`.
forward <- function(net, x, step, unused, custom) {
  if (!unused %in% c(-1L, 1L) || (!is.null(custom) && custom$layer != 2L)) {
    stop("the transformer can leave out layer 1 (its encoder layer) and replace layer 2 (its head) only")
  }
  tokens <- x$to(dtype = torch::torch_long()) + 1L # the fixture's ids are whole numbers from 0; R's indices start at 1
  padding <- tokens == 1L
  h <- net$embed(tokens)
  trace_point(step, "forward.embed", h)
  positions <- net$position(torch::torch_arange(1L, tokens$shape[[2]], dtype = torch::torch_long(), device = tokens$device))
  trace_point(step, "forward.position", positions)
  h <- h + positions
  if (unused != 1L) {
    h <- net$encoder(h, src_key_padding_mask = padding)
    trace_point(step, "forward.encoder", h)
  }
  keep <- (!padding)$unsqueeze(-1)$to(dtype = h$dtype)
  pooled <- (h * keep)$sum(dim = 2) / keep$sum(dim = 2)
  trace_point(step, "forward.pool", pooled)
  out <- if (!is.null(custom)) custom$fn(pooled, net$head) else net$head(pooled)
  trace_point(step, "forward.head", out)
  out
}

#' Cross-entropy on the class indices (the target's first column, made 1-based as R counts classes) plus cross-entropy
#' on the class probabilities (the other columns), each with `nn_cross_entropy_loss()` as its users call it: with
#' `label_smoothing` where the model's row gives one (`LABEL_SMOOTHING_PERCENT`, the `transformer_smoothing` row), else
#' without. R torch's `nn_cross_entropy_loss()` takes no `label_smoothing` (R/nn-loss.R): the cell is refused in R's words.
loss <- function(output, target, dims) {
  classes <- target[, 1]$to(dtype = torch::torch_long()) + 1L
  probs <- target[, 2:target$shape[[2]]]
  smoothing <- if (is.null(dims$LABEL_SMOOTHING_PERCENT)) 0 else dims$LABEL_SMOOTHING_PERCENT / 100
  criterion <- if (smoothing != 0) smoothed_cross_entropy(smoothing) else torch::nn_cross_entropy_loss()
  criterion(output, classes) + criterion(output, probs)
}

#' R-only: `nn_cross_entropy_loss(label_smoothing = smoothing)`, as a PyTorch user writes it; R torch's error, where it
#' refuses the argument, refuses the cell (`amp_parity_refused`: the harness reports it unsupported, in those words).
smoothed_cross_entropy <- function(smoothing) {
  # do.call: R's error names the value, as a user's call with the number written in it does
  tryCatch(do.call(torch::nn_cross_entropy_loss, list(label_smoothing = smoothing)), error = function(e) {
    abort_cli("R torch {packageVersion('torch')}'s {.fn nn_cross_entropy_loss} refuses {.arg label_smoothing}: {conditionMessage(e)}",
              class = "amp_parity_refused")
  })
}
