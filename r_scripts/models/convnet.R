#' The conv net (harness/contract/models.py, `convnet`): a convolution with reflect padding, batch norm, ReLU, a 2x2 max
#' pool; a convolution with circular padding, group norm, ReLU; bilinear interpolation, a 2x2 average pool and a Linear
#' head. The twin of `py_scripts/models/convnet.py`; its float64 reference is `harness/judge/models/convnet.py`.

#' The modules, named as the contract names their parameters, on the spec's device. The batch norm keeps the default
#' momentum 0.1: `momentum = NULL`, the cumulative average, stops R torch at the first forward
#' (docs/bugs/batchnorm-momentum-null).
build <- function(spec) {
  dims <- spec$model$dims
  width <- dims$WIDTH
  resized <- dims$RESIZED
  net <- torch::nn_module_dict(list(
    conv1 = torch::nn_conv2d(dims$CHANNELS, width, 3, padding = 1, padding_mode = "reflect"),
    bn = torch::nn_batch_norm2d(width),
    pool = torch::nn_max_pool2d(2),
    conv2 = torch::nn_conv2d(width, width, 3, padding = 1, padding_mode = "circular"),
    norm = torch::nn_group_norm(dims$GROUPS, width),
    avgpool = torch::nn_avg_pool2d(2),
    head = torch::nn_linear(width * (resized %/% 2)^2, dims$OUTPUTS)
  ))
  net$to(device = spec$device)
  net$resized <- resized # the interpolation's output size, for forward
  net
}

#' Each module's output a trace point, and the batch norm's running statistics after it updates them; `unused`: 1 leaves
#' the second convolution and its norm out this step; `custom`: `list(2, fn)`, the head computed by `fn(features, head)`.
forward <- function(net, x, step, unused, custom) {
  if (!unused %in% c(-1L, 1L) || (!is.null(custom) && custom$layer != 2L)) {
    stop("the conv net can leave out layer 1 (its second convolution) and replace layer 2 (its head) only")
  }
  x <- net$conv1(x)
  trace_point(step, "forward.conv1", x)
  x <- net$bn(x)
  trace_point(step, "forward.bn", x)
  trace_point(step, "forward.bn.running_mean", net$bn$running_mean)
  trace_point(step, "forward.bn.running_var", net$bn$running_var)
  x <- net$pool(torch::torch_relu(x))
  trace_point(step, "forward.pool", x)
  if (unused != 1L) {
    x <- net$conv2(x)
    trace_point(step, "forward.conv2", x)
    x <- torch::torch_relu(net$norm(x))
    trace_point(step, "forward.norm", x)
  }
  x <- torch::nnf_interpolate(x, size = c(net$resized, net$resized), mode = "bilinear", align_corners = FALSE)
  trace_point(step, "forward.interpolate", x)
  x <- net$avgpool(x)$flatten(start_dim = 2)
  trace_point(step, "forward.avgpool", x)
  out <- if (!is.null(custom)) custom$fn(x, net$head) else net$head(x)
  trace_point(step, "forward.head", out)
  out
}
