# R torch bug: nn_multihead_attention has no unbatched (L, E) input: nnf_multi_head_attention_forward reads a third size
# that is not there (R/nnf-activation.R at mlverse/torch e4de110). Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
mha <- nn_multihead_attention(4, 2)
x <- torch_randn(3, 4)
err <- tryCatch({ mha(x, x, x); NULL }, error = function(e) conditionMessage(e))
cat(sprintf("R torch: %s\nPyTorch: an output of shape (3, 4)\n", if (is.null(err)) "runs" else err))
if (!is.null(err)) { cat("BUG: nn_multihead_attention does not take an unbatched input\n"); quit(status = 1) }
cat("fixed\n")
