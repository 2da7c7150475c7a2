# R torch bug: nn_rnn has no unbatched (L, H_in) input: it returns an output of another shape than PyTorch's
# (R/nn-rnn.R, nn_rnn_base's forward, at mlverse/torch e4de110). Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
shape <- nn_rnn(2, 3)(torch_randn(5, 2))[[1]]$shape
cat(sprintf("R torch: output shape (%s)\nPyTorch: output shape (5, 3)\n", toString(shape)))
if (!identical(as.integer(shape), c(5L, 3L))) { cat("BUG: nn_rnn does not take an unbatched input\n"); quit(status = 1) }
cat("fixed: nn_rnn takes an unbatched input\n")
