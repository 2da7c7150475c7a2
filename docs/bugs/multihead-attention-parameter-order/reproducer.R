# R torch bug: nn_Module's `parameters` active binding lists a module's children's parameters before its own (R/nn.R
# at mlverse/torch e4de110), so nn_multihead_attention's come out_proj first, in another order than PyTorch's (its
# state_dict() is in PyTorch's order). Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
got <- names(nn_multihead_attention(4, 2)$parameters)
expected <- c("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")
cat(sprintf("R torch: %s\nPyTorch: %s\n", toString(got), toString(expected)))
if (!identical(got, expected)) { cat("BUG: nn_multihead_attention's parameters are in another order\n"); quit(status = 1) }
cat("fixed: the same order\n")
