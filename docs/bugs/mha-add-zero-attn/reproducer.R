# R torch bug: nn_multihead_attention(add_zero_attn = TRUE) stops at forward. nnf_multi_head_attention_forward()
# (R/nnf-activation.R:699-708 at mlverse/torch e4de110) appends the zero attention column to k twice (line 706 assigns
# k where v is meant), so the keys have one column more than the values and torch_bmm(weights, v) refuses the shapes.
# PyTorch (torch/nn/functional.py:6978-6989) appends one zero column to k and one to v.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
torch_manual_seed(0)
attention <- nn_multihead_attention(embed_dim = 4, num_heads = 2, add_zero_attn = TRUE)
x <- torch_randn(3, 2, 4)
said <- tryCatch(paste(attention(x, x, x)[[1]]$shape, collapse = "x"),
                 error = function(e) paste("error:", strsplit(conditionMessage(e), "\n")[[1]][1]))
cat(sprintf("R torch nn_multihead_attention(add_zero_attn = TRUE) of a 3x2x4 input: %s\n", said))
cat("PyTorch: an output of shape 3x2x4\n")
if (!identical(said, "3x2x4")) { cat("BUG: add_zero_attn pads the keys twice and the values not at all\n"); quit(status = 1) }
cat("fixed: add_zero_attn runs\n")
