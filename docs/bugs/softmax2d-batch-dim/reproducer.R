# R torch bug: nn_softmax2d normalises a batched (N, C, H, W) input over N (dim = 1 in R's count), not over C
# (R/nn-activation.R, nn_softmax2d's forward, at mlverse/torch e4de110). Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
torch_manual_seed(0)
x <- torch_randn(2, 3, 2, 2)
sums <- as_array(nn_softmax2d()(x)$sum(dim = 2))
cat(sprintf("R torch: sums over the channels range %.4f .. %.4f\nPyTorch: all 1\n", min(sums), max(sums)))
if (any(abs(sums - 1) > 1e-5)) { cat("BUG: nn_softmax2d does not normalise over the channels\n"); quit(status = 1) }
cat("fixed: nn_softmax2d normalises over the channels\n")
