# R torch bug: nn_multihead_attention registers out_proj before in_proj_weight/in_proj_bias, so its parameters come in
# another order than PyTorch's (R/nn-activation.R at mlverse/torch e4de110). Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
got <- names(nn_multihead_attention(4, 2)$parameters)
expected <- c("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")
cat(sprintf("R torch: %s\nPyTorch: %s\n", toString(got), toString(expected)))
if (!identical(got, expected)) { cat("BUG: nn_multihead_attention's parameters are in another order\n"); quit(status = 1) }
cat("fixed: the same order\n")
