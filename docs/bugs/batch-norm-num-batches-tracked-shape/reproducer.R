# R torch bug: nn_batch_norm*'s num_batches_tracked buffer has shape (1); PyTorch's has shape () (R/nn-batchnorm.R,
# nn_batch_norm_'s initialize, at mlverse/torch e4de110). Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
shape <- nn_batch_norm1d(3)$num_batches_tracked$shape
cat(sprintf("R torch: num_batches_tracked shape (%s)\nPyTorch: num_batches_tracked shape ()\n", toString(shape)))
if (length(shape) != 0L) { cat("BUG: num_batches_tracked is not a 0-d tensor\n"); quit(status = 1) }
cat("fixed: num_batches_tracked is a 0-d tensor\n")
