# R torch bug: cross entropy with probability targets subtracts 1 from the probabilities (to_index_tensor() on a float
# target, in torch_cross_entropy_loss(), R/gen-namespace.R at mlverse/torch e4de110).
# Logits (1, 2, 3), target probabilities (0.2, 0.3, 0.5): PyTorch gives 1.1076. Exits 1 while the bug exists (R: -3.1152).
suppressPackageStartupMessages(library(torch))
got <- nnf_cross_entropy(torch_tensor(rbind(c(1, 2, 3))), torch_tensor(rbind(c(0.2, 0.3, 0.5))))$item()
cat(sprintf("R torch: %.4f\nPyTorch: 1.1076\n", got))
if (abs(got - 1.1076) > 1e-3) { cat("BUG: probability targets are shifted by -1\n"); quit(status = 1) }
cat("fixed: probability targets are taken as they are\n")
