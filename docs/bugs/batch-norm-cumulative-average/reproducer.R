# R torch bug: nn_batch_norm1d(momentum = NULL), PyTorch's cumulative moving average, stops at its first training
# forward (R/nn-batchnorm.R, nn_batch_norm_'s forward, at mlverse/torch e4de110). Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
bn <- nn_batch_norm1d(3, momentum = NULL)
err <- tryCatch({ bn(torch_randn(4, 3)); NULL }, error = function(e) conditionMessage(e))
cat(sprintf("R torch: %s\nPyTorch: the forward runs; the running mean is the batch mean\n", if (is.null(err)) "the forward runs" else err))
if (!is.null(err)) { cat("BUG: batch norm with momentum = NULL fails\n"); quit(status = 1) }
cat("fixed\n")
