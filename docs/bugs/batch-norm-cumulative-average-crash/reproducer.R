# R torch bug: a batch norm with momentum = NULL (PyTorch's momentum=None: the cumulative moving average of the running
# statistics) stops at its first training forward. nn_batch_norm_'s forward sets
# `exponential_average_factor <- 1/self$num_batches_tracked`, a tensor, and hands it to nnf_batch_norm() as the
# momentum, a double (`print(torch:::nn_batch_norm_$public_methods$forward)` at mlverse/torch e4de110).
# PyTorch: 1.0 / float(self.num_batches_tracked); after batches x and 2x the running mean is their mean.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
bn <- nn_batch_norm1d(1, momentum = NULL)
x <- torch_tensor(matrix(c(1, 2, 3, 4), ncol = 1))
got <- tryCatch({
  bn(x); bn(x * 2)
  as.numeric(bn$running_mean)
}, error = function(e) conditionMessage(e))
cat(sprintf("R torch: running_mean after two batches: %s\n", paste(got, collapse = " ")))
cat("PyTorch: running_mean after two batches: 3.75\n")
if (!is.numeric(got) || abs(got - 3.75) > 1e-6) {
  cat("BUG: momentum = NULL (the cumulative average) does not run\n"); quit(status = 1)
}
