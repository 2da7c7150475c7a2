# R torch bug: nn_bilinear's default init bound is 1/sqrt(in2_features) (the weight's last size), PyTorch's
# 1/sqrt(in1_features) (R/nn-linear.R, nn_bilinear's reset_parameters, at mlverse/torch e4de110).
# nn_bilinear(4, 9, 2) after torch_manual_seed(1), the seed PyTorch shares: PyTorch's weight is R's times 3/2.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
torch_manual_seed(1)
b <- nn_bilinear(4, 9, 2)
top <- b$weight$abs()$max()$item()
cat(sprintf("R torch: largest |weight| %.4f (bound %.4f = 1/sqrt(9))\nPyTorch: bound 0.5 = 1/sqrt(4)\n", top, 1 / 3))
if (top <= 1 / 3) { cat("BUG: nn_bilinear's init bound uses in2_features\n"); quit(status = 1) }
cat("fixed: nn_bilinear's init bound uses in1_features\n")
