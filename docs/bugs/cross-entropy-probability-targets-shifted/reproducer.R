# R torch bug: nnf_cross_entropy / nn_cross_entropy_loss with class-PROBABILITY targets (a float target of the
# input's shape, which libtorch supports) subtract 1 from every probability: R torch's torch_cross_entropy_loss
# wrapper calls `target <- to_index_tensor(target)` whatever the target's dtype (`print(torch:::torch_cross_entropy_loss)`
# at mlverse/torch e4de110), a conversion meant for class indices.
# logits ((0.5, 0.1), (0.2, 0.3)), probabilities ((0.25, 0.75), (0.5, 0.5)): PyTorch 0.75371, R -0.65371.
# Exits 1 while the bug exists.
suppressPackageStartupMessages(library(torch))
logits <- torch_tensor(rbind(c(0.5, 0.1), c(0.2, 0.3)))
probs <- torch_tensor(rbind(c(0.25, 0.75), c(0.5, 0.5)))
got <- as.numeric(nn_cross_entropy_loss()(logits, probs))
cat(sprintf("R torch: nn_cross_entropy_loss with probability targets = %.5f\n", got))
cat("PyTorch: nn.CrossEntropyLoss with probability targets = 0.75371\n")
if (abs(got - 0.75371) > 1e-4) {
  cat("BUG: the probability targets were shifted by -1, as class indices are\n"); quit(status = 1)
}
