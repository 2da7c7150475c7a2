# R torch bug: nn_batch_norm1d/2d/3d(momentum = NULL), the cumulative moving average R torch documents, stops at the first
# training forward: R/nn-batchnorm.R:81 (mlverse/torch e4de110) sets exponential_average_factor <- 1 / self$num_batches_tracked,
# a tensor, and passes it as nnf_batch_norm()'s momentum, a double ("Not compatible with requested type"). PyTorch
# (torch/nn/modules/batchnorm.py:192) uses 1.0 / float(self.num_batches_tracked): after two batches the running mean is
# the plain average of the two batch means.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
m <- nn_batch_norm1d(2, momentum = NULL)
batches <- list(torch_tensor(rbind(c(1, 10), c(3, 30))), torch_tensor(rbind(c(5, 50), c(7, 70))))
said <- tryCatch({ for (x in batches) m(x); "ran" }, error = function(e) conditionMessage(e))
cat(sprintf("R torch nn_batch_norm1d(momentum = NULL), two training batches: %s\n", said))
if (identical(said, "ran")) cat(sprintf("R torch running_mean: %s\n", toString(as_array(m$running_mean))))
cat("PyTorch running_mean: 4, 40 (the average of the batch means 2, 20 and 6, 60)\n")
if (!identical(said, "ran") || !isTRUE(all.equal(as_array(m$running_mean), c(4, 40), tolerance = 1e-6))) {
  cat("BUG: nn_batch_norm's cumulative moving average (momentum = NULL) does not run\n"); quit(status = 1)
}
cat("fixed: momentum = NULL keeps the cumulative average\n")
