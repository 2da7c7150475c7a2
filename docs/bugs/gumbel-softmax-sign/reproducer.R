# R torch bug: nnf_gumbel_softmax() draws the negative of Gumbel noise. R/nnf-activation.R:177-178 (mlverse/torch e4de110):
#   gumbels <- -torch_empty_like(logits, ...)      # negates the EMPTY tensor
#   gumbels <- gumbels$exponential_()$log()         # then overwrites it: log(E), the minus is lost
# PyTorch (torch/nn/functional.py:2266-2270): gumbels = -torch.empty_like(logits).exponential_().log(), i.e. -log(E) ~ Gumbel(0, 1).
# With 3 or more classes the samples no longer follow softmax(logits): for logits (0, 1, 2) the hard samples pick class 3
# about 70 % of the time instead of 66.5 % (two classes hide it: a difference of two negated Gumbels is logistic too).
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
torch_manual_seed(0)
logits <- torch_tensor(c(0, 1, 2))$expand(c(100000, 3))
shares <- as_array(nnf_gumbel_softmax(logits, hard = TRUE)$mean(1))
expected <- as_array(nnf_softmax(torch_tensor(c(0, 1, 2)), 1))
cat(sprintf("R torch, 100000 hard samples of logits (0, 1, 2): class shares %s\n", toString(round(shares, 4))))
cat(sprintf("softmax(logits), what the Gumbel-max trick samples (PyTorch: 0.089, 0.2467, 0.6643 after seed 0): %s\n",
            toString(round(expected, 4))))
if (max(abs(shares - expected)) > 0.01) { cat("BUG: nnf_gumbel_softmax draws -Gumbel noise\n"); quit(status = 1) }
cat("fixed: nnf_gumbel_softmax draws Gumbel noise\n")
